"""The web API's one error shape, ``{"error": {"status": N, "message": "..."}}``, and the only
place that maps exception classes to HTTP statuses."""

from __future__ import annotations

from flask import Flask, jsonify
from flask.typing import ResponseReturnValue
from werkzeug.exceptions import HTTPException

from judge.errors import (
    ConfigError,
    EmbeddedModelError,
    EndpointError,
    FairJudgeError,
    InvalidInputError,
    NotFoundError,
    SchemaError,
)

# Most specific first: the first class an error is an instance of decides its status.
STATUS: tuple[tuple[type[FairJudgeError], int], ...] = (
    (NotFoundError, 404),
    (InvalidInputError, 400),
    (ConfigError, 400),
    (EndpointError, 502),
    (EmbeddedModelError, 500),
    (SchemaError, 500),
    (FairJudgeError, 400),
)


def status_for(exc: FairJudgeError) -> int:
    return next(code for cls, code in STATUS if isinstance(exc, cls))


def error_response(status: int, message: str) -> ResponseReturnValue:
    return jsonify({"error": {"status": status, "message": message}}), status


def register_errors(app: Flask) -> None:
    @app.errorhandler(FairJudgeError)
    def domain_error(exc: FairJudgeError) -> ResponseReturnValue:
        return error_response(status_for(exc), str(exc))

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> ResponseReturnValue:
        return error_response(exc.code or 500, exc.description or exc.name)

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> ResponseReturnValue:
        app.logger.exception("unhandled error")
        return error_response(500, "internal error; see the server log")
