"""The JSON API under ``/api/v1``: one blueprint per resource, each view parsing its request
(validated against ``server.schemas``), calling one domain function and serialising.

Every route but ``/health`` needs a key (``Authorization: Bearer KEY``); the key of the
request is ``g.key``. Views that only admins may use call ``admin()`` first.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from flask import g, request
from flask_openapi3 import APIBlueprint

from judge.errors import InvalidInputError
from server.auth import authenticate, bearer, require_role
from server.db import get_session

if TYPE_CHECKING:
    from flask_openapi3 import OpenAPI
    from pydantic import BaseModel

    from server.auth import ApiKey

SECURITY: list[dict[str, list[str]]] = [{"bearer": []}]
OPEN = ("/api/v1/health",)
"""Paths that need no key."""


def blueprint(name: str, import_name: str, tag: str) -> APIBlueprint:
    """A resource's blueprint: its routes are documented under ``tag`` and need a key."""
    from flask_openapi3 import Tag

    return APIBlueprint(name, import_name, abp_tags=[Tag(name=tag)], abp_security=SECURITY)


def admin() -> None:
    """ForbiddenError (403) unless the request's key is an admin's."""
    require_role(g.key, "admin")


def dump(model: type[BaseModel], value: Any) -> dict[str, Any]:
    """``value`` (a row, a dataclass, a dict) as ``model`` serialises it to JSON."""
    return model.model_validate(value, from_attributes=True).model_dump(mode="json")


def page(model: type[BaseModel], rows: list[Any], total: int, limit: int, offset: int) -> Any:
    return {
        "items": [dump(model, r) for r in rows],
        "total": total,
        "limit": limit,
        "offset": offset,
    }


def _dashboard_reader() -> ApiKey | None:
    """A GET without a Bearer header from someone signed in to the dashboard (so the
    dashboard's links to reports work); any other request needs the header."""
    if request.method != "GET" or request.headers.get("Authorization"):
        return None
    from server.dashboard.access import signed_in_key

    return signed_in_key(get_session())


def _check_request() -> None:
    """Before every API view: the key, then a body that is JSON when there is one."""
    if request.path not in OPEN:
        g.key = _dashboard_reader() or authenticate(
            get_session(), bearer(request.headers.get("Authorization"))
        )
    if request.method in ("POST", "PUT", "PATCH") and request.get_data(cache=True):
        if not request.is_json:
            raise InvalidInputError(
                f"the body is {request.mimetype or 'of no declared type'}: send JSON with "
                "`Content-Type: application/json`"
            )
        try:
            json.loads(request.get_data(cache=True))
        except ValueError as exc:
            raise InvalidInputError(f"the body is not valid JSON: {exc}") from None


def register(app: OpenAPI) -> None:
    from server.api import (
        audits,
        campaigns,
        datasets,
        endpoints,
        health,
        jobs,
        judgments,
        keys,
        ratings,
        reports,
        responses,
        rubrics,
        runs,
    )

    api = APIBlueprint("api_v1", __name__, url_prefix="/api/v1")
    api.before_request(_check_request)
    for module in (
        health,
        keys,
        datasets,
        responses,
        endpoints,
        runs,
        jobs,
        judgments,
        reports,
        rubrics,
        ratings,
        campaigns,
        audits,
    ):
        api.register_api(module.bp)
    app.register_api(api)
