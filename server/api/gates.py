"""Release gates over HTTP (issue 44): ``POST /api/v1/gates`` evaluates a posted gates file on
the stored runs through the use case ``fairjudge gate`` calls, and ``GET /api/v1/gates``
answers each name's newest verdict kept by either (``server.usecases.release_gates``).

The gates file may be the body itself (``Content-Type: text/plain`` or ``application/toml``,
``TEXT_TYPES``) or JSON ``{"text": ...}`` (``GatesCheckIn``); the API's other POST routes take
JSON only (``server.api.TEXT_BODIES`` lets this one through)."""

from __future__ import annotations

from typing import Any

from flask import abort, request
from pydantic import ValidationError

from judge.errors import InvalidInputError
from server.api import TEXT_BODIES, blueprint, dump
from server.db import get_session
from server.schemas.gates import (
    GatesCheckIn,
    GatesCheckOut,
    GatesCheckQuery,
    GatesQuery,
    GateVerdictOut,
    GateVerdictsOut,
)

bp = blueprint("gates", __name__, "reports")

TEXT_TYPES = TEXT_BODIES[("POST", "/api/v1/gates")]
"""The body types that are the gates file itself."""
SOURCE = "request body"
"""The verdict's ``file`` (``source``) for a posted file, where the CLI writes its path."""

GATES_BODY: dict[str, Any] = {
    "description": "The gates file (TOML, docs/gates.md): as the body itself, or as JSON.",
    "required": True,
    "content": {
        "application/json": {"schema": GatesCheckIn.model_json_schema()},
        **{kind: {"schema": {"type": "string", "minLength": 1}} for kind in TEXT_TYPES},
    },
}


@bp.get("/gates", responses={200: GateVerdictsOut})
def get_gates(query: GatesQuery) -> Any:
    """The last verdict of each gates file `fairjudge gate` evaluated, newest first.

    Each verdict says whether every gate passed and, gate by gate, the outcome with the
    figure found, its interval and the threshold. Verdicts are kept under the name
    `--record` gave (default the gates file as given), or `record` of `POST /api/v1/gates`;
    a `name` with none is a 404."""
    from server.usecases.release_gates import last_verdicts

    rows = last_verdicts(get_session(), name=query.name)
    return {"items": [dump(GateVerdictOut, r) for r in rows]}


def _posted_text() -> str:
    """The gates file of the request: the body itself for TEXT_TYPES, else ``text`` of a
    JSON body checked against ``GatesCheckIn`` (422 when it does not match, as the API's
    other bodies)."""
    raw = request.get_data(cache=True)
    if request.mimetype in TEXT_TYPES and raw:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInputError(
                f"the body is not UTF-8 text (byte {exc.start}); send the gates file as UTF-8"
            ) from None
    from server.errors import validation_error

    try:
        return GatesCheckIn.model_validate(request.get_json(silent=True)).text
    except ValidationError as exc:
        abort(validation_error(exc))


@bp.post("/gates", responses={200: GatesCheckOut}, openapi_extensions={"requestBody": GATES_BODY})
def post_gates(query: GatesCheckQuery) -> Any:
    """Evaluate a gates file on the stored judge runs, as `fairjudge gate --json` does.

    Send the file as the body (`Content-Type: text/plain` or `application/toml`) or as
    JSON `{"text": ...}`. The reply is every gate's outcome with the figures it read, and
    200 whether the gates passed or failed (`passed`). With `record`, the verdict is kept
    under that name, for `GET /api/v1/gates` and the dashboard. A bad file is a 400 that
    lists every problem with its line, and nothing is evaluated or kept."""
    from server.usecases.release_gates import gate_verdict

    text = _posted_text()
    session = get_session()
    report, kept = gate_verdict(session, text, source=SOURCE, record=query.record)
    session.commit()
    out = {
        "passed": report.passed,
        "n_gates": len(report.results),
        "n_failed": len(report.failed),
        "seconds": report.seconds,
        "kept_as": query.record if kept is not None else None,
        "verdict_id": kept,
        "result": report.to_json(),
    }
    return dump(GatesCheckOut, out)
