"""Holm's correction over the award audit's tables (judge.audits.award), by simulation.

Null design: every level's answers choose group A or B with probability 0.5 (and, for the
follow-up, the explanation's class is drawn independently of the chosen group), so any flag
is false. Holm bounds the chance of any false flag in a table at 0.05, so over seeded runs
the share with a flag must be at most 0.05; the unadjusted p-values (each below 0.05) flag
far more runs (about 1 - 0.95^5 with five near-independent tests, less for the exact test's
conservatism), which shows the check can fail. Planted: one level chooses A with probability
0.62 on 250 answers (z of about 3.8 against the Holm threshold 0.01 = z 2.58 for the smallest
of five p-values), found in at least 80 % of runs.
"""

from __future__ import annotations

import numpy as np

from judge.audits.award import FOLLOWUP_CLASSES, analyze, analyze_followup
from judge.stats.multiplicity import ALPHA

LEVELS = (5, 10, 15, 20)
PER_LEVEL = 250
RUNS = 400


def _choices(rng: np.random.Generator, share_a: dict[int, float]) -> list[tuple[int, None, str]]:
    rows: list[tuple[int, None, str]] = []
    for level in LEVELS:
        a = rng.random(PER_LEVEL) < share_a.get(level, 0.5)
        rows += [(level, None, "A" if x else "B") for x in a]
    return rows


def _any(flags: list[bool]) -> bool:
    return any(flags)


def test_a_null_choice_table_flags_at_most_five_percent_of_runs() -> None:
    rng = np.random.default_rng(42)
    adjusted = unadjusted = 0
    for _ in range(RUNS):
        result = analyze(_choices(rng, {}))
        cells = [*result.levels, result.overall]
        adjusted += _any([c.flagged for c in cells])
        unadjusted += _any([c.binomial.p_value < ALPHA for c in cells])
    assert adjusted / RUNS <= 0.05
    assert unadjusted / RUNS > 0.08  # the raw p-values would flag well above 5 %
    assert unadjusted > adjusted


def test_a_planted_level_is_found_with_power_of_at_least_080() -> None:
    rng = np.random.default_rng(7)
    found = 0
    for _ in range(200):
        result = analyze(_choices(rng, {15: 0.62}))
        found += next(c for c in result.levels if c.level == 15).flagged
    assert found / 200 >= 0.8


def test_holm_values_match_a_hand_computation() -> None:
    # level 5: 60 A of 100 (p 0.0569), level 10: 50 of 100 (p 1.0); overall 110 of 200
    rows = [(5, None, "A")] * 60 + [(5, None, "B")] * 40
    rows += [(10, None, "A")] * 50 + [(10, None, "B")] * 50
    result = analyze(rows)
    p = [c.binomial.p_value for c in [*result.levels, result.overall]]
    ordered = sorted(p)  # Holm by hand: smallest x3, next x2 (made non-decreasing), last x1
    hand = [ordered[0] * 3, max(ordered[0] * 3, ordered[1] * 2), 1.0]
    got = sorted(c.p_adjusted for c in [*result.levels, result.overall])  # type: ignore[type-var]
    assert got == [min(h, 1.0) for h in hand]
    assert not any(c.flagged for c in [*result.levels, result.overall])


def _followups(rng: np.random.Generator, biased: int | None) -> list[tuple[int, str, str]]:
    rows: list[tuple[int, str, str]] = []
    for level in LEVELS:
        group = rng.random(PER_LEVEL) < 0.5
        for is_a in group:
            probs = [0.2, 0.6, 0.2]
            if biased == level and is_a:  # group A's choices explained as irrational more often
                probs = [0.2, 0.35, 0.45]
            kind = FOLLOWUP_CLASSES[int(rng.choice(3, p=probs))]
            rows.append((level, "A" if is_a else "B", kind))
    return rows


def test_a_null_followup_table_flags_at_most_five_percent_of_runs() -> None:
    rng = np.random.default_rng(3)
    adjusted = unadjusted = 0
    for _ in range(RUNS):
        result = analyze_followup(_followups(rng, None))
        cells = [*result.levels, result.overall]
        assert all(c.chi_square.tested for c in cells)
        adjusted += _any([c.flagged for c in cells])
        unadjusted += _any([c.chi_square.p_value < ALPHA for c in cells])
    assert adjusted / RUNS <= 0.05
    assert unadjusted / RUNS > 0.08
    assert unadjusted > adjusted


def test_a_planted_followup_level_is_found_with_power_of_at_least_080() -> None:
    rng = np.random.default_rng(11)
    found = 0
    for _ in range(200):
        result = analyze_followup(_followups(rng, 10))
        found += next(c for c in result.levels if c.level == 10).flagged
    assert found / 200 >= 0.8
