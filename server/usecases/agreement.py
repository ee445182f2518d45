"""Agreement between the judge and the human ratings, one use case for the CLI
(``fairjudge agreement``) and the web API (``GET /api/v1/judge-runs/RUN/agreement``), and
agreement for the user's own CSV files (``agreement compute``; over HTTP, ``POST
/api/v1/agreement`` with the files' text).

Both interfaces take an ``AgreementRequest`` and give ``Agreement.to_dict()``: every
coefficient as numbers (value, CI, p-value, n, and why it is undefined when it is), per
rubric, with the humans' own agreement beside the judges'. A request names a generation run
(every judge run of it) or one judge run (that judge alone, against the ratings of its
generation run).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from judge.errors import InvalidInputError, NotFoundError
from judge.vocab import SCALE, Scale
from server.usecases.requests import NumbersNotBooleans

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

    from annotation.files import FileAgreement
    from annotation.reliability import RunReliability
    from judge.reports.sections import AgreementPlot, Table


class BootstrapChoices(NumbersNotBooleans):
    """How the coefficients' intervals are computed, and how raters combine per item."""

    model_config = ConfigDict(extra="forbid")

    n_bootstrap: int = Field(
        default=1000,
        ge=0,
        le=100_000,
        description="Bootstrap resamples for the 95 % CIs (0 = none).",
    )
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="Seed of the bootstrap.")
    human_score: Literal["mean", "median"] = Field(
        default="mean", description="How an item's human score combines its raters."
    )


class AgreementOptions(BootstrapChoices):
    """How the coefficients are computed: the defaults of ``fairjudge agreement``."""

    target_half_width: float = Field(
        default=0.1,
        gt=0,
        le=1,
        description="Half the CI's width to aim for when estimating how many items to rate.",
    )


GROUP_BY: Any = Field(
    default=None,
    pattern=r"^(stage|factor|scenario|fields\.[A-Za-z0-9_.-]{1,100})$",
    description="Also correlate within groups of items and average over the groups: stage, "
    "factor, scenario, or fields.NAME (a field of the items' texts, e.g. the document a "
    "summary was written from).",
)
"""The ``group_by`` field of the CLI's and the API's agreement requests."""


class AgreementRequest(AgreementOptions):
    """Whose agreement: a generation run's judge runs, or one judge run (exactly one of the
    two), on the ratings of ``campaigns`` (every campaign and import batch of the run when
    empty, the newest winning per rater, item and rubric)."""

    generation_run: int | None = Field(default=None, ge=1)
    judge_run: int | None = Field(default=None, ge=1)
    campaigns: list[str] = Field(default_factory=list)
    group_by: str | None = GROUP_BY

    @model_validator(mode="after")
    def _one_run(self) -> AgreementRequest:
        if (self.generation_run is None) == (self.judge_run is None):
            raise ValueError("name a generation run or a judge run (one of the two)")
        return self


@dataclass(frozen=True)
class Agreement:
    """A request's answer: the reliability of the judge runs asked about, per rubric."""

    reliability: RunReliability
    judge_run: int | None = None
    standing: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Judge run -> rubric -> its standing's JSON, filled by
    ``server.usecases.standing.agreement_with_standing`` (this module imports no standing:
    the standing's qualification reads the alt-test, which reads this module)."""

    def to_dict(self) -> dict[str, Any]:
        """The one JSON shape of both interfaces (``server.schemas.AgreementOut``): each
        judge's entry carries its run's ``standing`` on the rubric (null when unknown)."""
        out = {"judge_run": self.judge_run, **self.reliability.to_dict()}
        for rubric, entry in out["rubrics"].items():
            for judge in entry["judges"]:
                judge["standing"] = self.standing.get(judge["judge_run"], {}).get(rubric)
        return out

    def tables(self) -> list[Table]:
        """Table 3 per coefficient, then the humans among themselves."""
        from annotation.sections import human_tables, reliability_tables

        suffix = f" (run {self.reliability.generation_run})"
        return [*reliability_tables(self.reliability), *human_tables(self.reliability, suffix)]

    def readings(self) -> list[str]:
        """One plain-language line per rubric x judge (and where the ratings came from)."""
        from annotation.sections import readings

        return readings(self.reliability)

    def plots(self) -> Iterator[tuple[str, int, AgreementPlot]]:
        """(rubric, judge run, scatter + confusion) for every judge that scored rated items."""
        from annotation.sections import agreement_plot

        for rubric, entry in self.reliability.rubrics.items():
            for judge in entry.judges:
                plot = agreement_plot(rubric, judge)
                if plot is not None:
                    yield rubric, judge.judge_run, plot


def agreement(session: Session, request: AgreementRequest) -> Agreement:
    """The judge's agreement with the stored human ratings (``request``: whose, on which
    ratings, how). NotFoundError when the run is unknown or has no human ratings yet."""
    from annotation.reliability import run_reliability
    from judge.stats.coefficient import BootstrapOptions

    generation_run = request.generation_run
    if request.judge_run is not None:
        generation_run = _rated_generation_run(session, request.judge_run)
    assert generation_run is not None  # the request names one run or the other
    found = run_reliability(
        session,
        generation_run,
        options=BootstrapOptions(n_bootstrap=request.n_bootstrap, seed=request.seed),
        human=request.human_score,
        target_half_width=request.target_half_width,
        campaigns=request.campaigns,
        group_by=request.group_by,
    )
    if request.judge_run is not None:
        only = request.judge_run
        rubrics = {
            name: replace(entry, judges=[j for j in entry.judges if j.judge_run == only])
            for name, entry in found.rubrics.items()
        }
        found = replace(found, rubrics=rubrics)
    return Agreement(found, request.judge_run)


def agreement_in(engine: Engine, request: AgreementRequest) -> Agreement:
    """``agreement`` in a session of its own."""
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        return agreement(session, request)


def _rated_generation_run(session: Session, judge_run_id: int) -> int:
    """The judge run's generation run, once it is known to have human ratings."""
    from sqlmodel import select

    from judge.store.queries import get_judge_run
    from judge.store.tables import HumanRating

    run = get_judge_run(session, judge_run_id)
    rated = session.exec(
        select(HumanRating.id).where(HumanRating.generation_run_id == run.generation_run_id)
    ).first()
    if rated is None:
        raise NotFoundError(
            f"judge run {judge_run_id} has no human ratings to compare with; run a campaign "
            "(POST /api/v1/campaigns) or import ratings (`fairjudge ratings import`)"
        )
    return run.generation_run_id


def files_agreement(
    human_csv: str | Path,
    judge_csv: str | Path | None = None,
    *,
    group_by: str | None = None,
    scale: Scale | None = None,
    options: BootstrapChoices | None = None,
) -> FileAgreement:
    """Agreement for ratings (and judge scores) kept in the user's own CSV files, on
    ``scale`` (1-5 unless given)."""
    from annotation.files import compute
    from judge.stats.coefficient import BootstrapOptions

    chosen = options or BootstrapChoices()
    return compute(
        human_csv,
        judge_csv,
        group_by=group_by,
        options=BootstrapOptions(n_bootstrap=chosen.n_bootstrap, seed=chosen.seed),
        human=chosen.human_score,
        scale=SCALE if scale is None else scale,
    )


SCALE_FIELD: Any = Field(
    default="1-5",
    min_length=1,
    max_length=2000,
    description="Rating scale: LOW-HIGH (e.g. 0-3, 1-7), 0/1, 1,2,3 (the levels) or "
    "poor,fair,good (named levels, coded 1, 2, 3).",
)
"""The ``scale`` of a request that carries CSV text (the CLI's ``--scale``)."""


class FilesAgreementRequest(BootstrapChoices):
    """``fairjudge agreement compute`` over HTTP: the two files' text in the request."""

    human_csv: str = Field(
        min_length=1,
        description="CSV text, long format: item_id,rater,score (other columns allowed).",
    )
    judge_csv: str | None = Field(
        default=None,
        min_length=1,
        description="CSV text: item_id,score (several rows per item = samples, averaged).",
    )
    group_by: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="A column of human_csv to compute grouped correlations by.",
    )
    scale: str = SCALE_FIELD


@contextmanager
def posted_csv(
    human_csv: str, judge_csv: str | None, scale: str
) -> Iterator[tuple[Path, Path | None, Scale]]:
    """CSV text sent in a request as the files the file readers take (``human_csv`` and
    ``judge_csv`` in a temporary folder), and the scale parsed. An InvalidInputError raised
    while they are in use names the text (``human_csv line 3: ...``), never the folder."""

    try:
        parsed = Scale.parse(scale)
    except ValueError as exc:
        raise InvalidInputError(f"scale: {exc}") from None
    with tempfile.TemporaryDirectory() as folder:
        human = Path(folder) / "human_csv"
        human.write_text(human_csv, encoding="utf-8")
        judge = None
        if judge_csv is not None:
            judge = Path(folder) / "judge_csv"
            judge.write_text(judge_csv, encoding="utf-8")
        try:
            yield human, judge, parsed
        except InvalidInputError as exc:
            head = str(exc).split("\n", 1)[0].replace(f"{folder}/", "")
            problems = [(n, why.replace(f"{folder}/", "")) for n, why in exc.problems]
            raise InvalidInputError(head, problems) from None


def text_agreement(request: FilesAgreementRequest) -> dict[str, Any]:
    """``files_agreement`` on CSV text sent in a request, as JSON (numbers that are not
    finite as null); a problem in either text names it (``human_csv line 3: ...``)."""
    from annotation.estimate_results import finite

    with posted_csv(request.human_csv, request.judge_csv, request.scale) as (human, judge, scale):
        result = files_agreement(
            human, judge, group_by=request.group_by, scale=scale, options=request
        )
    return dict(finite(result.to_dict()))


def files_table(result: FileAgreement) -> Table:
    """What ``agreement compute`` prints: every coefficient with CI, p-value and n."""
    from annotation.sections import files_table as table

    return table(result)
