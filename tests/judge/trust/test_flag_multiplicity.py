"""The judge checks' order and length flags hold together over a run's rubrics, by simulation.

Both checks flag a rubric on a bootstrap interval, so the correction is Bonferroni's
simultaneous confidence (``judge.stats.multiplicity.simultaneous_confidence``) over the run's
claims. Null designs (no rubric order-biased or length-biased beyond the people): over seeded
runs the share with any flag is at most 0.05, while the same intervals at a plain 95 % per
rubric flag more runs (the check can fail). Planted: one rubric of four biased, found in at
least 80 % of runs.

Order null: per pair, the same score in both orders with probability 0.88, else recency or
primacy with 0.06 each (true position consistency 0.88, above the 0.8 bound; preference
fairness 0). Length null: the judge's and the people's scores follow length equally (the same
slope and noise), so the true difference of the two Spearman correlations is 0.
"""

from __future__ import annotations

import numpy as np

from judge.stats.tests import paired_shift
from judge.trust.diagnostics import length_rows
from judge.trust.position import (
    LEVEL,
    MIN_CONSISTENCY,
    flag_reasons,
    order_rows,
    position_stats,
)

RUBRICS = ("SBAS", "R1", "R2", "R3")  # four rubrics that judge a preference: eight claims
PAIRS = 60
RUNS = 150


Orders = dict[str, dict[int, dict[str, list[int]]]]


def _orders(rng: np.random.Generator, planted: str | None) -> Orders:
    out: Orders = {}
    for rubric in RUBRICS:
        probs = [0.88, 0.06, 0.06] if rubric != planted else [0.68, 0.30, 0.02]
        kinds = rng.choice(3, size=PAIRS, p=probs)  # 0 consistent, 1 recency, 2 primacy
        given = {0: 3, 1: 4, 2: 3}
        swapped = {0: 3, 1: 3, 2: 4}
        out[rubric] = {
            i: {"given": [given[int(k)]], "swapped": [swapped[int(k)]]} for i, k in enumerate(kinds)
        }
    return out


def _unadjusted(orders: Orders) -> bool:
    """Any flag when each rubric's own 95 % intervals decide (no correction)."""
    for pairs in orders.values():
        given = [float(c["given"][0]) for c in pairs.values()]
        swapped = [float(c["swapped"][0]) for c in pairs.values()]
        stats = position_stats(given, swapped)
        if flag_reasons(stats, paired_shift(given, swapped, n_bootstrap=200), 0.0, MIN_CONSISTENCY):
            return True
    return False


def test_a_null_order_check_flags_at_most_five_percent_of_runs() -> None:
    rng = np.random.default_rng(5)
    adjusted = unadjusted = 0
    for _ in range(RUNS):
        orders = _orders(rng, None)
        rows, flag_level = order_rows(orders)
        assert flag_level == 1 - 0.05 / 8  # Bonferroni over 4 rubrics x 2 claims
        adjusted += any(r.flagged for r in rows)
        unadjusted += _unadjusted(orders)
    assert adjusted / RUNS <= 0.05
    assert unadjusted / RUNS > 0.1
    assert unadjusted > adjusted


def test_a_planted_recency_rubric_is_found_with_power_of_at_least_080() -> None:
    rng = np.random.default_rng(9)
    found = 0
    for _ in range(RUNS):
        rows, _ = order_rows(_orders(rng, "R2"))
        found += "recency" in next(r for r in rows if r.rubric == "R2").reasons
    assert found / RUNS >= 0.8


def _found(rng: np.random.Generator, planted: str | None) -> list:
    out = []
    for rubric in RUBRICS:
        length = rng.integers(20, 400, size=60)
        z = (length - length.mean()) / length.std()
        judge = (1.6 if rubric == planted else 0.5) * z + rng.normal(size=60)
        human = 0.5 * z + rng.normal(size=60)
        rated = [(int(a), float(b), float(c)) for a, b, c in zip(length, judge, human, strict=True)]
        out.append((rubric, 60, None, None, rated))
    return out


def test_a_null_length_check_flags_at_most_five_percent_of_runs() -> None:
    rng = np.random.default_rng(13)
    adjusted = unadjusted = 0
    for _ in range(RUNS):
        rows = length_rows(_found(rng, None), level=LEVEL, n_bootstrap=1000)
        assert rows[0].flag_level == 1 - 0.05 / 4
        adjusted += any(r.flagged for r in rows)
        unadjusted += any(r.difference_low is not None and r.difference_low > 0 for r in rows)
    assert adjusted / RUNS <= 0.05
    assert unadjusted / RUNS > 0.05
    assert unadjusted > adjusted


def test_a_planted_length_rubric_is_found_with_power_of_at_least_080() -> None:
    rng = np.random.default_rng(17)
    found = 0
    for _ in range(RUNS):
        rows = length_rows(_found(rng, "R1"), level=LEVEL, n_bootstrap=1000)
        found += next(r for r in rows if r.rubric == "R1").flagged
    assert found / RUNS >= 0.8
