"""The JSON API under ``/api/v1``: one blueprint per resource, each view parsing its request
(validated against ``server.schemas``), calling one domain function and serialising.

Every route but ``/health`` needs a key (``Authorization: Bearer KEY``); the key of the
request is ``g.key``. Views that only admins may use call ``admin()`` first.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from flask import g, request, session
from flask_openapi3 import APIBlueprint

from judge.errors import InvalidInputError
from server.auth import COOKIE_TOKEN, authenticate, bearer, require_role, web_session_key
from server.db import get_session

if TYPE_CHECKING:
    from flask_openapi3 import OpenAPI
    from pydantic import BaseModel

    from server.auth import ApiKey

SECURITY: list[dict[str, list[str]]] = [{"bearer": []}]
OPEN = ("/api/v1/health",)
"""Paths that need no key."""
OPTIONAL_BODIES = (("post", "/api/v1/audit-runs/{run_id}/classify"),)
"""Operations whose JSON body may be left out (every field has a default)."""
TEXT_BODIES = {("POST", "/api/v1/gates"): ("text/plain", "application/toml")}
"""Operations that also take a text body of these types (a gates file), not only JSON."""

JOB_ID = {"job_id": "$response.body#/id"}
FIRST_RUN = {"run_id": "$response.body#/items/0/id"}
CAMPAIGN = {"name": "$response.body#/campaign"}
LINKS: dict[tuple[str, str, str], list[tuple[str, str, dict[str, str]]]] = {
    # (method, path under /api/v1, status) of a reply -> the operations it leads to
    ("post", "/jobs", "201"): [
        ("get", "/jobs/{job_id}", JOB_ID),
        ("post", "/jobs/{job_id}/cancel", JOB_ID),
        ("post", "/jobs/{job_id}/resume", JOB_ID),
    ],
    ("post", "/audits", "202"): [("get", "/jobs/{job_id}", JOB_ID)],
    ("get", "/jobs", "200"): [("get", "/jobs/{job_id}", {"job_id": "$response.body#/items/0/id"})],
    ("post", "/datasets", "201"): [
        ("get", "/datasets/{name}", {"name": "$request.body#/name"}),
        ("get", "/datasets/{name}/items", {"name": "$request.body#/name"}),
    ],
    ("post", "/keys", "201"): [("delete", "/keys/{name}", {"name": "$response.body#/name"})],
    ("get", "/generation-runs", "200"): [
        ("get", "/generation-runs/{run_id}", FIRST_RUN),
        ("get", "/generation-runs/{run_id}/responses", FIRST_RUN),
    ],
    ("get", "/judge-runs", "200"): [
        ("get", "/judge-runs/{run_id}", FIRST_RUN),
        ("get", "/judge-runs/{run_id}/metrics", FIRST_RUN),
        ("get", "/judge-runs/{run_id}/report.json", FIRST_RUN),
        ("get", "/judge-runs/{run_id}/diagnostics.json", FIRST_RUN),
        ("get", "/judge-runs/{run_id}/estimates", FIRST_RUN),
        ("get", "/judge-runs/{run_id}/agreement", FIRST_RUN),
        ("get", "/judge-runs/{run_id}/report.html", FIRST_RUN),
    ],
    ("get", "/audit-runs", "200"): [
        ("get", "/audit-runs/{run_id}", FIRST_RUN),
        ("get", "/audit-runs/{run_id}/report.json", FIRST_RUN),
        ("get", "/audit-runs/{run_id}/followups", FIRST_RUN),
        ("get", "/audit-runs/{run_id}/estimates", FIRST_RUN),
    ],
    ("post", "/campaigns", "201"): [
        ("get", "/campaigns/{name}", CAMPAIGN),
        ("get", "/campaigns/{name}/ratings.csv", CAMPAIGN),
        ("post", "/campaigns/{name}/pull", CAMPAIGN),
    ],
}
"""OpenAPI links between operations: where an id a reply holds can be used next (clients and
schemathesis's stateful phase follow them)."""


KEPT = tuple(
    f"/judge-runs/{{run_id}}/{name}"
    for name in ("report.json", "report.html", "report.csv", "diagnostics.json",
                 "diagnostics.html", "diagnostics.csv", "agreement")
)  # fmt: skip
"""Routes served from kept figures (server/kept/serving.py): their answers say in headers
whether the figures are the run's rows as they are now (``KEPT_HEADERS``)."""


def _header(description: str, kind: str = "string") -> dict[str, Any]:
    return {"description": description, "schema": {"type": kind}}


KEPT_HEADERS = {
    "200": {
        "X-Figures-Stale": _header(
            "true: the figures were computed before the latest writes to the run's rows and "
            "are being computed again (a JSON body also holds `stale`); false: they are the "
            "rows as they are now"
        ),
        "X-Figures-Computed-At": _header("When the figures served were computed (ISO 8601)."),
        "X-Figures-Version": _header(
            "With stale figures: the digest of the run's rows they were computed at."
        ),
    },
    "202": {"Retry-After": _header("When to ask again, in seconds.", "integer")},
}


HTML_PAGE: dict[str, Any] = {
    "description": "One self-contained HTML page.",
    "content": {"text/html": {"schema": {"type": "string"}}},
}
CSV_TABLE: dict[str, Any] = {
    "description": "One table as CSV, with a header row.",
    "content": {"text/csv": {"schema": {"type": "string"}}},
}


def blueprint(name: str, import_name: str, tag: str) -> APIBlueprint:
    """A resource's blueprint: its routes are documented under ``tag`` and need a key."""
    from flask_openapi3 import Tag

    from server.errors import declared_errors

    return APIBlueprint(
        name,
        import_name,
        abp_tags=[Tag(name=tag)],
        abp_security=SECURITY,
        abp_responses=declared_errors(),
    )


def admin() -> None:
    """ForbiddenError (403) unless the request's key is an admin's."""
    require_role(g.key, "admin")


def dump(model: type[BaseModel], value: Any) -> dict[str, Any]:
    """``value`` (a row, a dataclass, a dict) as ``model`` serialises it to JSON."""
    return model.model_validate(value, from_attributes=True).model_dump(mode="json")


WORDED = ("reason", "note", "message", "error")
"""Keys of a reply whose text is a sentence for people: said in the API's words."""


def in_api_words(value: Any) -> Any:
    """A reply with the CLI options its sentences name (``--assume-random``) said as the
    API's fields (``server.errors.api_words``), under the keys WORDED."""
    from server.errors import api_words

    if isinstance(value, dict):
        return {
            k: api_words(v) if k in WORDED and isinstance(v, str) else in_api_words(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [in_api_words(v) for v in value]
    return value


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
    token = session.get(COOKIE_TOKEN)  # the dashboard's cookie (server.dashboard.access)
    return web_session_key(get_session(), token) if isinstance(token, str) else None


MAX_DEPTH = 64
"""The deepest nesting of arrays and objects a JSON body may have. Python's parser recurses
once per level, so a body nested thousands deep would crash it; no request of this API needs
more than a handful of levels."""


def _refuse_nul() -> None:
    """InvalidInputError when the path or the query string holds a NUL character: no name,
    key or filter may contain one, and PostgreSQL refuses to store or compare it."""
    if "\x00" in request.path:
        raise InvalidInputError("the path holds a NUL character (%00); remove it")
    for name, value in request.args.items(multi=True):
        if "\x00" in name or "\x00" in value:
            raise InvalidInputError(
                f"the query parameter {name.replace(chr(0), '%00')!r} holds a NUL character "
                "(%00); remove it"
            )


def json_depth(text: str) -> int:
    """How deep arrays and objects nest in the JSON ``text``, counted without parsing it
    (strings are skipped, so brackets inside them do not count).

    >>> json_depth('{"a": [1, {"b": "[[["}]}')
    3
    >>> json_depth('"plain"')
    0
    """
    import re

    import numpy as np

    # A string unrolled (runs of plain characters between escapes), not one alternation per
    # character: the same matches, about 8x faster on a 13 MB string (a BBQ text posted).
    bare = re.sub(r'"[^"\\]*(?:\\.[^"\\]*)*"', "", text)
    steps = np.frombuffer(bare.encode("utf-8", "replace"), dtype=np.uint8)
    opens = (steps == ord("[")) | (steps == ord("{"))
    closes = (steps == ord("]")) | (steps == ord("}"))
    level = np.cumsum(opens.astype(np.int64) - closes.astype(np.int64))
    return int(level.max()) if level.size else 0


def _check_json_body() -> None:
    """A body that is JSON, nested no deeper than MAX_DEPTH, with no NUL character in it."""
    if not request.is_json:
        raise InvalidInputError(
            f"the body is {request.mimetype or 'of no declared type'}: send JSON with "
            "`Content-Type: application/json`"
        )
    raw = request.get_data(cache=True)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"the body is not UTF-8 text: {exc}") from None
    depth = json_depth(text)
    if depth > MAX_DEPTH:
        raise InvalidInputError(
            f"the body nests arrays and objects {depth} deep; at most {MAX_DEPTH} levels are "
            "accepted"
        )
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise InvalidInputError(f"the body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise InvalidInputError(
            f"the body is a JSON {type(body).__name__ if body is not None else 'null'}: send a "
            "JSON object ({...}), or no body where every field has a default"
        )
    if _has_nul(body):
        raise InvalidInputError(
            "the body holds a NUL character (\\u0000) in a string; remove it: no text "
            "FairJudge stores may contain one"
        )


def _has_nul(value: Any) -> bool:
    """Whether a NUL character is in any string or key of parsed JSON (bounded in depth)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def _check_request() -> None:
    """Before every API view: no NUL in the path or query, the key, then a body that is
    JSON when there is one."""
    _refuse_nul()
    if request.path not in OPEN:
        g.key = _dashboard_reader() or authenticate(
            get_session(), bearer(request.headers.get("Authorization"))
        )
    if request.method in ("POST", "PUT", "PATCH") and request.get_data(cache=True):
        if request.mimetype not in TEXT_BODIES.get((request.method, request.path), ()):
            _check_json_body()


def _anything_converter() -> type:
    """The ``anything`` URL converter: the rest of the path, whatever it holds (slashes,
    a leading or doubled one too), so an id with any character has a URL."""
    from werkzeug.routing import PathConverter

    class Anything(PathConverter):
        regex = ".+"
        part_isolating = False  # it matches across '/' (werkzeug would guess otherwise)

    return Anything


def register(app: OpenAPI) -> None:
    app.url_map.converters["anything"] = _anything_converter()
    from server.api import (
        alttest,
        audits,
        campaigns,
        datasets,
        drift,
        endpoints,
        estimates,
        gates,
        health,
        jobs,
        judgments,
        juries,
        keys,
        pairwise,
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
        estimates,
        alttest,
        juries,
        gates,
        drift,
        campaigns,
        audits,
        pairwise,
    ):
        api.register_api(module.bp)
    app.register_api(api)
