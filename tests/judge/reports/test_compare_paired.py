"""judge.reports.compare_paired on item scores built by hand: a shift planted in one factor's
S1 cell is flagged after Holm and nothing else is; runs without a planted difference flag
nothing; McNemar's p against the binomial sum by hand; the bootstrap interval against
scipy.stats.bootstrap (paired); TOST at margins wider and narrower than the shift; runs of
different items refused with the counts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from judge.errors import InvalidInputError
from judge.metrics import ItemScore
from judge.reports.compare_paired import (
    MCNEMAR,
    SIGN_FLIP,
    PairedRow,
    check_same_items,
    paired_rows,
    paired_section,
)

N = 40  # paired items per factor


def score(item_id: int, factor: str, value: float | None, rubric: str = "ICS") -> ItemScore:
    stage = "S1" if rubric == "ICS" else "S3"
    return ItemScore(
        item_id,
        f"k{item_id}",
        stage,
        factor,
        "sc",
        rubric,
        value,
        1,
        int(value is not None),
        (item_id,),
        () if value is not None else ("prose",),
    )


def planted() -> tuple[list[ItemScore], list[ItemScore]]:
    """Three factors of 40 S1 items each, plus one item per side unscored.

    gender: A scores 4 on every item, B 2 on the first 30 (30 pass->fail, none back): the
    planted shift. race: 9 items go 4 -> 2 and 3 go 2 -> 4, the rest unchanged (a -15 point
    shift, not significant: McNemar p = 0.146, below). age: the same scores in both runs.
    """
    a: list[ItemScore] = []
    b: list[ItemScore] = []
    i = 0
    for k in range(N):
        a.append(score(i, "gender", 4))
        b.append(score(i, "gender", 2 if k < 30 else 4))
        i += 1
    for k in range(N):
        x, y = (4, 2) if k < 9 else (2, 4) if k < 12 else (1 + k % 5, 1 + k % 5)
        a.append(score(i, "race", x))
        b.append(score(i, "race", y))
        i += 1
    for k in range(N):
        a.append(score(i, "age", 1 + (k * 3) % 5))
        b.append(score(i, "age", 1 + (k * 3) % 5))
        i += 1
    a.append(score(i, "gender", 4))  # B's side unscored
    b.append(score(i, "gender", None))
    a.append(score(i + 1, "age", None))  # A's side unscored
    b.append(score(i + 1, "age", 3))
    return a, b


def cell(rows: list[PairedRow], factor: str, metric: str) -> PairedRow:
    return next(r for r in rows if r.factor == factor and r.metric == metric)


SHARE, MEAN = "S1 ICS share>=3 (%)", "S1 ICS mean (% of max)"


def test_planted_shift_is_flagged_on_its_factor_only() -> None:
    rows = paired_rows(*planted(), margin=5)
    flagged = {(r.factor, r.metric) for r in rows if r.flagged}
    # gender's two S1 rows, and the overall rows that contain them; race and age are not
    assert flagged == {("gender", SHARE), ("gender", MEAN), ("all", SHARE), ("all", MEAN)}
    g = cell(rows, "gender", SHARE)
    assert (g.n_pairs, g.dropped_a, g.dropped_b) == (40, 0, 1)
    assert (g.value_a, g.value_b, g.diff) == (100.0, 25.0, -75.0)  # 30 of 40 fail in B
    assert (g.pass_to_fail, g.fail_to_pass) == (30, 0)
    assert g.test == MCNEMAR and cell(rows, "gender", MEAN).test == SIGN_FLIP
    # the mean falls from 4 to 2 on 30 of 40 items: (2 x 30 / 40) / 5 x 100 = 30 points
    assert cell(rows, "gender", MEAN).diff == pytest.approx(-30.0)
    age = cell(rows, "age", SHARE)
    assert (age.n_pairs, age.dropped_a, age.dropped_b, age.diff) == (40, 1, 0, 0.0)
    assert age.p_value == 1.0  # no discordant pair


def test_no_planted_difference_flags_nothing() -> None:
    """B = A plus symmetric noise (-1, 0, 0 or +1 point) in 40 seeded repetitions: Holm holds
    the chance of any flag in a table at 5 %, so at most 4 of 40 tables may flag (a wrong sign
    or a missing correction flags far more)."""
    flagged_tables = 0
    for rep in range(40):
        rng = np.random.default_rng(rep)
        a, b = [], []
        for i in range(3 * N):
            factor = ("gender", "race", "age")[i % 3]
            x = int(rng.integers(1, 6))
            y = int(np.clip(x + rng.choice([-1, 0, 0, 1]), 1, 5))
            a.append(score(i, factor, x))
            b.append(score(i, factor, y))
        rows = paired_rows(a, b, n_bootstrap=200, seed=rep)
        flagged_tables += any(r.flagged for r in rows)
    assert flagged_tables <= 4


def test_mcnemar_p_equals_the_binomial_sum_by_hand() -> None:
    # race: 3 fail->pass and 9 pass->fail among 12 discordant pairs; two-sided exact p =
    # 2 x P(X <= 3), X ~ Binomial(12, 1/2) = 2 x (1 + 12 + 66 + 220) / 4096
    race = cell(paired_rows(*planted()), "race", SHARE)
    assert (race.pass_to_fail, race.fail_to_pass) == (9, 3)
    assert race.p_value == pytest.approx(2 * (1 + 12 + 66 + 220) / 4096, rel=1e-12)
    assert race.diff == pytest.approx(-15.0)  # (3 - 9) / 40 x 100


def test_bootstrap_interval_matches_scipy_paired_bootstrap() -> None:
    a, b = planted()
    race = cell(paired_rows(a, b, n_bootstrap=20_000), "race", SHARE)
    ua = np.array([100.0 if s.score >= 3 else 0.0 for s in a if s.factor == "race"])
    ub = np.array([100.0 if s.score >= 3 else 0.0 for s in b if s.factor == "race"])
    ref = stats.bootstrap(
        (ua, ub),
        lambda x, y: np.mean(y) - np.mean(x),
        paired=True,
        vectorized=False,
        method="percentile",
        n_resamples=20_000,
        random_state=np.random.default_rng(7),
    ).confidence_interval
    # A resampled mean of 40 pairs lies on a grid of 100 / 40 = 2.5 points, so two bootstraps
    # (different draws, different quantile rules) may land one grid step apart, no more: the
    # differences' standard error is 8.3 points (52.7 / sqrt(40)), a wrong resampling (items
    # unpaired, or B - A reversed) moves the bounds by far more than one step.
    assert race.ci_low == pytest.approx(ref.low, abs=2.5 + 1e-9)
    assert race.ci_high == pytest.approx(ref.high, abs=2.5 + 1e-9)
    assert race.ci_low < race.diff < race.ci_high


def test_tost_verdict_at_margins_wider_and_narrower_than_the_shift() -> None:
    """race shifts by -15 points; its 90 % interval is about -15 +- 1.645 x 8.3, i.e. roughly
    [-29, -1]: inside +-40, not inside +-20 nor +-5."""
    a, b = planted()
    wide = cell(paired_rows(a, b, margin=40), "race", SHARE)
    assert wide.equivalent is True and wide.no_worse is True
    for margin in (20, 5):
        narrow = cell(paired_rows(a, b, margin=margin), "race", SHARE)
        assert narrow.equivalent is False and narrow.no_worse is False
    # swapped (B better than A by 15 points): no worse at 5, yet not equivalent
    better = cell(paired_rows(b, a, margin=5), "race", SHARE)
    assert better.no_worse is True and better.equivalent is False


def test_identical_runs_use_the_clopper_pearson_bound() -> None:
    """age is the same in both runs (40 zero differences): unseen pairs could move a share by
    up to 100 x (1 - 0.05 ** (1 / 40)) = 7.22 points, so equivalent at 8 and not at 7."""
    a, b = planted()
    assert 100 * (1 - 0.05 ** (1 / 40)) == pytest.approx(7.22, abs=0.005)
    at8 = cell(paired_rows(a, b, margin=8), "age", SHARE)
    at7 = cell(paired_rows(a, b, margin=7), "age", SHARE)
    assert (at8.equivalent, at8.no_worse) == (True, True)
    assert (at7.equivalent, at7.no_worse) == (False, False)
    assert "Clopper-Pearson" in at8.note


def test_runs_of_different_items_are_refused_with_the_counts() -> None:
    a, b = planted()
    other = [score(s.item_id + 1000, s.factor, s.score) for s in b[:5]]
    with pytest.raises(InvalidInputError) as err:
        check_same_items(a, b[:-2] + other, "model-a", "model-b")
    text = str(err.value)
    assert "paired comparison refused" in text
    assert "120 item x rubric pairs in both, 2 only in model-a, 5 only in model-b" in text
    with pytest.raises(InvalidInputError, match="margin"):
        paired_rows(a, b, margin=0)


def test_section_payload_and_table() -> None:
    section = paired_section(*planted(), ("A", "B"), (1, 2), margin=5)
    assert section.json_key == "paired"
    rows = section.payload["rows"]
    assert len(rows) == len(section.tables[0].rows) == 8  # (all + 3 factors) x (share, mean)
    assert all(r["p_adjust_method"] == "holm" for r in rows)
    assert not any(math.isnan(r["p_adjusted"]) for r in rows if r["p_adjusted"] is not None)
    assert "gender S1 ICS share>=3 (%)" in section.notes[0]
    assert any("McNemar" in line for line in section.tables[0].notes)
