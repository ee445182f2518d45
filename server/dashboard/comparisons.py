"""The comparison page: judge runs picked from the list (a GET form), side by side and pair
by pair against the first (``compare_page``)."""

from __future__ import annotations

import math

from flask import render_template, request
from flask.typing import ResponseReturnValue

from judge.errors import InvalidInputError
from server.dashboard import bp, compare_page
from server.dashboard.access import login_required
from server.dashboard.pages import row_id
from server.db import get_session


def _picked() -> list[int]:
    """The runs of the query (``judge_run``, repeated), each a row id; InvalidInputError
    naming a value that is not a whole number."""
    out = []
    for text in request.args.getlist("judge_run"):
        if not text.strip().isdigit():
            raise InvalidInputError(f"judge_run: {text!r} is not a judge run's id")
        out.append(row_id("judge run", int(text)))
    return out


def _margin() -> float | None:
    text = (request.args.get("margin") or "").strip()
    if not text:
        return None
    try:
        margin = float(text)
    except ValueError:
        raise InvalidInputError(f"margin: {text!r} is not a number of points") from None
    if not (math.isfinite(margin) and 0 < margin <= 100):
        raise InvalidInputError(f"margin: {text} must be above 0 and at most 100 points")
    return margin


@bp.get("/compare")
@login_required
def compare() -> ResponseReturnValue:
    assume_random = request.args.get("assume_random") in ("1", "true", "on")
    page = compare_page.compare_page(get_session(), _picked(), _margin(), assume_random)
    return render_template("dashboard/compare.html", page=page)
