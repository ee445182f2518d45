"""JSON API: read-only views of datasets, runs and reports. One error shape for all routes:
``{"error": {"status": N, "message": "..."}}``."""

from __future__ import annotations

from flask import Blueprint, Flask, jsonify
from flask.typing import ResponseReturnValue
from werkzeug.exceptions import HTTPException

from judge import dataset_files, pipeline
from judge.errors import FairJudgeError
from judge.report import build_report
from server.db import get_session

bp = Blueprint("api", __name__, url_prefix="/api")


@bp.get("/health")
def health() -> ResponseReturnValue:
    return {"status": "ok"}


@bp.get("/datasets")
def datasets() -> ResponseReturnValue:
    return jsonify(dataset_files.list_datasets(get_session()))


@bp.get("/datasets/<name>")
def dataset(name: str) -> ResponseReturnValue:
    return dataset_files.describe_dataset(get_session(), name)


@bp.get("/runs")
def runs() -> ResponseReturnValue:
    return pipeline.list_runs(get_session())


@bp.get("/judge-runs/<int:run_id>/report")
def report(run_id: int) -> ResponseReturnValue:
    return build_report(get_session(), run_id)


def _error(status: int, message: str) -> ResponseReturnValue:
    return jsonify({"error": {"status": status, "message": message}}), status


def register_errors(app: Flask) -> None:
    @app.errorhandler(FairJudgeError)
    def domain_error(exc: FairJudgeError) -> ResponseReturnValue:
        return _error(exc.status_code, str(exc))

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> ResponseReturnValue:
        return _error(exc.code or 500, exc.description or exc.name)

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> ResponseReturnValue:
        app.logger.exception("unhandled error")
        return _error(500, "internal error; see the server log")
