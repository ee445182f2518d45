"""Juries (issue 44): several judge runs of the same answers combined, against people, beside
each single judge, with the paired interval for "jury minus best judge" and the jury's cost.
One use case for the CLI (``fairjudge jury RUN RUN...``) and the web API (``GET
/api/v1/juries?runs=1,2,3``); the statistics are
``judge.stats.jury``'s, the reading ``annotation.jury``'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import ConfigDict, Field

from server.usecases.context import run_prices
from server.usecases.requests import MAX_ID, NumbersNotBooleans

if TYPE_CHECKING:
    from sqlmodel import Session

    from annotation.jury import Jury
    from judge.config import Settings
    from judge.reports.sections import Table


class JuryOptions(NumbersNotBooleans):
    """How a jury is combined and compared (the options of ``fairjudge jury``)."""

    model_config = ConfigDict(extra="forbid")

    combine: Literal["mean", "median", "majority", "learnt"] = Field(
        default="mean",
        description="How the judges' scores of an item combine: mean, median, majority (ties: "
        "the tied level nearest the judges' median, the lower of two equally near) or learnt "
        "(weights >= 0 summing to 1, learnt on rated items, cross-fitted over folds).",
    )
    statistic: Literal["spearman", "pearson", "kendall", "kappa_quadratic"] = Field(
        default="spearman",
        description="The agreement statistic the jury and its best judge are compared on.",
    )
    folds: int = Field(
        default=5, ge=2, le=50, description="With combine learnt: the cross-fitting folds."
    )
    n_bootstrap: int = Field(
        default=1000, ge=0, le=100_000, description="Bootstrap resamples (0: no intervals)."
    )
    seed: int = Field(default=0, ge=0, le=2**32 - 1, description="Seed of resamples and folds.")
    human_score: Literal["mean", "median"] = Field(
        default="mean", description="How an item's human score combines its raters."
    )


class JuryRequest(JuryOptions):
    """A jury of judge runs, on the ratings of ``campaigns``, and how it is combined."""

    runs: list[Annotated[int, Field(ge=1, le=MAX_ID)]] = Field(
        min_length=1,
        max_length=20,
        description="The judge runs of the jury (two or more, of the same answers).",
    )
    campaigns: list[str] = Field(
        default_factory=list,
        max_length=50,
        description="Campaigns (or import:BATCH) whose ratings count; empty: every one.",
    )


def jury(session: Session, request: JuryRequest, settings: Settings | None = None) -> Jury:
    """The jury of ``request.runs`` (``annotation.jury.jury``), each run's cost at its
    endpoint's prices in ``settings`` (unknown without them). InvalidInputError for a jury of
    one run, runs of different answers, rubrics or scales, or no rated item; NotFoundError
    for an unknown run."""
    from annotation.jury import jury as make_jury
    from judge.stats.coefficient import BootstrapOptions
    from judge.store.queries import get_judge_run

    prices = {
        i: run_prices(settings, get_judge_run(session, i).endpoint_name)
        for i in dict.fromkeys(request.runs)
    }
    return make_jury(
        session,
        request.runs,
        how=request.combine,
        statistic=request.statistic,
        folds=request.folds,
        human=request.human_score,
        campaigns=request.campaigns,
        options=BootstrapOptions(n_bootstrap=request.n_bootstrap, seed=request.seed),
        prices=prices,
    )


def jury_summary(result: Jury) -> tuple[list[Table], list[str]]:
    """The jury's tables, then one verdict line per rubric and the cost line."""
    from annotation.jury import cost_line, jury_tables, verdict_line

    lines = [verdict_line(result, name) for name in result.rubrics]
    return jury_tables(result), [*lines, cost_line(result)]
