"""The JSON API: one blueprint per resource under ``/api``."""

from __future__ import annotations

from flask import Flask


def register(app: Flask) -> None:
    from server.api import datasets, health, reports, runs

    for module in (health, datasets, runs, reports):
        app.register_blueprint(module.bp, url_prefix="/api")
