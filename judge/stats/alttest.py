"""The Alternative Annotator Test (alt-test): may the judge stand in for the annotators?

Calderon, Reichart and Dror, "The Alternative Annotator Test for LLM-as-a-Judge", ACL 2025
(arXiv 2501.10970); the procedure below follows the paper and the authors' code (the
``alt_test`` function of github.com/nitaytech/AltTest, ``alt_test_example.ipynb``).

Leave one annotator out at a time. For annotator ``j`` take the items ``j`` rated that at
least one other annotator rated too (and the judge scored). On each such item ``i``, with
``others`` the other annotators' ratings of ``i``:

- ``S_f(i)`` = alignment of the judge's score with ``others``;
- ``S_h(i)`` = alignment of ``j``'s rating with the same ``others``;
- ``W_f(i) = 1`` if ``S_f >= S_h``, ``W_h(i) = 1`` if ``S_h >= S_f``: a tie counts for both.

``rho_f(j) = mean(W_f)`` and ``rho_h(j) = mean(W_h)`` are the advantage probabilities. The
null hypothesis ``rho_f(j) <= rho_h(j) - epsilon`` (the judge is worse than ``j`` by more than
the margin ``epsilon`` that its lower cost buys) is tested one-sided on ``d = W_h - W_f``
against ``mean(d) < epsilon``: a one-sample t-test (``scipy.stats.ttest_1samp(d, epsilon,
alternative="less")``, as the authors' code does) when ``j`` has at least
``T_TEST_MIN_ITEMS`` (30) items, else a Wilcoxon signed-rank test of ``d - epsilon``
(``scipy.stats.wilcoxon(..., alternative="less")``, scipy's default method), which the paper
advises below 30 items, where the t-test's normality does not hold.

The annotators' p-values are corrected with Benjamini-Yekutieli (``scipy.stats.
false_discovery_control(method="by")``, valid under any dependence between the tests, which
share the other annotators' ratings) and compared with ``alpha``. The winning rate ``omega``
is the share of annotators whose null is rejected; the judge passes when ``omega >= 0.5``.
``rho``, the mean of ``rho_f(j)``, compares judges with no ``epsilon`` (higher is better).

Alignment (``alignment``): the paper scores numeric labels (SummEval's 1-5 ratings among
them) with ``"neg_rmse"``, ``-sqrt(mean((x - others)**2))``, and categories with
``"accuracy"``, ``mean(x == others)``; ``"neg_mae"``, ``-mean(|x - others|)``, is offered too.
The default here is ``"neg_rmse"`` because judge scores are numbers (the authors' function
defaults to accuracy, for categorical labels). Two alignments closer than ``TIE`` are a tie,
so that means of the same numbers summed in another order cannot break one.

``epsilon``: the paper's rule of thumb is 0.2 for experts, 0.15 for skilled annotators and
0.1 for crowd workers (``EPSILON``); smaller when the annotators agree little among
themselves. It has no default: a report must say which one was used and why.

Refusals (``AltTestRefused``, a ValueError): fewer than ``MIN_ANNOTATORS`` (3) annotators
(with two, the test only asks which of the two the judge is closer to; the paper asks for at
least three), or an annotator with fewer than ``min_items`` usable items. The authors' code
skips such an annotator; refusing instead keeps the panel, and so ``omega``'s denominator,
what the caller passed.

**Items per annotator.** The authors' rule is 30 items per annotator or more (50-100 in most
cases), so ``MIN_ITEMS`` is 30 and below it there is no verdict. A caller may lower
``min_items`` explicitly (to 2 at the least); the result says which rule applied
(``AltTestResult.rule``), and only then can the Wilcoxon branch run. Even so, few items can
hardly reject: with 3 annotators, 7 items that all favour the judge give an exact one-sided
p of 1/128 = 0.0078, just under BY's smallest threshold 0.05 / (3 * (1 + 1/2 + 1/3)) =
0.0091.

This module imports no project module.

>>> adjusted, rejected = benjamini_yekutieli([0.01, 0.02, 0.03])
>>> [round(a, 6) for a in adjusted], rejected  # BH would give 0.03 each, all rejected
([0.055, 0.055, 0.055], [False, False, False])
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

Array = NDArray[np.float64]
Alignment = Literal["neg_rmse", "neg_mae", "accuracy"]
ALIGNMENTS = ("neg_rmse", "neg_mae", "accuracy")
EPSILON = {"expert": 0.2, "skilled": 0.15, "crowd": 0.1}
"""The paper's cost-benefit margins by kind of annotator."""
MIN_ANNOTATORS = 3
MIN_ITEMS = 30
"""The authors' rule: items each annotator must share with another for a verdict."""
T_TEST_MIN_ITEMS = 30
"""Items from which the t-test is used; the Wilcoxon signed-rank test below."""
TIE = 1e-9


class AltTestRefused(ValueError):
    """The data cannot support the alt-test (too few annotators, or too few items for one)."""


@dataclass(frozen=True)
class AnnotatorComparison:
    """The judge against one left-out annotator."""

    annotator: str
    n_items: int  # items this annotator rated that another annotator rated too
    rho_f: float  # share of those items where the judge aligns with the others at least as well
    rho_h: float  # share where the annotator does (ties count for both)
    statistic: float  # t for the t-test; scipy's W (sum of the positive ranks) for Wilcoxon
    p_value: float  # one-sided, before correction
    p_corrected: float  # Benjamini-Yekutieli adjusted
    rejected: bool  # p_corrected <= alpha: the judge "wins" against this annotator
    test: str  # "t-test" or "wilcoxon"


@dataclass(frozen=True)
class AltTestResult:
    """The alt-test over all annotators."""

    annotators: tuple[AnnotatorComparison, ...]
    omega: float  # winning rate: share of annotators whose null is rejected
    rho: float  # average advantage probability: mean of rho_f
    epsilon: float
    alpha: float
    alignment: str
    passed: bool  # omega >= 0.5
    min_items: int = MIN_ITEMS  # the fewest items per annotator the test was allowed

    @property
    def rule(self) -> str:
        """Which rule on items per annotator applied, in words."""
        return items_rule(self.min_items)


def items_rule(min_items: int) -> str:
    """The rule ``min_items`` stands for: the authors' (30 or more) or one the caller lowered.

    >>> items_rule(30)
    "the authors' rule: 30 items or more per annotator"
    """
    if min_items >= MIN_ITEMS:
        return f"the authors' rule: {min_items} items or more per annotator"
    return (
        f"lowered by the user to {min_items} items per annotator (the authors ask for "
        f"{MIN_ITEMS}): a verdict below {MIN_ITEMS} items is not their procedure's"
    )


def benjamini_yekutieli(
    p_values: Sequence[float], *, alpha: float = 0.05
) -> tuple[list[float], list[bool]]:
    """Benjamini-Yekutieli adjusted p-values (``scipy.stats.false_discovery_control`` with
    ``method="by"``) and which are rejected at false discovery rate ``alpha``.

    Adjusted ``p_(i) = min over k >= i of p_(k) * m * H_m / k`` with ``H_m = 1 + 1/2 + ... +
    1/m``: Benjamini-Hochberg's times ``H_m``, which keeps the rate under any dependence."""
    _check_alpha(alpha)
    p = np.asarray(list(p_values), dtype=float)
    if p.ndim != 1 or p.size == 0:
        raise ValueError("p_values must be a non-empty sequence of numbers")
    if np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError("p_values must lie in [0, 1]")
    adjusted = stats.false_discovery_control(p, method="by")
    return [float(a) for a in adjusted], [bool(a <= alpha) for a in adjusted]


def _check_alpha(alpha: float) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha!r}")


def _epsilon(epsilon: float | str) -> float:
    if isinstance(epsilon, str):
        if epsilon not in EPSILON:
            raise ValueError(
                f"epsilon must be a number or one of {sorted(EPSILON)}, got {epsilon!r}"
            )
        return EPSILON[epsilon]
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real) or not 0 <= epsilon < 1:
        raise ValueError(
            f"epsilon must be in [0, 1) (0.2 experts, 0.15 skilled, 0.1 crowd), got {epsilon!r}"
        )
    return float(epsilon)


def _table(
    ratings: ArrayLike, judge: ArrayLike, annotators: Sequence[object] | None
) -> tuple[Array, Array, list[str]]:
    names = annotators if annotators is not None else getattr(ratings, "columns", None)
    try:
        table = np.asarray(ratings, dtype=float)
        scores = np.asarray(judge, dtype=float)
    except (TypeError, ValueError):
        raise ValueError("ratings and judge must hold numbers (NaN for a missing rating)") from None
    if table.ndim != 2:
        raise ValueError(f"ratings must be items x annotators (2-D), got shape {table.shape}")
    if scores.ndim != 1 or scores.size != table.shape[0]:
        raise ValueError(
            f"judge must hold one score per item (row of ratings): {scores.size} scores for "
            f"{table.shape[0]} items"
        )
    missing = np.flatnonzero(~np.isfinite(scores))
    if missing.size:
        raise ValueError(
            f"judge has no score for {missing.size} item(s) (rows {missing[:5].tolist()}...); "
            "leave those rows out or score them"
        )
    if np.isinf(table).any():
        raise ValueError("ratings contain infinite values (use NaN for a missing rating)")
    labels = (
        [str(a) for a in names] if names is not None else [str(j) for j in range(table.shape[1])]
    )
    if len(labels) != table.shape[1]:
        raise ValueError(f"annotators must name every column ({len(labels)} != {table.shape[1]})")
    if len(set(labels)) != len(labels):
        raise ValueError("annotators must have distinct names")
    return table, scores, labels


def _alignment(values: Array, others: Array, rated: NDArray[np.bool_], how: str) -> Array:
    """Per item, alignment of ``values`` (n,) with the rated entries of ``others`` (n, k)."""
    count = rated.sum(axis=1)
    if how == "accuracy":
        hits = np.where(rated, others == values[:, None], False).sum(axis=1)
        return np.asarray(hits / count)
    diff = np.where(rated, others - values[:, None], 0.0)
    if how == "neg_rmse":
        return np.asarray(-np.sqrt((diff**2).sum(axis=1) / count))
    return np.asarray(-np.abs(diff).sum(axis=1) / count)


def _one_sided(d: Array, epsilon: float) -> tuple[float, float, str]:
    """(statistic, p, test) for H1: mean(d) < epsilon."""
    test = "t-test" if d.size >= T_TEST_MIN_ITEMS else "wilcoxon"
    if np.all(d == d[0]):
        # No spread: scipy's limit (an infinite t) without its precision warning. Every item
        # gives the same d, so p is 0 when that d is below epsilon and 1 otherwise.
        gap = float(d[0] - epsilon)
        if gap == 0:
            return math.nan, 1.0, test
        if test == "t-test":
            return (-math.inf if gap < 0 else math.inf), (0.0 if gap < 0 else 1.0), test
    if test == "t-test":
        t = stats.ttest_1samp(d, epsilon, alternative="less")
        return float(t.statistic), float(t.pvalue), test
    w = stats.wilcoxon(d - epsilon, alternative="less")
    return float(w.statistic), float(w.pvalue), test


def _leave_one_out(
    table: Array,
    rated: NDArray[np.bool_],
    scores: Array,
    j: int,
    items: NDArray[np.bool_],
    epsilon: float,
    alignment: str,
) -> tuple[int, float, float, float, float, str]:
    """(n items, rho_f, rho_h, statistic, p, test) for annotator ``j`` on ``items``."""
    keep = np.arange(table.shape[1]) != j
    others, others_rated = table[items][:, keep], rated[items][:, keep]
    s_f = _alignment(scores[items], others, others_rated, alignment)
    s_h = _alignment(table[items, j], others, others_rated, alignment)
    w_f = s_f >= s_h - TIE
    w_h = s_h >= s_f - TIE
    d = w_h.astype(float) - w_f.astype(float)
    statistic, p, test = _one_sided(d, epsilon)
    return int(items.sum()), float(w_f.mean()), float(w_h.mean()), statistic, p, test


def alt_test(
    ratings: ArrayLike,
    judge: ArrayLike,
    *,
    epsilon: float | str,
    annotators: Sequence[object] | None = None,
    alpha: float = 0.05,
    alignment: Alignment = "neg_rmse",
    min_items: int = MIN_ITEMS,
) -> AltTestResult:
    """Run the alt-test (see the module docstring).

    ``ratings``: items x annotators, NaN where an annotator did not rate an item (a pandas
    DataFrame's columns name the annotators unless ``annotators`` does); ``judge``: the
    judge's score of every item (no NaN). ``epsilon``: a number or "expert", "skilled",
    "crowd". Raises ``AltTestRefused`` for too few annotators or items.
    """
    eps = _epsilon(epsilon)
    _check_alpha(alpha)
    if alignment not in ALIGNMENTS:
        raise ValueError(f"alignment must be one of {ALIGNMENTS}, got {alignment!r}")
    if isinstance(min_items, bool) or not isinstance(min_items, numbers.Integral) or min_items < 2:
        raise ValueError(f"min_items must be an integer >= 2, got {min_items!r}")
    table, scores, labels = _table(ratings, judge, annotators)
    rated = ~np.isnan(table)
    if table.shape[1] < MIN_ANNOTATORS:
        raise AltTestRefused(
            f"the alt-test needs at least {MIN_ANNOTATORS} annotators, got {table.shape[1]}: "
            "with fewer it compares the judge with single people, not with a group"
        )

    # Usable items per annotator: rated by them and by at least one other annotator.
    usable = [rated[:, j] & np.delete(rated, j, axis=1).any(axis=1) for j in range(len(labels))]
    short = [(n, int(u.sum())) for n, u in zip(labels, usable, strict=True) if u.sum() < min_items]
    if short:
        named = ", ".join(f"{n!r} ({k})" for n, k in short)
        raise AltTestRefused(
            f"annotator(s) {named} have fewer than {min_items} items also rated by another "
            f"annotator ({items_rule(min_items)}): collect more ratings, leave those "
            f"annotators out, or lower --min-items (min_items) explicitly"
        )

    rows = [
        _leave_one_out(table, rated, scores, j, items, eps, alignment)
        for j, items in enumerate(usable)
    ]
    corrected, rejected = benjamini_yekutieli([row[4] for row in rows], alpha=alpha)
    comparisons = tuple(
        AnnotatorComparison(name, n, rho_f, rho_h, statistic, p, adj, rej, test)
        for name, (n, rho_f, rho_h, statistic, p, test), adj, rej in zip(
            labels, rows, corrected, rejected, strict=True
        )
    )
    omega = sum(rejected) / len(comparisons)
    rho = float(np.mean([c.rho_f for c in comparisons]))
    return AltTestResult(
        comparisons, omega, rho, eps, float(alpha), alignment, omega >= 0.5, int(min_items)
    )
