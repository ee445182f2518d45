"""The majority-class baseline and the flags: a planted flattering judge is flagged, a good
judge is not, and the intervals behave."""

from __future__ import annotations

import numpy as np
import pytest

from judge.stats.baseline import KAPPA_COVERS_ZERO, NO_BETTER_THAN_MAJORITY
from judge.stats.coefficient import BootstrapOptions
from judge.stats.pairs import judge_vs_human

OPTIONS = BootstrapOptions(n_bootstrap=1000, seed=0)


def codes(result: object) -> list[str]:
    return [f.code for f in result.flags]  # type: ignore[attr-defined]


def test_constant_judge_on_a_90_percent_pass_rubric_is_flagged() -> None:
    # Planted: the judge says pass on all 100 items, the humans pass 90. By hand: raw
    # agreement 90/100; kappa = (0.90 - 0.90) / (1 - 0.90) = 0 (expected agreement = the
    # judge's margin 1.0 times the humans' 0.90); the baseline (always pass) is that 0.90.
    result = judge_vs_human(
        [1] * 100, [1] * 90 + [0] * 10, labels=(0, 1), options=OPTIONS, warn=False
    )
    c = result.coefficients
    assert c["exact_agreement"].value == pytest.approx(0.90, abs=1e-12)
    assert c["kappa"].value == pytest.approx(0.0, abs=1e-12)
    assert c["majority_baseline"].value == pytest.approx(0.90, abs=1e-12)
    # The baseline's AC1 is the constant judge's own (hand: 161/181, see test_gwet.py).
    assert c["majority_baseline_ac1"].value == pytest.approx(161 / 181, abs=1e-9)
    assert result.majority_category == 1
    assert codes(result) == [KAPPA_COVERS_ZERO, NO_BETTER_THAN_MAJORITY]
    assert "although raw agreement is 0.90" in result.flags[0].message
    assert "always answering 1" in result.flags[1].message
    out = result.to_dict()
    assert [f["code"] for f in out["flags"]] == codes(result)
    assert out["majority_category"] == 1 and out["ac1"]["value"] == pytest.approx(161 / 181)


def test_good_judge_is_not_flagged() -> None:
    # A judge that copies the humans on 98 % of 400 skewed items (90 % pass): by
    # construction exact agreement ~0.98, far above the 0.90 baseline, and kappa near 0.9.
    rng = np.random.default_rng(7)
    human = (rng.random(400) < 0.9).astype(float)
    judge = np.where(rng.random(400) < 0.98, human, 1 - human)
    result = judge_vs_human(judge, human, labels=(0, 1), options=OPTIONS)
    c = result.coefficients
    assert c["exact_agreement"].ci_low > c["majority_baseline"].value
    assert c["kappa"].ci_low > 0
    assert result.flags == []


def test_judge_better_than_baseline_but_on_too_few_items_is_flagged() -> None:
    # 19 of 20 right against a 0.90 baseline (18 of 20 pass): 0.95 is above it, but the
    # interval of 20 items reaches below 0.90 (an exact binomial 95 % interval for 19/20
    # starts at 0.75; the bootstrap's 2.5 % point of Binomial(20, 0.95) / 20 is 0.85), so the
    # data cannot tell the judge from "always pass".
    human = [1] * 18 + [0] * 2
    judge = [1] * 18 + [0, 1]
    result = judge_vs_human(judge, human, labels=(0, 1), options=OPTIONS, warn=False)
    assert result.coefficients["exact_agreement"].value == pytest.approx(0.95)
    assert NO_BETTER_THAN_MAJORITY in codes(result)


def test_without_intervals_the_point_values_decide() -> None:
    # No bootstrap: kappa 0 (not above 0) and exact agreement equal to the baseline.
    none = BootstrapOptions(n_bootstrap=0)
    flat = judge_vs_human([1] * 10, [1] * 9 + [0], labels=(0, 1), options=none, warn=False)
    assert codes(flat) == [KAPPA_COVERS_ZERO, NO_BETTER_THAN_MAJORITY]
    assert flat.flags[0].message.startswith("kappa is not above 0")
    good = judge_vs_human([1] * 9 + [0], [1] * 9 + [0], labels=(0, 1), options=none)
    assert good.flags == []


def test_majority_on_a_five_point_scale_and_ties() -> None:
    # Humans: 4 fours, 4 twos, 2 fives. Tie between 2 and 4: the lowest (2) is named; the
    # baseline share is 4/10 either way.
    human = [4, 4, 4, 4, 2, 2, 2, 2, 5, 5]
    result = judge_vs_human(human, human, options=BootstrapOptions(n_bootstrap=0))
    assert result.majority_category == 2
    assert result.coefficients["majority_baseline"].value == pytest.approx(0.4)
    # A perfect judge: exact 1.0 above 0.4, kappa 1.
    assert result.flags == []


def test_bootstrap_intervals_are_sane() -> None:
    # Each interval contains its point value and lies within the coefficient's range; the
    # baseline's interval against the binomial standard error by hand: sqrt(.9 * .1 / 400)
    # = 0.015, so a 95 % interval is about 0.9 +- 0.03 (half-width within 20 % of that).
    rng = np.random.default_rng(3)
    human = (rng.random(400) < 0.9).astype(float)
    judge = np.where(rng.random(400) < 0.9, human, 1 - human)
    c = judge_vs_human(judge, human, labels=(0, 1), options=OPTIONS).coefficients
    for name in ("ac1", "ac2_quadratic", "majority_baseline", "majority_baseline_ac1"):
        assert -1 <= c[name].ci_low <= c[name].value <= c[name].ci_high <= 1, name
    share = c["majority_baseline"].value
    half = 1.96 * np.sqrt(share * (1 - share) / 400)
    assert c["majority_baseline"].half_width == pytest.approx(half, rel=0.2)
    # Same seed, same interval; another seed, a different one.
    again = judge_vs_human(judge, human, labels=(0, 1), options=OPTIONS).coefficients["ac1"]
    other = judge_vs_human(
        judge, human, labels=(0, 1), options=BootstrapOptions(1000, seed=1)
    ).coefficients["ac1"]
    assert (again.ci_low, again.ci_high) == (c["ac1"].ci_low, c["ac1"].ci_high)
    assert (other.ci_low, other.ci_high) != (c["ac1"].ci_low, c["ac1"].ci_high)


def test_no_items_gives_no_flags_and_undefined_baseline() -> None:
    result = judge_vs_human([], [], options=BootstrapOptions(n_bootstrap=0), warn=False)
    assert result.flags == [] and result.majority_category is None
    assert result.coefficients["majority_baseline"].undefined_reason == "no items"
    assert result.coefficients["ac1"].undefined_reason == "no items"
