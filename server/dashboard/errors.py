"""Errors on dashboard pages as an HTML page (the API keeps its JSON error shape)."""

from __future__ import annotations

from flask import render_template
from flask.typing import ResponseReturnValue

from judge.errors import FairJudgeError
from server.dashboard import bp
from server.errors import status_for


@bp.errorhandler(FairJudgeError)
def domain_error(exc: FairJudgeError) -> ResponseReturnValue:
    status = status_for(exc)
    return render_template("dashboard/error.html", status=status, message=str(exc)), status
