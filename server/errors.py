"""The web API's one error shape, ``{"error": {"status": N, "message": "...", "problems":
[...]}}`` (``problems`` only when there are several), and the only place that maps exception
classes to HTTP statuses."""

from __future__ import annotations

from typing import Any

from flask import Flask, Response, current_app, jsonify, make_response, request
from flask.typing import ResponseReturnValue
from pydantic import ValidationError
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from judge.errors import (
    ConfigError,
    EmbeddedModelError,
    EndpointError,
    FairJudgeError,
    InvalidInputError,
    NotFoundError,
    SchemaError,
    StoreError,
    UnqualifiedError,
)
from server.auth import AuthError, ForbiddenError
from server.jobs.queue import JobStateError
from server.usecases.gates import ConfirmationNeeded
from server.usecases.shapes import LabelStudioError, RunBusyError

# Most specific first: the first class an error is an instance of decides its status.
STATUS: tuple[tuple[type[FairJudgeError], int], ...] = (
    (AuthError, 401),
    (ForbiddenError, 403),
    (ConfirmationNeeded, 403),  # a member key's job over [server] confirm_calls/confirm_cost
    (NotFoundError, 404),
    (JobStateError, 409),
    (RunBusyError, 409),
    (UnqualifiedError, 409),  # require_qualified=true and a rubric used is not validated
    (InvalidInputError, 400),
    (ConfigError, 400),
    # A model endpoint or Label Studio that is down or failing: 424 Failed Dependency, a 4xx
    # because the fix is outside this server (start the service, fix its URL), and the
    # message says which.
    (EndpointError, 424),
    (LabelStudioError, 424),
    (StoreError, 503),
    (EmbeddedModelError, 500),
    (SchemaError, 500),
    (FairJudgeError, 400),
)


ERROR_STATUSES = {
    400: "Bad input: the message says what to fix.",
    401: "No API key, or one that is unknown or revoked.",
    403: "The key's role may not do this (or a member's job over the server's size limits "
    "was not confirmed: the message says the figure and the field to set).",
    404: "No such resource (run, dataset, item, job, campaign...).",
    409: "The resource is busy or in a state that does not allow this (or, with "
    "require_qualified=true, the judge is not validated for a rubric used: the message "
    "names it).",
    413: "The request body is larger than the server's limit.",
    422: "The request does not match its schema: one problem per bad field.",
    424: "A service this needs (a model endpoint, Label Studio) is down or failing.",
    503: "The store is unavailable.",
}
"""Every error status the API answers with, declared on every operation of the OpenAPI
document with the one error shape."""


def declared_errors(*, without: tuple[int, ...] = ()) -> dict[Any, Any]:
    """The ``responses`` each blueprint declares for all its operations (flask-openapi3's
    ``abp_responses``), less the statuses in ``without``."""
    from server.schemas import ErrorOut

    declared: dict[Any, Any] = {code: ErrorOut for code in ERROR_STATUSES if code not in without}
    # gunicorn answers a request line over its limit itself, before the app, in HTML.
    declared[414] = {
        "description": "The request line (path and query) is longer than the server reads.",
        "content": {"text/html": {"schema": {"type": "string"}}},
    }
    return declared


API_WORDS: tuple[tuple[str, str], ...] = (
    # The domain's messages are the CLI's; over HTTP each option is said as its field.
    (r"pass --replace to overwrite", 'send "replace": true to overwrite'),
    (r"pass --assume-random \(assume_random=true\)", "set assume_random=true"),
    (r"--assume-random", "assume_random=true"),
    (
        r"pass --accept-unrepresentative \(accept_unrepresentative=true\)",
        "set accept_unrepresentative=true",
    ),
    (r"--accept-unrepresentative \(accept_unrepresentative=true\)", "accept_unrepresentative"),
    (r"lower --min-items \(min_items\)", "lower min_items"),
    (r"add --paired", "set paired=true"),
    (r"--paired", "paired=true"),
    (r"--margin", "margin"),
    (r"--replace", '"replace": true'),
    (
        r"`fairjudge ratings import FILE --run (\d+)`",
        r'POST /api/v1/ratings ("generation_run": \1)',
    ),
    (r"\(see `fairjudge keys list`\)", "(GET /api/v1/keys lists them)"),
    (r"`fairjudge rubrics add FILE`", "POST /api/v1/rubrics"),
)
"""(pattern, replacement) turning the CLI's words in a domain message into the API's."""


def api_words(text: str) -> str:
    """``text`` with the CLI options and commands it names said as the API's fields and
    routes (``API_WORDS``).

    >>> api_words("score 3 (file says 4); pass --replace to overwrite")
    'score 3 (file says 4); send "replace": true to overwrite'
    """
    import re

    for pattern, replacement in API_WORDS:
        text = re.sub(pattern, replacement, text)
    return text


def status_for(exc: FairJudgeError) -> int:
    return next(code for cls, code in STATUS if isinstance(exc, cls))


def error_response(
    status: int, message: str, problems: list[str] | None = None
) -> ResponseReturnValue:
    body: dict[str, Any] = {"status": status, "message": message}
    if problems:
        body["problems"] = problems
    reply = jsonify({"error": body})
    if status == 401:
        reply.headers["WWW-Authenticate"] = 'Bearer realm="fairjudge"'
    return reply, status


def validation_error(exc: ValidationError) -> Response:
    """flask-openapi3's hook for a request that does not match its schema: 422, our shape,
    one problem per bad field, named by where it is (body, query or path) and its path."""
    problems = []
    for e in exc.errors(include_url=False):
        where = ".".join(str(part) for part in e["loc"]) or "body"
        problems.append(f"{where}: {e['msg']}")
    title = exc.title or ""
    part = (
        "query string" if title.endswith("Query") else "path" if title.endswith("Path") else "body"
    )
    message = f"the request's {part} is invalid: " + "; ".join(problems[:5])
    if len(problems) > 5:
        message += f"; and {len(problems) - 5} more (see problems)"
    return make_response(
        jsonify({"error": {"status": 422, "message": message, "problems": problems}}), 422
    )


SECURITY_HEADERS = {
    # No page of this server may be framed by another site (clickjacking).
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    # A reply is what its Content-Type says, never sniffed into HTML or script.
    "X-Content-Type-Options": "nosniff",
    # Links from the dashboard to other sites do not carry its URLs (run ids, filters).
    "Referrer-Policy": "no-referrer",
}
"""Headers every reply carries (set where a view has not set its own)."""


def security_headers(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response


def drain_body(response: Response) -> Response:
    """Read what the view left unread of the request's body, so that a reply sent before it
    (a 401 to a large POST, a 404 to a POST on no route) reaches the client: a server that
    closes or reuses a connection with unread bytes in it resets it, losing the reply. A
    body over the server's limit is not read; the connection is closed after the reply."""
    if request.content_length is None and not request.headers.get("Transfer-Encoding"):
        return response
    try:
        stream = request.stream
        while stream.read(1 << 16):
            pass
    except Exception:  # too large, or the client went away: nothing more to read
        response.headers["Connection"] = "close"
    return response


def register_errors(app: Flask) -> None:
    app.after_request(security_headers)
    app.after_request(drain_body)

    @app.errorhandler(FairJudgeError)
    def domain_error(exc: FairJudgeError) -> ResponseReturnValue:
        text = api_words(str(exc))
        if isinstance(exc, InvalidInputError) and exc.problems:
            # The message lists the problems under its first line; JSON gives them apart.
            first, *listed = text.splitlines()
            return error_response(status_for(exc), first, [p.strip() for p in listed])
        return error_response(status_for(exc), text)

    @app.errorhandler(RequestEntityTooLarge)
    def too_large(exc: RequestEntityTooLarge) -> ResponseReturnValue:
        limit = current_app.config.get("MAX_CONTENT_LENGTH") or 0
        mib = current_app.config["SETTINGS"].server.max_body_mb
        return error_response(
            413,
            f"the request body is larger than this server's limit of {mib:g} MiB ({limit:,} "
            "bytes; [server] max_body_mb); send it in smaller batches",
        )

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> ResponseReturnValue:
        if exc.code == 405:
            reply = error_response(405, f"{request.method} is not allowed on {request.path}")
            allowed = getattr(exc, "valid_methods", None) or []
            response = make_response(reply)
            response.headers["Allow"] = ", ".join(sorted(allowed))
            return response
        return error_response(exc.code or 500, exc.description or exc.name)

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> ResponseReturnValue:
        app.logger.exception("unhandled error")
        return error_response(500, "internal error; see the server log")
