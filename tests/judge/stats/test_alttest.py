"""The Alternative Annotator Test (judge/stats/alttest.py).

Expected values: a small example worked by hand (in the comments), scipy's tests called
directly on the hand-derived differences, a second implementation written here as plain
loops over items (the procedure as the paper states it), and SummEval's three experts with
judges planted to pass and to fail.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from judge.stats.alttest import EPSILON, AltTestRefused, alt_test, benjamini_yekutieli
from tests.support.summeval_coherence import SUMMEVAL, require_summeval

NAN = math.nan

# Five items, annotators A, B, C (C skipped item 3), and the judge J.
#            A    B    C    J
HAND = [
    (3.0, 3.0, 4.0, 3.0),
    (1.0, 2.0, 2.0, 2.0),
    (5.0, 4.0, NAN, 3.0),
    (2.0, 4.0, 3.0, 3.0),
    (4.0, 4.0, 4.0, 2.0),
]
# Worked by hand with neg_rmse, -sqrt(mean((x - others)**2)); W_f = [S_f >= S_h],
# W_h = [S_h >= S_f] (a tie counts for both), d = W_h - W_f.
#
# A (others B, C):
#   1: others {3, 4}: J=3 -> -sqrt(0.5), A=3 -> -sqrt(0.5)  tie        d = 0
#   2: others {2, 2}: J=2 -> 0,          A=1 -> -1          judge      d = -1
#   3: others {4}:    J=3 -> -1,         A=5 -> -1          tie        d = 0  (different values)
#   4: others {4, 3}: J=3 -> -sqrt(0.5), A=2 -> -sqrt(2.5) judge      d = -1
#   5: others {4, 4}: J=2 -> -2,         A=4 -> 0           annotator  d = +1
#   rho_f = 4/5 = 0.8, rho_h = 3/5 = 0.6
# B (others A, C):
#   1: {3, 4}: J=3 -> -sqrt(0.5), B=3 -> same   tie        d = 0
#   2: {1, 2}: J=2 -> -sqrt(0.5), B=2 -> same   tie        d = 0
#   3: {5}:    J=3 -> -2,         B=4 -> -1     annotator  d = +1
#   4: {2, 3}: J=3 -> -sqrt(0.5), B=4 -> -sqrt(2.5)  judge d = -1
#   5: {4, 4}: J=2 -> -2,         B=4 -> 0      annotator  d = +1
#   rho_f = 3/5 = 0.6, rho_h = 4/5 = 0.8
# C (others A, B; item 3 not rated by C, so 4 items):
#   1: {3, 3}: J=3 -> 0,          C=4 -> -1     judge      d = -1
#   2: {1, 2}: J=2 -> -sqrt(0.5), C=2 -> same   tie        d = 0
#   4: {2, 4}: J=3 -> -1,         C=3 -> same   tie        d = 0
#   5: {4, 4}: J=2 -> -2,         C=4 -> 0      annotator  d = +1
#   rho_f = 3/4, rho_h = 3/4
# rho = (0.8 + 0.6 + 0.75) / 3 = 0.71667. Under 30 items each: the Wilcoxon branch.
HAND_D = {"A": [0, -1, 0, -1, 1], "B": [0, 0, 1, -1, 1], "C": [-1, 0, 0, 1]}
HAND_RHO = {"A": (0.8, 0.6), "B": (0.6, 0.8), "C": (0.75, 0.75)}


def hand_table() -> tuple[np.ndarray, np.ndarray]:
    table = np.array(HAND)
    return table[:, :3], table[:, 3]


def test_hand_worked_example_takes_the_wilcoxon_branch() -> None:
    ratings, judge = hand_table()
    result = alt_test(ratings, judge, epsilon="expert", annotators="ABC", min_items=3)
    assert [r.annotator for r in result.annotators] == ["A", "B", "C"]
    p_values = []
    for row in result.annotators:
        d = np.array(HAND_D[row.annotator], dtype=float)
        expected = stats.wilcoxon(d - 0.2, alternative="less")  # scipy, called directly
        assert row.test == "wilcoxon"
        assert row.n_items == d.size
        assert (row.rho_f, row.rho_h) == pytest.approx(HAND_RHO[row.annotator])
        assert row.statistic == pytest.approx(float(expected.statistic), abs=1e-12)
        assert row.p_value == pytest.approx(float(expected.pvalue), abs=1e-12)
        p_values.append(float(expected.pvalue))
    corrected = stats.false_discovery_control(p_values, method="by")
    assert [r.p_corrected for r in result.annotators] == pytest.approx(corrected.tolist())
    assert result.rho == pytest.approx(2.15 / 3)
    assert result.epsilon == EPSILON["expert"] == 0.2
    assert result.omega == 0.0 and not result.passed  # five items prove nothing


def test_the_alignment_choice_decides_ties() -> None:
    # Item 1: others of A are {B=1, C=5}; the judge says 3, A says 1.
    #   neg_mae:  judge |3-1|+|3-5| = 4 -> -2;  A 0 + 4 -> -2: a tie.
    #   neg_rmse: judge sqrt((4 + 4) / 2) = 2;  A sqrt((0 + 16) / 2) = 2.83: the judge wins.
    #   accuracy: judge matches neither (0);    A matches B (0.5): A wins.
    # Item 2: everyone says 2: a tie under every alignment.
    ratings = np.array([[1.0, 1.0, 5.0], [2.0, 2.0, 2.0]])
    judge = np.array([3.0, 2.0])
    expected = {"neg_mae": (1.0, 1.0), "neg_rmse": (1.0, 0.5), "accuracy": (0.5, 1.0)}
    for alignment, rhos in expected.items():
        result = alt_test(ratings, judge, epsilon=0.1, alignment=alignment, min_items=2)  # type: ignore[arg-type]
        first = result.annotators[0]
        assert (first.rho_f, first.rho_h) == rhos, alignment


# 40 items x 3 annotators and a judge, all rated (seeded draws of a latent quality, noise,
# rounding to 1-5), one digit per item.
LARGE = (
    "3423244423331253552514432233135553244435",
    "3233323423412252552332243135234432233543",
    "3341242513432153542423333242234442143424",
)
LARGE_JUDGE = "4332344524431144542423343132143452334434"


def large_table() -> tuple[np.ndarray, np.ndarray]:
    ratings = np.array([[float(c) for c in column] for column in LARGE]).T
    return ratings, np.array([float(c) for c in LARGE_JUDGE])


def loop_differences(ratings: np.ndarray, judge: np.ndarray, j: int) -> list[float]:
    """d = W_h - W_f for annotator j, one item at a time, as the paper states the procedure."""
    out = []
    for i in range(ratings.shape[0]):
        if math.isnan(ratings[i, j]):
            continue
        others = [ratings[i, k] for k in range(ratings.shape[1]) if k != j]
        others = [o for o in others if not math.isnan(o)]
        if not others:
            continue
        s_f = -math.sqrt(sum((judge[i] - o) ** 2 for o in others) / len(others))
        s_h = -math.sqrt(sum((ratings[i, j] - o) ** 2 for o in others) / len(others))
        out.append(float(s_h >= s_f) - float(s_f >= s_h))
    return out


def test_t_test_branch_and_benjamini_yekutieli_not_hochberg() -> None:
    ratings, judge = large_table()
    result = alt_test(ratings, judge, epsilon="crowd")
    p_values = []
    for j, row in enumerate(result.annotators):
        d = loop_differences(ratings, judge, j)
        expected = stats.ttest_1samp(d, 0.1, alternative="less")  # the authors' call
        assert row.test == "t-test" and row.n_items == 40
        assert row.statistic == pytest.approx(float(expected.statistic), abs=1e-12)
        assert row.p_value == pytest.approx(float(expected.pvalue), abs=1e-12)
        assert row.rho_f == pytest.approx(np.mean([x <= 0 for x in d]))
        p_values.append(float(expected.pvalue))
    # The raw p-values are about 0.022, 0.015 and 0.21. Benjamini-Hochberg would reject two
    # (adjusted 0.034, 0.034, 0.21) and pass the judge with omega = 2/3; Benjamini-Yekutieli
    # multiplies by 1 + 1/2 + 1/3 (adjusted 0.062, 0.062, 0.38) and rejects none.
    bh = stats.false_discovery_control(p_values, method="bh")
    by = stats.false_discovery_control(p_values, method="by")
    assert int((bh <= 0.05).sum()) == 2
    assert [r.p_corrected for r in result.annotators] == pytest.approx(by.tolist())
    assert not any(r.rejected for r in result.annotators)
    assert result.omega == 0.0 and not result.passed


def test_benjamini_yekutieli_by_hand() -> None:
    # m = 3, H_3 = 11/6, m * H_3 = 5.5: sorted p 0.001, 0.02, 0.04 times 5.5/1, 5.5/2, 5.5/3
    # -> 0.0055, 0.055, 0.0733, made non-decreasing from the top; only the first <= 0.05.
    adjusted, rejected = benjamini_yekutieli([0.04, 0.001, 0.02])
    assert adjusted == pytest.approx([0.22 / 3, 0.0055, 0.055])
    assert rejected == [False, True, False]


def test_a_judge_that_always_matches_the_others_wins_without_scipy_warnings() -> None:
    # 30 items: the annotators rate (3, 3, 1), (3, 1, 3), (1, 3, 3) in turn and the judge
    # always 3. The left-out annotator's 1 loses to the judge's 3 on every item where the
    # others say 3 twice; where the left-out one says 3, the others are {3, 1} and the judge's
    # 3 ties with it. So d is -1 or 0, never +1, and no warning may escape (they fail tests).
    pattern = [(3.0, 3.0, 1.0), (3.0, 1.0, 3.0), (1.0, 3.0, 3.0)] * 10
    result = alt_test(np.array(pattern), np.full(30, 3.0), epsilon=0.2)
    assert all(r.rho_f == 1.0 for r in result.annotators)
    assert result.passed and result.omega == 1.0
    # Every item a tie (the judge copies annotator 0, the others equal it): d is constant 0
    # < epsilon, the t statistic is -inf and p is 0, scipy's limit, without its warning.
    same = np.full((30, 3), 4.0)
    tied = alt_test(same, np.full(30, 4.0), epsilon=0.2)
    assert all(r.statistic == -math.inf and r.p_value == 0.0 for r in tied.annotators)
    # With epsilon 0 the same data give no evidence: p = 1.
    assert all(r.p_value == 1.0 for r in alt_test(same, np.full(30, 4.0), epsilon=0).annotators)


def test_dataframe_columns_name_the_annotators() -> None:
    ratings, judge = large_table()
    frame = pd.DataFrame(ratings, columns=["ann", "bo", "cy"])
    result = alt_test(frame, judge, epsilon=0.1)
    assert [r.annotator for r in result.annotators] == ["ann", "bo", "cy"]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda: alt_test(np.ones((40, 2)), np.ones(40), epsilon=0.2),
            AltTestRefused,
            "at least 3 annotators",
        ),
        (
            lambda: alt_test(*hand_table(), epsilon=0.2, annotators="ABC"),
            AltTestRefused,
            r"'A' \(5\), 'B' \(5\), 'C' \(4\) have fewer than 30",
        ),
        (
            lambda: alt_test(np.ones((40, 3)), np.r_[np.ones(39), NAN], epsilon=0.2),
            ValueError,
            "judge has no score for 1 item",
        ),
        (
            lambda: alt_test(np.ones((40, 3)), np.ones(39), epsilon=0.2),
            ValueError,
            "one score per item",
        ),
        (
            lambda: alt_test(np.ones((40, 3)), np.ones(40), epsilon="guru"),
            ValueError,
            "epsilon must be a number or one of",
        ),
        (
            lambda: alt_test(np.ones((40, 3)), np.ones(40), epsilon=1.5),
            ValueError,
            "epsilon must be in",
        ),
        (
            lambda: alt_test(np.ones((40, 3)), np.ones(40), epsilon=0.2, alignment="kappa"),  # type: ignore[arg-type]
            ValueError,
            "alignment must be one of",
        ),
        (
            lambda: alt_test(np.ones((40, 3)), np.ones(40), epsilon=0.2, annotators="AAB"),
            ValueError,
            "distinct names",
        ),
        (
            lambda: alt_test(np.ones(40), np.ones(40), epsilon=0.2),
            ValueError,
            "items x annotators",
        ),
        (
            lambda: alt_test(np.ones((40, 3)), np.ones(40), epsilon=0.2, alpha=0),
            ValueError,
            "alpha must be between",
        ),
    ],
)
def test_refusals(call: Callable[[], object], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        call()
    assert issubclass(AltTestRefused, ValueError)


# ---------------------------------------------------------------- SummEval's experts


def summeval_experts() -> np.ndarray:
    """Coherence ratings of SummEval's 1,200 summaries (12 systems x 100) by its 3 experts,
    read from ../shared/data/summeval (by path, never copied)."""
    require_summeval()  # fails under CI=true when the data is missing
    rows = []
    for path in sorted(SUMMEVAL.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            rows.append([float(a["coherence"]) for a in record["expert_annotations"]])
    return np.array(rows)


def planted(experts: np.ndarray, shift: float, seed: int) -> np.ndarray:
    """A judge on the 1-5 scale: the experts' mean plus N(0, 0.5**2) noise plus ``shift``,
    rounded half up and kept on 1-5. It is built from all three experts, so it carries part
    of the left-out expert's own rating: a check of the procedure, not of any real judge."""
    noise = np.random.default_rng(seed).normal(0, 0.5, experts.shape[0])
    return np.clip(np.floor(experts.mean(axis=1) + noise + shift + 0.5), 1, 5)


def test_summeval_a_close_judge_passes_and_a_biased_one_fails() -> None:
    experts = summeval_experts()
    assert experts.shape == (1200, 3)
    good = alt_test(experts, planted(experts, 0.0, seed=0), epsilon="expert")
    biased = alt_test(experts, planted(experts, 1.5, seed=0), epsilon="expert")
    print(f"\nSummEval coherence, 3 experts, epsilon 0.2, neg_rmse: close judge omega="
          f"{good.omega:.3f} rho={good.rho:.3f}; judge +1.5 omega={biased.omega:.3f} "
          f"rho={biased.rho:.3f}")  # fmt: skip
    assert good.passed and good.omega == 1.0
    assert not biased.passed and biased.omega < 0.5
    assert good.rho > biased.rho + 0.2
    assert all(r.test == "t-test" for r in good.annotators)


def test_the_authors_rule_needs_30_items_unless_lowered() -> None:
    # The authors ask for 30 items per annotator or more (SPEC, "Alternative Annotator
    # Test"; the paper's guidelines): 29 get no verdict by default, the refusal says how to
    # lower it; lowered explicitly, the verdict says which rule applied. 30 pass as they are.
    rng = np.random.default_rng(0)
    ratings = rng.integers(1, 6, (30, 3)).astype(float)
    judge = ratings.mean(axis=1)
    with pytest.raises(AltTestRefused, match="the authors' rule: 30 items or more"):
        alt_test(ratings[:29], judge[:29], epsilon=0.2)
    lowered = alt_test(ratings[:29], judge[:29], epsilon=0.2, min_items=29)
    assert lowered.rule.startswith("lowered by the user to 29 items per annotator")
    assert {c.test for c in lowered.annotators} == {"wilcoxon"}
    full = alt_test(ratings, judge, epsilon=0.2)
    assert full.rule == "the authors' rule: 30 items or more per annotator"
    assert {c.test for c in full.annotators} == {"t-test"}
