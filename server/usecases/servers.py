"""The local servers FairJudge manages: the embedded model (llama.cpp) and its own Label
Studio. Each is started, stopped and asked how it stands through these functions."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from annotation.labelstudio.service import LabelStudioService, ServiceStatus
    from judge.config import Settings
    from judge.models.embedded import EmbeddedServer
    from judge.models.embedded import MeasuredSpeed as MeasuredSpeed

__all__ = [
    "embedded_server",
    "ensure_embedded",
    "labelstudio_service",
    "labelstudio_status",
]


def embedded_server(settings: Settings) -> EmbeddedServer:
    """The embedded model's server as the config describes it (started or not)."""
    from judge.models.embedded import EmbeddedServer

    return EmbeddedServer(settings.embedded, settings.state_dir)


_EMBEDDED = threading.Lock()


def ensure_embedded(settings: Settings, endpoint: str) -> None:
    """Start the embedded model's server when ``endpoint`` is it and it is not up (so that a
    job on the default endpoint needs no separate `fairjudge model serve`)."""
    server = embedded_server(settings)
    if settings.endpoint(endpoint).base_url.rstrip("/") != server.base_url:
        return
    with _EMBEDDED:  # two jobs starting at once must not start two servers
        server.start()


def labelstudio_service(settings: Settings) -> LabelStudioService:
    """FairJudge's own Label Studio (its venv, data and process), started or not."""
    from annotation.labelstudio.service import LabelStudioService

    return LabelStudioService(settings.labelstudio, settings.state_dir)


def labelstudio_status(settings: Settings) -> ServiceStatus:
    """Where the Label Studio campaigns use runs, its version, and whether the token works."""
    from annotation.labelstudio.service import server_status

    return server_status(settings)
