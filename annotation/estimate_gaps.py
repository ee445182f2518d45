"""A gap between two groups of a judge run's items (``annotation.estimates``), three ways: one
estimate of A minus B with the difference's own interval. The groups' items are disjoint, so
their variances add; the prediction-powered gap tunes each group on its own data
(``judge.stats.ppi.ppi_gap``, or ``judge.stats.ppi_run.ppi_run_gap`` for a weighted design).
A small group (under 30 rated items) makes the interval a t one at the fewer of the two
groups' ``n - 1`` degrees of freedom (``judge.stats.ppi.gap_df``)."""

from __future__ import annotations

import math

import numpy as np
from sqlmodel import Session

from annotation.estimate_cells import RunData, cell_estimates, cell_group, find_target
from annotation.estimate_results import (
    HUMAN_ONLY,
    JUDGE_ONLY,
    PPI,
    Design,
    Estimate,
    GapEstimates,
    GapQuery,
    finite,
)
from annotation.reliability import item_groups
from judge.errors import InvalidInputError
from judge.stats.ppi import GapEstimate, Group, gap_df, interval, ppi_gap
from judge.stats.ppi_run import RunGroup, ppi_run_gap


def difference(method: str, a: Estimate, b: Estimate, alpha: float, width: float) -> Estimate:
    """A minus B for two independent estimates: the difference, their variances added; a t
    interval when either rests on fewer than 30 ratings (never for judge-only)."""
    n, N, design = a.n + b.n, a.N + b.N, a.design
    if a.value is None or b.value is None or a.se is None or b.se is None:
        reason = "; ".join(f"group {g}: {e.reason}" for g, e in (("A", a), ("B", b)) if e.reason)
        return Estimate.refused(method, n, N, design, reason)
    value, se = a.value - b.value, math.hypot(a.se, b.se)
    df = None if method == JUDGE_ONLY else gap_df(a.n, b.n)
    low, high, name = interval(value, se, alpha, df)
    low, high = max(-width, low), min(width, high)
    effective, saved = (None, None) if method == JUDGE_ONLY else (float(n), 0.0)
    small = a.small_sample or b.small_sample
    return Estimate(
        method, value, low, high, se, n, N, effective, saved, None, design, small, "", name
    )


def _ppi_gap(a: Group | RunGroup, b: Group | RunGroup, alpha: float) -> GapEstimate | None:
    """The prediction-powered gap of two groups' PPI data; None where the groups are not of
    one kind, or one has no unrated item (then the groups' own estimates are differenced)."""
    if isinstance(a, RunGroup) and isinstance(b, RunGroup):
        return ppi_run_gap(a, b, alpha=alpha)
    if isinstance(a, Group) and isinstance(b, Group):
        if np.size(a.yhat_unlabelled) and np.size(b.yhat_unlabelled):
            return ppi_gap(a, b, alpha=alpha)
    return None


def gap_estimates(
    session: Session, data: RunData, query: GapQuery, design: Design, alpha: float
) -> GapEstimates:
    """The gap ``query`` asks for. InvalidInputError for an unknown target or group."""
    target = find_target(data, query.target)
    population = target.population(data)
    groups = item_groups(session, sorted({s.item_id for s in population}), query.group_by)
    found = sorted(set(groups.values()))
    for side in (query.a, query.b):
        if side not in found:
            raise InvalidInputError(
                f"no item of {target.label} has {query.group_by} {side!r}; its items have: "
                + ", ".join(found)
            )
    if query.a == query.b:
        raise InvalidInputError("a gap needs two different groups; A and B are the same")
    width = target.bounds[1] - target.bounds[0]
    sides = []
    for side in (query.a, query.b):
        judge, human = target.values(data, [s for s in population if groups[s.item_id] == side])
        sides.append(
            (judge, human, cell_estimates(judge, human, design, alpha, target.bounds, target.kind))
        )
    (ja, ha, ea), (jb, hb, eb) = sides
    methods = [
        difference(JUDGE_ONLY, ea[0], eb[0], alpha, width),
        difference(HUMAN_ONLY, ea[1], eb[1], alpha, width),
    ]
    g = None
    if ea[2].value is not None and eb[2].value is not None:
        g = _ppi_gap(cell_group(ja, ha, design), cell_group(jb, hb, design), alpha)
    if g is None:
        methods.append(difference(PPI, ea[2], eb[2], alpha, width))
    else:
        methods.append(
            Estimate(
                PPI,
                g.estimate,
                max(-width, g.ci_low),
                min(width, g.ci_high),
                g.se,
                g.a.n + g.b.n,
                len(ja) + len(jb),
                finite(g.effective_n),
                finite(g.ratings_saved),
                None,
                ea[2].design,
                g.small_sample,
                "",
                g.interval,
            )  # fmt: skip
        )
        ea = (*ea[:2], Estimate.of(g.a, PPI, len(ja), ea[2].design, target.bounds))
        eb = (*eb[:2], Estimate.of(g.b, PPI, len(jb), eb[2].design, target.bounds))
    per_group = {m.method: (ea[k], eb[k]) for k, m in enumerate(methods)}
    judge_only, human_only, ppi = methods
    return GapEstimates(
        target.name, query.group_by, query.a, query.b, target.unit, judge_only, human_only, ppi,
        per_group,
    )  # fmt: skip
