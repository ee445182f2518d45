"""Agreement between paired per-item scores (a judge and the humans), with honest uncertainty.

scikit-learn style: options are keyword-only, inputs are checked early with messages that name
the argument, and an undefined coefficient (constant ratings, fewer than 3 items) is NaN with
its ``undefined_reason`` and one ``UndefinedWarning`` rather than an error. Point estimates and
p-values come from scipy (Pearson, Spearman, Kendall tau-b) and scikit-learn (Cohen's kappa,
confusion matrix), Gwet's AC1/AC2 from ``judge.stats.gwet``; confidence intervals come from an
item bootstrap (``judge.stats.bootstrap``).

Agreement that cannot flatter: beside the symmetric coefficients, ``majority_baseline`` (the
exact agreement of always answering the humans' most frequent category) and
``majority_baseline_ac1`` (that constant answer's AC1; its kappa is 0 by construction), and
``flags`` (``judge.stats.baseline``) when kappa cannot be told from 0 or the judge from the
majority class.

Categories: kappa, exact and within-one agreement need scores on the categories of the scale,
``labels`` (increasing whole numbers; 1-5 unless given, e.g. ``labels=(0, 1)`` or
``range(1, 11)``). A mean of several ratings (or of several judge samples) is put on the
nearest level, halves up: 2.5 -> 3, 2.33 -> 2, 3.67 -> 4. Kappa's weights and within-one count
distance in levels (positions in ``labels``), as scikit-learn's weights do.

>>> r = judge_vs_human([1, 2, 3, 4, 5], [2, 1, 4, 3, 5], options=BootstrapOptions(n_bootstrap=0))
>>> round(r.coefficients["spearman"].value, 3), round(r.coefficients["kendall"].value, 3)
(0.8, 0.6)
>>> constant = judge_vs_human([2] * 10, [2] * 9 + [1], labels=(1, 2), warn=False)
>>> [f.code for f in constant.flags], constant.majority_category
(['kappa_covers_zero', 'no_better_than_majority'], 2)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from judge.stats.baseline import BASELINES, Flag, agreement_flags, majority_ac1, majority_share
from judge.stats.bootstrap import Array, bootstrap_pairs
from judge.stats.coefficient import (
    DEFAULT_OPTIONS,
    BootstrapOptions,
    Coefficient,
    as_vector,
    check_options,
    warn_undefined,
)
from judge.stats.gwet import gwet_ac

LABELS = (1, 2, 3, 4, 5)
PAIR_COEFFICIENTS = (
    "pearson",
    "spearman",
    "kendall",
    "kappa",
    "kappa_linear",
    "kappa_quadratic",
    "exact_agreement",
    "within_one",
    "mean_difference",
    "ac1",
    "ac2_linear",
    "ac2_quadratic",
)
GWET: dict[str, str | None] = {"ac1": None, "ac2_linear": "linear", "ac2_quadratic": "quadratic"}
CORRELATIONS = {"pearson": stats.pearsonr, "spearman": stats.spearmanr, "kendall": stats.kendalltau}
KAPPAS: dict[str, str | None] = {
    "kappa": None,
    "kappa_linear": "linear",
    "kappa_quadratic": "quadratic",
}


@dataclass(frozen=True)
class ConfusionMatrix:
    """Counts of (judge category, human category): rows judge, columns human, over ``labels``."""

    labels: list[int]
    counts: list[list[int]]  # empty when there are no items

    def to_dict(self) -> dict[str, Any]:
        return {
            "labels": list(self.labels),
            "rows": "judge",
            "columns": "human",
            "counts": self.counts,
        }


@dataclass(frozen=True)
class PairAgreement:
    """Every coefficient of ``PAIR_COEFFICIENTS`` then ``BASELINES`` (in that order), the
    confusion matrix, the humans' most frequent category (None without items) and the
    flags that say when the agreement flatters the judge."""

    coefficients: dict[str, Coefficient]
    confusion: ConfusionMatrix
    flags: list[Flag] = field(default_factory=list)
    majority_category: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: c.to_dict() for k, c in self.coefficients.items()}
        out["confusion_matrix"] = self.confusion.to_dict()
        out["majority_category"] = self.majority_category
        out["flags"] = [f.to_dict() for f in self.flags]
        return out


def check_labels(labels: Sequence[int]) -> tuple[int, ...]:
    """``labels`` as a tuple of at least two increasing whole numbers, or ValueError.

    >>> check_labels(range(0, 4))
    (0, 1, 2, 3)
    """
    try:
        found = tuple(labels)
    except TypeError:
        raise ValueError(f"labels must be a sequence of whole numbers, got {labels!r}") from None
    if not all(
        isinstance(v, numbers.Real) and not isinstance(v, bool) and float(v).is_integer()
        for v in found
    ):
        raise ValueError(f"labels must be whole numbers, got {found!r}")
    out = tuple(int(v) for v in found)
    if len(out) < 2 or any(b <= a for a, b in zip(out, out[1:], strict=False)):
        raise ValueError(f"labels must be at least two increasing whole numbers, got {out!r}")
    return out


def to_categories(scores: ArrayLike, *, labels: Sequence[int] = LABELS) -> NDArray[np.float64]:
    """Put scores on the nearest of the ``labels``, halves up (2.5 -> 3); scores must lie
    within the scale (``labels[0]..labels[-1]``).

    >>> to_categories([2.5, 2.333, 3.667, 1]).tolist()
    [3.0, 2.0, 4.0, 1.0]
    >>> to_categories([0.5, 0.49], labels=(0, 1)).tolist()
    [1.0, 0.0]
    """
    levels = np.asarray(check_labels(labels), dtype=float)
    values = np.asarray(scores, dtype=float)
    if values.size and not (
        np.all(np.isfinite(values)) and values.min() >= levels[0] and values.max() <= levels[-1]
    ):
        raise ValueError(f"scores must lie within {levels[0]:g}..{levels[-1]:g}")
    above = np.clip(np.searchsorted(levels, values, side="right"), 1, levels.size - 1)
    lower, upper = levels[above - 1], levels[above]
    # 2v >= lower + upper: v at or past the midpoint goes up; exact for halves (2.5 -> 3).
    return np.asarray(np.where(2 * values >= lower + upper, upper, lower), dtype=np.float64)


def as_scores(values: ArrayLike, name: str, labels: Sequence[int] = LABELS) -> Array:
    """``values`` as a 1-D float array within the scale of ``labels``, or ValueError naming
    ``name``."""
    levels = check_labels(labels)
    low, high = levels[0], levels[-1]
    array = as_vector(values, name)
    if array.size and (array.min() < low or array.max() > high):
        raise ValueError(
            f"{name} has values outside the {low}..{high} scale "
            f"(min {array.min():g}, max {array.max():g})"
        )
    return array


def _constant(x: Array, y: Array, sides: tuple[str, str]) -> str | None:
    said = [
        f"{side} gave every item {v[0]:g}"
        for side, v in zip(sides, (x, y), strict=True)
        if v.size and np.ptp(v) == 0
    ]
    return "constant ratings: " + " and ".join(said) if said else None


def _correlation_reason(x: Array, y: Array, sides: tuple[str, str]) -> str | None:
    if x.size == 0:
        return "no items"
    if x.size < 3:
        return f"fewer than 3 items (n={x.size})"
    return _constant(x, y, sides)


def _kappa_reason(cx: Array, cy: Array, sides: tuple[str, str]) -> str | None:
    """Cohen's kappa is 0/0 exactly when both sides put every item in one and the same
    category (no disagreement is expected by chance); scikit-learn would warn, so say why."""
    if cx.size == 0:
        return "no items"
    if np.ptp(cx) == 0 and np.ptp(cy) == 0 and cx[0] == cy[0]:
        return f"constant ratings: {sides[0]} and {sides[1]} put every item in category {cx[0]:g}"
    return None


def _point_estimates(
    x: Array, y: Array, cx: Array, cy: Array, labels: NDArray[np.int64], sides: tuple[str, str]
) -> dict[str, tuple[float, float | None, str | None]]:
    """(value, p-value, undefined reason) per coefficient; library calls only on defined data."""
    out: dict[str, tuple[float, float | None, str | None]] = {}
    reason = _correlation_reason(x, y, sides)
    for name, fn in CORRELATIONS.items():
        if reason:
            out[name] = (math.nan, math.nan, reason)
        else:
            result = fn(x, y)
            out[name] = (float(result.statistic), float(result.pvalue), None)
    reason = _kappa_reason(cx, cy, sides)
    # Positions on the scale (0..q-1), which scikit-learn counts without mapping each item
    # to its label in Python: the same kappas (its weights count positions), far faster.
    ix, iy = np.searchsorted(labels, cx), np.searchsorted(labels, cy)
    positions = np.arange(labels.size)
    for name, weights in KAPPAS.items():
        if reason:
            out[name] = (math.nan, None, reason)
        else:
            value = cohen_kappa_score(ix, iy, labels=positions, weights=weights)
            out[name] = (float(value), None, None)
    if x.size == 0:
        for name in ("exact_agreement", "within_one", "mean_difference", *GWET, *BASELINES):
            out[name] = (math.nan, None, "no items")
        return out
    out["exact_agreement"] = (float(np.mean(cx == cy)), None, None)
    out["within_one"] = (float(np.mean(np.abs(ix - iy) <= 1)), None, None)
    out["mean_difference"] = (float(np.mean(x - y)), None, None)
    for name, weights in GWET.items():
        out[name] = (gwet_ac(ix, iy, labels.size, weights=weights), None, None)
    humans = np.bincount(iy, minlength=labels.size).astype(np.float64)[None]
    out["majority_baseline"] = (float(majority_share(humans)[0]), None, None)
    out["majority_baseline_ac1"] = (float(majority_ac1(humans)[0]), None, None)
    return out


def majority_label(cy: Array, labels: NDArray[np.int64]) -> int | None:
    """The humans' most frequent category (the lowest on a tie); None without items."""
    if cy.size == 0:
        return None
    counts = np.bincount(np.searchsorted(labels, cy), minlength=labels.size)
    return int(labels[int(np.argmax(counts))])


def pair_agreement(
    x: ArrayLike,
    y: ArrayLike,
    *,
    options: BootstrapOptions,
    labels: Sequence[int] = LABELS,
    sides: tuple[str, str] = ("the judge", "the humans"),
    names: tuple[str, str] = ("judge", "human"),
) -> PairAgreement:
    """``judge_vs_human``'s computation, silent, for any two aligned score arrays: ``sides``
    name them in undefined reasons, ``names`` in input errors."""
    labels = check_labels(labels)
    a = as_scores(x, names[0], labels)
    b = as_scores(y, names[1], labels)
    if a.size != b.size:
        raise ValueError(
            f"{names[0]} and {names[1]} must have the same length ({a.size} != {b.size})"
        )
    lab = np.asarray(labels, dtype=np.int64)
    ca, cb = to_categories(a, labels=labels), to_categories(b, labels=labels)
    points = _point_estimates(a, b, ca, cb, lab, sides)
    if options.n_bootstrap and a.size >= 2:
        cis = bootstrap_pairs(
            a,
            b,
            ca,
            cb,
            lab.astype(float),
            n_resamples=options.n_bootstrap,
            seed=options.seed,
            confidence=options.confidence,
        )
    else:
        cis = {name: (math.nan, math.nan) for name in (*PAIR_COEFFICIENTS, *BASELINES)}
    coefficients = {}
    for name in (*PAIR_COEFFICIENTS, *BASELINES):
        value, p, reason = points[name]
        low, high = cis[name] if reason is None else (math.nan, math.nan)
        coefficients[name] = Coefficient(value, low, high, p, int(a.size), reason)
    positions = np.arange(lab.size)
    counts = (
        confusion_matrix(
            np.searchsorted(lab, ca), np.searchsorted(lab, cb), labels=positions
        ).tolist()
        if a.size
        else []
    )
    majority = majority_label(cb, lab)
    flags = agreement_flags(coefficients, majority) if a.size else []
    return PairAgreement(coefficients, ConfusionMatrix(list(labels), counts), flags, majority)


def judge_vs_human(
    judge: ArrayLike,
    human: ArrayLike,
    *,
    options: BootstrapOptions = DEFAULT_OPTIONS,
    labels: Sequence[int] = LABELS,
    warn: bool = True,
) -> PairAgreement:
    """All judge-human coefficients for paired per-item scores.

    ``judge`` and ``human`` are per-item scores on the ``labels`` scale (means allowed; 1-5
    unless given, e.g. ``labels=(0, 1, 2, 3)``); kappa, exact and within-one use them on the
    nearest level, halves up; the confusion matrix has one row and column per label;
    ``mean_difference`` is judge - human. Each coefficient is NaN with its
    ``undefined_reason`` when these data cannot define it, with one ``UndefinedWarning``
    unless ``warn`` is False (for callers that show the reason themselves).
    """
    result = pair_agreement(judge, human, options=check_options(options), labels=labels)
    if warn:
        warn_undefined(result.coefficients.items())
    return result
