"""Endpoints: the configured OpenAI-compatible servers and a check that one answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from judge.errors import EndpointError

# Only what every command needs is imported here. The stages, the model client (openai), the
# reports (matplotlib) and the reliability section (scipy, scikit-learn, pandas) are imported
# inside the functions that use them, so a command that only reads the store starts in a
# fraction of the time (see tests/server/test_startup.py).
if TYPE_CHECKING:
    from judge.config import Settings


def list_endpoints(settings: Settings) -> list[dict[str, Any]]:
    """The configured endpoints without their secrets (an API key is named by its
    environment variable in the config, and neither is returned)."""
    uses: dict[str, list[str]] = {}
    uses.setdefault(settings.generation.endpoint, []).append("generation")
    uses.setdefault(settings.judge.endpoint, []).append("judge")
    return [
        {"name": name, "base_url": e.base_url, "model": e.model, "uses": uses.get(name, [])}
        for name, e in sorted(settings.endpoints.items())
    ]


def check_endpoint(settings: Settings, name: str) -> dict[str, Any]:
    """Whether the endpoint answers, and the models it serves (never raises for an endpoint
    that is down: that is the answer)."""
    from judge.models.client import ModelClient

    client = ModelClient(name, settings.endpoint(name))
    try:
        models = client.served_models()
    except EndpointError as exc:
        return {"name": name, "reachable": False, "models": [], "message": str(exc)}
    except Exception as exc:  # an endpoint with no /models route still answered
        return {"name": name, "reachable": True, "models": [], "message": str(exc)}
    served = settings.endpoints[name].model in models or not models
    message = "ok" if served else f"it does not serve {settings.endpoints[name].model!r}"
    return {"name": name, "reachable": True, "models": models, "message": message}
