"""How many human ratings a corrected bias figure needs (``judge.stats.ppi.plan_human_ratings``):
for an interval of a given half-width around what people say, with the judge's scores of
every item (prediction-powered, PPI++) and without them (human-only).

The plan needs the judge-human correlation ``rho`` and people's spread ``sd``. Either comes
from a pilot, the ratings already stored for the judge run's answers (any design: a
correlation and a spread need no weights to be a planning guess), or ``rho`` is given. With
no pilot spread, a share's largest possible spread is used (50 percentage points, a 50 %
share), or for a mean the judge's own spread; the output says which. ``N`` is the number of
items the judge scored. The estimates (``annotation.estimates``) follow ppi_py's convention:
of those ``N``, the ``n`` that people rate enter as ratings and only the other ``N - n`` as
the judge's part, so the plan solves for ``n`` with the unrated part shrinking as ``n`` grows
(``plan_human_ratings(n_judged=N)``); rating every item is the most a plan can ask, and a
narrower interval than that gives is out of reach.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
from sqlmodel import Session

from annotation.estimate_cells import RunData, Target, find_target, targets
from annotation.estimate_results import finite
from annotation.estimates import load_run_data
from judge.errors import InvalidInputError
from judge.reports.sections import Table
from judge.stats.ppi_plan import plan_human_ratings

MIN_HALF_WIDTH = 1e-6
"""The narrowest interval planned for (a narrower one's count overflows the arithmetic)."""
LARGEST_SHARE_SD = 50.0
"""The largest standard deviation a 0/100 value can have (a 50 % share), in points."""


@dataclass(frozen=True)
class RatingPlan:
    """Human ratings one target (a stage metric over all items, or a rubric's mean) needs for
    an interval of ``half_width``, with the judge (PPI++) and without; ``n_ppi`` is None when
    no plan could be made, and ``reason`` says why."""

    target: str
    unit: str
    half_width: float
    N: int  # items the judge scored
    n_pilot: int  # rated items the judge also scored
    rho: float | None = None
    rho_source: str = ""
    sd: float | None = None
    sd_source: str = ""
    n_ppi: int | None = None
    n_human_only: int | None = None
    ratings_saved: int | None = None
    reason: str = ""


@dataclass(frozen=True)
class RatingPlans:
    """A plan per target, at one interval level."""

    judge_run: int
    alpha: float
    plans: list[RatingPlan]

    def to_dict(self) -> dict[str, Any]:
        return dict(finite(asdict(self)))

    def table(self) -> Table:
        """One row per target: the inputs planned with, the two counts, any reason."""
        rows = []
        for p in self.plans:
            rho = "n/a" if p.rho is None else f"{p.rho:.2f} ({p.rho_source})"
            sd = "n/a" if p.sd is None else f"{p.sd:.3g} ({p.sd_source})"
            counts = [("n/a" if n is None else str(n)) for n in (p.n_ppi, p.n_human_only)]
            rows.append([p.target, f"{p.half_width:g}", str(p.N), str(p.n_pilot), rho, sd])
            rows[-1] += [*counts, p.reason]
        columns = ["target", "half-width", "items", "pilot pairs", "rho", "sd"]
        columns += ["ratings (PPI)", "ratings (human-only)", "note"]
        level = f"{100 * (1 - self.alpha):g} %"
        return Table(
            f"Human ratings for a {level} interval (judge run {self.judge_run})",
            columns,
            rows,
            notes=[
                "half-width in the target's unit: percentage points for a stage metric, "
                "scale points for a rubric's mean"
            ],
        )


def _pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's r; None with fewer than 3 pairs or a side that does not vary."""
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def _spread(target: Target, human: list[float], judge: list[float]) -> tuple[float, str]:
    """People's standard deviation to plan with, and where it came from."""
    if len(human) >= 2 and np.ptp(human) > 0:
        return float(np.std(human, ddof=1)), "pilot ratings"
    if target.kind == "share":
        return LARGEST_SHARE_SD, "the largest a share can have"
    return float(np.std(judge)), "the judge's spread"


def plan_target(
    target: Target, data: RunData, half_width: float, rho: float | None, alpha: float
) -> RatingPlan:
    """The plan for one target (see the module docstring)."""
    judge, human = target.values(data, target.population(data))
    pairs = [i for i in sorted(human) if i in judge]
    plan = RatingPlan(target.name, target.unit, half_width, len(judge), len(pairs))
    if not judge:
        return replace(plan, reason="the judge scored no item of it")
    if rho is not None:
        used, source = rho, "given"
    else:
        pilot = _pearson([human[i] for i in pairs], [judge[i] for i in pairs])
        if pilot is None and len(pairs) < 3:
            why = f"{len(pairs)} pilot pair(s): 3 are needed for a correlation; give rho"
            return replace(plan, reason=why)
        # A side that does not vary: the judge cannot predict people here; plan without it.
        used, source = (pilot, f"pilot, {len(pairs)} pairs") if pilot is not None else (0.0, (
            "undefined in the pilot (a side does not vary): planned as 0"
        ))  # fmt: skip
    plan = replace(plan, rho=used, rho_source=source)
    sd, sd_source = _spread(target, [human[i] for i in sorted(human)], list(judge.values()))
    if sd == 0:
        return replace(plan, reason="no spread to plan with: people and judge give one value")
    found = plan_human_ratings(
        rho=used, sd=sd, half_width=half_width, n_judged=len(judge), alpha=alpha
    )
    note = ""
    if found.n_human_only > len(judge):
        # Ratings are counted per item: more than the items means raters per item, which the
        # plan does not model (two people rating one item are not two independent items).
        note = (
            f"more ratings than the {len(judge)} items the judge scored: out of reach with "
            "one rating per item; aim for a wider interval"
            if found.n_ppi > len(judge)
            else f"human-only is out of reach with the {len(judge)} items the judge scored"
        )
    return replace(
        plan, sd=sd, sd_source=sd_source, n_ppi=found.n_ppi, n_human_only=found.n_human_only,
        ratings_saved=found.ratings_saved, reason=note,
    )  # fmt: skip


def rating_plans(
    session: Session,
    judge_run_id: int,
    *,
    half_width: float,
    rho: float | None = None,
    target: str | None = None,
    campaigns: Sequence[str] = (),
    human: str = "mean",
    alpha: float = 0.05,
) -> RatingPlans:
    """A plan per stage metric (over all items) of the judge run, or for ``target`` alone (a
    stage metric's name or label, or a rubric): the human ratings an interval of
    ``half_width`` needs, in the target's unit (percentage points for a metric, scale points
    for a rubric), with the judge and without. ``rho``: the judge-human correlation to plan
    with; without it, the pilot's (the stored ratings of ``campaigns``, every one when
    empty). Metrics the judge run has no item of are left out."""
    if not (isinstance(half_width, int | float) and math.isfinite(half_width)) or half_width < (
        MIN_HALF_WIDTH
    ):
        raise InvalidInputError(
            f"half_width must be a number of at least {MIN_HALF_WIDTH:g}, got {half_width!r}"
        )
    if rho is not None and not -1 <= rho <= 1:
        raise InvalidInputError(f"rho must be a correlation in [-1, 1], got {rho!r}")
    if not 0 < alpha < 1:
        raise InvalidInputError(f"alpha must be between 0 and 1, got {alpha!r}")
    data = load_run_data(session, judge_run_id, campaigns, human)
    chosen = [find_target(data, target)] if target is not None else targets(data)[0]
    plans = [plan_target(t, data, half_width, rho, alpha) for t in chosen]
    return RatingPlans(data.run_id, alpha, [p for p in plans if p.N or target is not None])
