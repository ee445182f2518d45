"""``/api/v1/endpoints``: the model endpoints the config names (their secrets never leave)."""

from __future__ import annotations

from typing import Any

from flask import current_app

from server import usecases
from server.api import admin, blueprint
from server.schemas import EndpointCheck, EndpointOut, ListOf, NamePath

bp = blueprint("endpoints", __name__, "endpoints")


@bp.get("/endpoints", responses={200: ListOf[EndpointOut]})
def list_endpoints() -> Any:
    """Each endpoint's name, URL, model and role (never its key)."""
    return usecases.list_endpoints(current_app.config["SETTINGS"])


@bp.post("/endpoints/<name>/check", responses={200: EndpointCheck})
def check_endpoint(path: NamePath) -> Any:
    """Ask the endpoint which models it serves (admins only): reachable or why not."""
    admin()
    return usecases.check_endpoint(current_app.config["SETTINGS"], path.name)
