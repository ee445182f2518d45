"""The alt-test verdict (issue 27): may the judge replace the annotators? One use case for the
CLI (``fairjudge agreement alt-test``) and the web API (``GET /api/v1/judge-runs/RUN/alt-test``
on the stored ratings, ``POST /api/v1/alt-test`` on CSV text).

The statistics are ``judge.stats.alttest.alt_test`` (Calderon, Reichart and Dror, ACL 2025);
this module only builds its items x annotators table, per rubric, from the store (the ratings
of a judge run's generation run that count under ``judge.store.rating_scope``, gold items
left out as agreement leaves them out) or from the user's two CSV files (the formats of
``agreement compute``), and says what came out.

A rubric the data cannot support (fewer than three annotators, an annotator with too few
items, no item the judge scored) is *refused*, with the reason, never given a verdict. When
every rubric asked about is refused there is nothing to report, and the call raises
``InvalidInputError`` with the refusal: the CLI's exit 1 and one line, the API's 400.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
from pydantic import ConfigDict, Field, field_validator

from judge.errors import InvalidInputError, NotFoundError
from judge.reports.sections import Table
from judge.stats.alttest import EPSILON, MIN_ITEMS, AltTestRefused, alt_test, items_rule
from judge.vocab import SCALE
from server.usecases.agreement import SCALE_FIELD, posted_csv
from server.usecases.requests import MAX_ID, NumbersNotBooleans

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike, NDArray
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

    from judge.stats.alttest import AltTestResult, AnnotatorComparison
    from judge.stats.matrix import RatingMatrix
    from judge.store.rating_scope import RatingSelection
    from judge.vocab import Scale
    from server.usecases.estimates import RatedRead

Preset = Literal["expert", "skilled", "crowd"]
Margin = Annotated[float, Field(gt=0, lt=1)]


class AltTestOptions(NumbersNotBooleans):
    """How the alt-test is run: the margin the judge's lower cost buys, the false discovery
    rate, how an answer's closeness to the other annotators is scored, and the fewest items
    an annotator must share with the others."""

    model_config = ConfigDict(extra="forbid")

    epsilon: Preset | Margin = Field(
        description="The margin by which the judge may trail an annotator: expert (0.2), "
        "skilled (0.15), crowd (0.1), or a number between 0 and 1. No default: a report "
        "must say which one it used."
    )
    alpha: float = Field(
        default=0.05, gt=0, lt=1, description="False discovery rate (Benjamini-Yekutieli)."
    )
    alignment: Literal["neg_rmse", "neg_mae", "accuracy"] = Field(
        default="neg_rmse",
        description="How close a score is to the other annotators': neg_rmse or neg_mae for "
        "numeric scores, accuracy for categories.",
    )
    min_items: int = Field(
        default=MIN_ITEMS,
        ge=2,
        le=1_000_000,
        description="The fewest items each annotator must share with another annotator; "
        "below it the rubric is refused. The default, 30, is the authors' rule; a lower "
        "number gives verdicts their procedure does not, and the output says so.",
    )

    @field_validator("epsilon", mode="before")
    @classmethod
    def _one_message(cls, value: Any) -> Any:
        """One clear message for a bad epsilon, instead of one per member of the union (a
        boolean is neither: NumbersNotBooleans does not look into unions)."""
        if isinstance(value, str) and value in EPSILON:
            return value
        number = None
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            try:
                number = float(value)
            except ValueError:
                number = None
        if number is None or not 0 < number < 1:
            raise ValueError(
                f"expected expert (0.2), skilled (0.15), crowd (0.1) or a number between 0 "
                f"and 1, got {value!r}"
            )
        return number

    @property
    def preset(self) -> str | None:
        """The preset's name when epsilon was given as one."""
        return self.epsilon if isinstance(self.epsilon, str) else None

    @property
    def margin(self) -> float:
        return EPSILON[self.epsilon] if isinstance(self.epsilon, str) else float(self.epsilon)


class AltTestRequest(AltTestOptions):
    """The alt-test of one judge run against the human ratings of its generation run:
    ``rubric`` alone (default: every rubric with ratings), on the ratings of ``campaigns``
    (every campaign and import batch of the run when empty, the newest winning per rater,
    item and rubric)."""

    judge_run: int = Field(ge=1, le=MAX_ID)
    rubric: str | None = Field(default=None, min_length=1, max_length=200)
    campaigns: list[str] = Field(default_factory=list, max_length=50)


class FilesAltTestRequest(AltTestOptions):
    """``fairjudge agreement alt-test --human FILE --judge FILE`` over HTTP: the two files'
    text in the request."""

    human_csv: str = Field(
        min_length=1,
        description="CSV text, long format: item_id,rater,score (other columns allowed).",
    )
    judge_csv: str = Field(
        min_length=1,
        description="CSV text: item_id,score (several rows per item = samples, averaged).",
    )
    scale: str = SCALE_FIELD


@dataclass(frozen=True)
class RubricAltTest:
    """One rubric's alt-test, or why it was refused (``result`` None, ``refused`` the
    reason)."""

    rubric: str | None  # None for the user's files, which name no rubric
    n_items: int  # rated items the judge scored: the rows of the test's table
    n_annotators: int
    judge_unscored: int  # rated items the judge has no score for (left out)
    result: AltTestResult | None = None
    refused: str | None = None

    def verdict(self, preset: str | None) -> str | None:
        """The verdict in words, e.g. ``passes: omega = 0.67 >= 0.5 (epsilon 0.2, expert)``
        or ``fails: omega = 0.33 < 0.5 (epsilon 0.1)``; None when refused."""
        if self.result is None:
            return None
        r = self.result
        margin = f"epsilon {r.epsilon:g}" + (f", {preset}" if preset else "")
        sign = ">=" if r.passed else "<"
        return f"{'passes' if r.passed else 'fails'}: omega = {r.omega:.2f} {sign} 0.5 ({margin})"

    def to_dict(self, preset: str | None) -> dict[str, Any]:
        r = self.result
        return {
            "rubric": self.rubric,
            "n_items": self.n_items,
            "n_annotators": self.n_annotators,
            "judge_unscored": self.judge_unscored,
            "refused": self.refused,
            "passed": None if r is None else r.passed,
            "verdict": self.verdict(preset),
            "omega": None if r is None else r.omega,
            "rho": None if r is None else r.rho,
            "annotators": []
            if r is None
            else [
                {
                    "annotator": c.annotator,
                    "n_items": c.n_items,
                    "rho_f": c.rho_f,
                    "rho_h": c.rho_h,
                    "test": c.test,
                    "statistic": c.statistic if math.isfinite(c.statistic) else None,
                    "p_value": c.p_value,
                    "p_corrected": c.p_corrected,
                    "rejected": c.rejected,
                }
                for c in r.annotators
            ],
        }


@dataclass(frozen=True)
class AltTestReport:
    """The alt-test of every rubric asked about, and where its data came from: a judge run
    (``judge_run``, ``generation_run``, ``ratings_used``) or the user's files (``items``:
    how the two files' items paired, ``scale``)."""

    options: AltTestOptions
    rubrics: list[RubricAltTest]
    judge_run: int | None = None
    generation_run: int | None = None
    ratings_used: dict[str, Any] | None = None
    items: dict[str, int] | None = None
    scale: str | None = None
    source: str = "judge_run"  # or "files"

    def to_dict(self) -> dict[str, Any]:
        """The one JSON shape of both interfaces (no NaN: a statistic that is not finite is
        null)."""
        o = self.options
        return {
            "source": self.source,
            "judge_run": self.judge_run,
            "generation_run": self.generation_run,
            "ratings_used": self.ratings_used,
            "items": self.items,
            "scale": self.scale,
            "epsilon": o.margin,
            "epsilon_preset": o.preset,
            "alpha": o.alpha,
            "alignment": o.alignment,
            "min_items": o.min_items,
            "items_rule": items_rule(o.min_items),
            "rubrics": [r.to_dict(o.preset) for r in self.rubrics],
        }

    def tables(self) -> list[Table]:
        """One table per rubric with a result: each annotator against the judge."""

        whose = f"judge run {self.judge_run}" if self.judge_run is not None else "the judge file"
        out = []
        for entry in self.rubrics:
            if entry.result is None:
                continue
            name = f"{entry.rubric}: " if entry.rubric else ""
            out.append(
                Table(
                    title=f"Alt-test, {name}{whose} vs {entry.n_annotators} annotators "
                    f"({entry.n_items} items, {self.options.alignment})",
                    columns=list(COLUMNS),
                    rows=[_row(c) for c in entry.result.annotators],
                )
            )
        return out

    def lines(self) -> list[str]:
        """One line per rubric: its verdict with rho, or why it was refused; then the rule on
        items per annotator that applied."""
        out = []
        for entry in self.rubrics:
            name = f"{entry.rubric}: " if entry.rubric else ""
            if entry.result is None:
                out.append(f"{name}refused: {entry.refused}")
            else:
                out.append(
                    f"{name}{entry.verdict(self.options.preset)}; rho = "
                    f"{entry.result.rho:.2f} (the judge's mean advantage probability)"
                )
        out.append(f"items per annotator: {items_rule(self.options.min_items)}")
        return out


COLUMNS = ("annotator", "items", "rho_f", "rho_h", "test", "p", "p (BY)", "rejected")
"""The columns of the CLI's table, one row per annotator."""


def _row(c: AnnotatorComparison) -> list[str]:
    return [
        c.annotator, str(c.n_items), f"{c.rho_f:.3f}", f"{c.rho_h:.3f}", c.test,
        f"{c.p_value:.3g}", f"{c.p_corrected:.3g}", "yes" if c.rejected else "no",
    ]  # fmt: skip


def _test(
    rubric: str | None,
    table: ArrayLike,
    judge: Sequence[float] | NDArray[np.float64],
    annotators: list[str],
    unscored: int,
    options: AltTestOptions,
) -> RubricAltTest:
    """``alt_test`` on one items x annotators table; a refusal is kept with its reason."""

    n_items, n_annotators = len(judge), len(annotators)
    try:
        result = alt_test(
            table, judge, epsilon=options.margin, annotators=annotators, alpha=options.alpha,
            alignment=options.alignment, min_items=options.min_items,
        )  # fmt: skip
    except AltTestRefused as exc:
        return RubricAltTest(rubric, n_items, n_annotators, unscored, refused=str(exc))
    return RubricAltTest(rubric, n_items, n_annotators, unscored, result)


def _checked(report: AltTestReport) -> AltTestReport:
    """``report``, unless every rubric was refused: then InvalidInputError with the
    refusal(s) on one line."""
    if any(r.result is not None for r in report.rubrics):
        return report
    reasons = "; ".join(
        f"{r.rubric}: {r.refused}" if r.rubric else str(r.refused) for r in report.rubrics
    )
    raise InvalidInputError(f"the alt-test cannot be run: {reasons}")


@dataclass(frozen=True)
class _RubricInput:
    """One rubric's items x annotators table and the judge's scores of those items, or why
    there is none (``refused``)."""

    rubric: str
    unscored: int
    matrix: RatingMatrix | None = None
    judge: NDArray[np.float64] | None = None
    refused: str | None = None


@dataclass(frozen=True)
class _Loaded:
    """What the alt-test of one judge run reads from the store, whatever its margin."""

    generation: int
    selection: RatingSelection
    rubrics: list[_RubricInput]


def _load(
    session: Session,
    request: AltTestRequest,
    read: RatedRead | None = None,
) -> _Loaded:
    """Read ``request``'s ratings and judge scores once (see ``alt_test_run``), or take
    them from ``read``: the ratings' selection (``drawn_ratings`` of the request's campaigns)
    and the run's item scores, where the caller has them already."""

    from annotation.estimates import drawn_ratings
    from judge.metrics import item_scores
    from judge.stats.matrix import RatingMatrix
    from judge.store.queries import get_judge_run

    run = get_judge_run(session, request.judge_run)
    generation = run.generation_run_id
    if read is None:
        read = (
            drawn_ratings(session, generation, request.campaigns),
            item_scores(session, request.judge_run, run.aggregation),
        )
    selection, judged = read
    if not selection.ratings:
        raise NotFoundError(
            f"judge run {request.judge_run}'s answers (generation run {generation}) have no "
            f"human ratings to test it against; import them with `fairjudge ratings import "
            f"FILE --run {generation}` or run a campaign"
        )
    rated = sorted({r.rubric for r in selection.ratings})
    if request.rubric is not None and request.rubric not in rated:
        raise InvalidInputError(
            f"rubric {request.rubric!r} has no ratings of generation run {generation} in the "
            f"campaigns used; rated: {', '.join(rated)}"
        )
    scores: dict[tuple[str, int], float] = {
        (s.rubric, s.item_id): float(s.score) for s in judged if s.score is not None
    }
    rubrics: list[_RubricInput] = []
    for rubric in [request.rubric] if request.rubric else rated:
        rows = [r for r in selection.ratings if r.rubric == rubric]
        kept = [r for r in rows if (rubric, r.item_id) in scores]
        unscored = len({r.item_id for r in rows}) - len({r.item_id for r in kept})
        if not kept:
            why = f"judge run {request.judge_run} scored none of the {unscored} rated items"
            rubrics.append(_RubricInput(rubric, unscored, refused=why))
            continue
        matrix = RatingMatrix.from_long(
            [r.item_id for r in kept], [r.rater for r in kept], [r.score for r in kept]
        )
        judge = np.array([scores[(rubric, int(i))] for i in matrix.items])
        rubrics.append(_RubricInput(rubric, unscored, matrix, judge))
    return _Loaded(generation, selection, rubrics)


def _tested(request: AltTestRequest, loaded: _Loaded) -> AltTestReport:
    entries = []
    for r in loaded.rubrics:
        if r.matrix is None or r.judge is None:
            entries.append(RubricAltTest(r.rubric, 0, 0, r.unscored, refused=r.refused))
        else:
            m = r.matrix
            entries.append(_test(r.rubric, m.values.T, r.judge, m.raters, r.unscored, request))
    return _checked(
        AltTestReport(
            AltTestOptions.model_validate(request.model_dump(include=_OPTIONS)),
            entries,
            judge_run=request.judge_run,
            generation_run=loaded.generation,
            ratings_used=loaded.selection.to_dict(),
        )
    )


def alt_test_run(
    session: Session,
    request: AltTestRequest,
    read: RatedRead | None = None,
) -> AltTestReport:
    """The alt-test of ``request.judge_run`` against the stored ratings of its generation
    run, per rubric (``read``: what the caller has read already, see ``_load``).
    NotFoundError for an unknown run or one with no ratings; InvalidInputError for an unrated
    ``rubric``, an unknown campaign, or when every rubric is refused."""
    return _tested(request, _load(session, request, read))


def alt_test_margins(
    session: Session,
    request: AltTestRequest,
    margins: Sequence[str | float],
    read: RatedRead | None = None,
) -> list[AltTestReport]:
    """``alt_test_run`` of ``request`` at each epsilon of ``margins`` (preset names or
    numbers), the store read once: a report's opening verdicts at every preset cost one
    read, not one per preset (none where the caller gives what it ``read``: see ``_load``).
    Raises as ``alt_test_run`` does (the margin changes no refusal: those come from the
    items and annotators)."""
    loaded = _load(session, request, read)
    base = request.model_dump()
    return [_tested(AltTestRequest.model_validate({**base, "epsilon": m}), loaded) for m in margins]


_OPTIONS = set(AltTestOptions.model_fields)


def alt_test_in(engine: Engine, request: AltTestRequest) -> AltTestReport:
    """``alt_test_run`` in a session of its own."""
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        return alt_test_run(session, request)


def alt_test_files(
    human_csv: str | Path,
    judge_csv: str | Path,
    options: AltTestOptions,
    *,
    scale: Scale | None = None,
) -> AltTestReport:
    """The alt-test on the user's own files (``agreement compute``'s formats), on ``scale``
    (1-5 unless given): the judge's score of an item is the mean of its scored rows; items
    without one, or rated by nobody, are left out and counted."""

    from annotation.errors import RatingsError
    from annotation.files import read_human, read_judge

    scale = SCALE if scale is None else scale
    matrix, _ = read_human(human_csv, None, scale)
    samples, unscored_rows = read_judge(judge_csv, scale)
    paired = [i for i in matrix.items if samples.get(i)]
    counts = {
        "paired": len(paired),
        "human_only": len([i for i in matrix.items if i not in samples]),
        "judge_only": len([i for i in samples if i not in set(matrix.items)]),
        "judge_unscored_items": len([i for i in matrix.items if i in samples and not samples[i]]),
        "judge_unscored_rows": unscored_rows,
    }
    if not paired:
        raise RatingsError(
            f"no item of {human_csv} has a judge score in {judge_csv} ({counts['human_only']} "
            f"without a row there, {counts['judge_unscored_items']} with empty or NA scores "
            "only); both files must use the same item ids"
        )
    sub = matrix.columns(paired)
    # A rater who rated none of the paired items has no column in the test.
    people = [k for k in range(len(sub.raters)) if not np.isnan(sub.values[k]).all()]
    judge = np.array([float(np.mean(samples[i])) for i in paired])
    entry = _test(
        None,
        sub.values[people].T,
        judge,
        [sub.raters[k] for k in people],
        len(matrix.items) - len(paired),
        options,
    )
    report = AltTestReport(
        AltTestOptions.model_validate(options.model_dump(include=_OPTIONS)),
        [entry],
        items=counts,
        scale=str(scale),
        source="files",
    )
    return _checked(report)


def alt_test_text(request: FilesAltTestRequest) -> dict[str, Any]:
    """``alt_test_files`` on CSV text sent in a request, as JSON; a problem in either text
    names it (``human_csv line 3: ...``), never the temporary files it was written to."""

    with posted_csv(request.human_csv, request.judge_csv, request.scale) as (human, judge, scale):
        if judge is None:  # the request's schema requires it; a caller building one may not
            raise InvalidInputError("judge_csv: the judge's scores are required")
        report = alt_test_files(human, judge, request, scale=scale)
    return report.to_dict()
