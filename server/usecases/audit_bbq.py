"""The BBQ suite's use case beyond running it (``server.usecases.audits`` runs and shows every
suite): scoring predictions made elsewhere, such as the BBQ authors' UnifiedQA ones, read
from a file or folder (the CLI's ``audit bbq analyze --from-file``) or sent as text (the
API's ``POST /audits/bbq/analyze``): the same function, so the same figures."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from judge.audits.bbq import score_predictions
from judge.audits.bbq_report import bbq_report
from judge.audits.bbq_score import DEFAULT_RESAMPLES
from judge.errors import InvalidInputError
from server.usecases.audits import Analysis, finite


def analyze_bbq_file(
    path: str | Path,
    *,
    predictions: str,
    categories: Sequence[str] | None = None,
    resamples: int | None = None,
    seed: int = 0,
) -> Analysis:
    """Accuracy per context, s_DIS and s_AMB with cluster-bootstrap intervals, per category
    and overall, for the predictions in field ``predictions`` of a BBQ file or folder
    (``race``, ``arc``, ``qonly``: the authors' UnifiedQA-11B fields). Every problem of the
    file is one DatasetError; predictions naming no option are counted apart."""

    result = score_predictions(
        path,
        predictions=predictions,
        categories=categories,
        resamples=DEFAULT_RESAMPLES if resamples is None else resamples,
        seed=seed,
    )
    note = None
    if result.unread:
        note = (
            f"{sum(result.unread.values())} predictions match no option: counted as unmatched "
            "and in no figure (listed under unread)"
        )
    return Analysis(finite(result.to_dict()), bbq_report(result), note)


BODY_NAME = "body.jsonl"
"""What the items sent in a request are called in the problems' lines (``line N:
body.jsonl: ...``), in place of a temporary file's name."""


class BodyProblems(InvalidInputError):
    """Items sent in a request refused, every problem listed (the CLI's DatasetError shows
    the first 50): ``problems`` pairs each line of the text with what is wrong there."""

    def __init__(self, message: str, problems: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.problems = problems
        shown = "\n".join(f"  line {n}: {why}" for n, why in problems)
        self.args = (f"{message}\n{shown}",)


def analyze_bbq_text(
    text: str,
    *,
    predictions: str,
    categories: Sequence[str] | None = None,
    resamples: int | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """``analyze_bbq_file`` on BBQ items sent as JSON-lines text (``POST
    /api/v1/audits/bbq/analyze``), nothing stored: the same figures as JSON (non-finite
    numbers as null) with its ``note``. A bad text is one InvalidInputError listing every
    problem by line, naming the text, never a temporary file."""

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / BODY_NAME
        path.write_text(text, encoding="utf-8")
        try:
            found = analyze_bbq_file(
                path,
                predictions=predictions,
                categories=categories,
                resamples=resamples,
                seed=seed,
            )
        except InvalidInputError as exc:
            head = str(exc).split("\n", 1)[0].replace(str(path), "the jsonl text")
            if exc.problems:
                raise BodyProblems(head, exc.problems) from None
            raise InvalidInputError(head) from None
    data = found.data
    data["source"] = {**data["source"], "path": "the jsonl text"}
    return {"suite": "bbq", **data, "note": found.note}
