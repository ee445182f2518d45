"""``/api/v1/ratings``: human ratings collected outside Label Studio, in batches.

The same import as ``fairjudge ratings import`` (``server.usecases.ratings``):
built-in and registered rubrics, each score on its rubric's scale, all or nothing, with the
CLI's messages (a bad row is named by its position in ``rows``, from 1). ``/api/v1/agreement``:
agreement computed on ratings sent as CSV text, as ``fairjudge agreement compute`` does for
files (nothing is stored).
"""

from __future__ import annotations

from typing import Any

from flask import current_app

from judge.errors import InvalidInputError
from server.api import blueprint
from server.db import get_session
from server.schemas import FilesAgreementIn, FilesAgreementOut, RatingsIn, RatingsOut

bp = blueprint("ratings", __name__, "ratings")


@bp.post("/ratings", responses={201: RatingsOut, 200: RatingsOut})
def import_ratings(body: RatingsIn) -> Any:
    """Import human ratings of a generation run's answers, all or nothing.

    At most 5,000 rows; each score on its rubric's scale (built-in or registered). Every bad
    row is reported and nothing is stored; ratings already stored with the same score are
    counted as unchanged (201 when some were added, else 200)."""
    from judge.vocab import Scale
    from server.usecases.ratings import import_rating_rows

    scale = None
    if body.scale is not None:
        try:
            scale = Scale.parse(body.scale)
        except ValueError as exc:
            raise InvalidInputError(f"scale: {exc}".replace("--scale ", "")) from None
    session = get_session()
    done, batch = import_rating_rows(
        session,
        current_app.config["SETTINGS"],
        body.generation_run,
        [row.model_dump() for row in body.rows],
        replace=body.replace,
        scale=scale,
        batch=body.batch,
    )
    session.commit()
    out = {
        **{k: getattr(done, k) for k in ("run", "added", "unchanged", "replaced")},
        **{k: getattr(done, k) for k in ("raters", "items")},
        "batch": batch,
        "scale": "each rubric's own" if scale is None else str(scale),
    }
    return RatingsOut.model_validate(out).model_dump(mode="json"), 201 if done.added else 200


@bp.post("/agreement", responses={200: FilesAgreementOut})
def files_agreement(body: FilesAgreementIn) -> Any:
    """Agreement for ratings of one's own, sent as CSV text (nothing is stored): the humans
    among themselves, and the judge against them with ``judge_csv``.

    The shape of `fairjudge agreement compute --json`; every coefficient as numbers (null
    when undefined). A bad line of either text is a 400 naming it."""
    from server.usecases.agreement import text_agreement

    return text_agreement(body)
