"""FairJudge's web layer: a thin Flask app over the ``judge`` package."""

from __future__ import annotations

from typing import Any

from flask import Flask


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Build the app; ``test_config`` may carry SETTINGS (a judge.config.Settings)."""
    from judge.config import load_settings
    from server import api, db

    app = Flask(__name__)
    app.config.from_mapping(test_config or {})
    if "SETTINGS" not in app.config:
        app.config["SETTINGS"] = load_settings()
    db.init_app(app)
    app.register_blueprint(api.bp)
    api.register_errors(app)
    return app
