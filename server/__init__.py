"""FairJudge's interfaces: the web app (``create_app``), the JSON API, the CLI, and the use
cases they share (``services``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the CLI imports this package and must not pay for importing Flask
    from flask import Flask


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Build the app; ``test_config`` may carry SETTINGS (a judge.config.Settings)."""
    from flask import Flask

    from judge.config import load_settings
    from server import api, db, errors

    app = Flask(__name__)
    app.config.from_mapping(test_config or {})
    if "SETTINGS" not in app.config:
        app.config["SETTINGS"] = load_settings()
    db.init_app(app)
    api.register(app)
    errors.register_errors(app)
    return app
