"""Agreement between a judge and humans, and among humans, with honest uncertainty.

scikit-learn style: options are keyword-only, inputs are checked early with messages that name
the argument, and an undefined coefficient (constant ratings, fewer than 3 items) is NaN with
an ``UndefinedAgreementWarning`` rather than an error. Point estimates and p-values come from
scipy (Pearson, Spearman, Kendall tau-b), scikit-learn (Cohen's kappa, confusion matrix) and
krippendorff (alpha); confidence intervals come from an item bootstrap (``judge.bootstrap``).

Categories: kappa, exact and within-one agreement need scores on the 1-5 categories. A mean
of several ratings (or of several judge samples) is put on a category by rounding half up:
2.5 -> 3, 2.33 -> 2, 3.67 -> 4.

>>> r = judge_vs_human([1, 2, 3, 4, 5], [2, 1, 4, 3, 5], n_bootstrap=0)
>>> round(r["spearman"].value, 3), round(r["kendall"].value, 3)
(0.8, 0.6)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import combinations
from typing import Any, Literal

import krippendorff
import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from judge.bootstrap import bootstrap_pairs, percentile_interval

Array = NDArray[np.float64]
LABELS = (1, 2, 3, 4, 5)
Level = Literal["nominal", "ordinal", "interval"]
LEVELS: tuple[Level, ...] = ("nominal", "ordinal", "interval")
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
)


class UndefinedAgreementWarning(UserWarning):
    """A coefficient is undefined for these data (constant ratings, too few items)."""


@dataclass(frozen=True)
class Coefficient:
    """One agreement coefficient: value, bootstrap CI, p-value where defined, and n."""

    value: float
    ci_low: float
    ci_high: float
    p_value: float | None
    n: int

    def to_dict(self) -> dict[str, Any]:
        return {k: _json_number(v) for k, v in asdict(self).items()}

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2


def jsonable(result: dict[str, Any]) -> dict[str, Any]:
    """A result dict with every Coefficient turned into its JSON-ready dict."""
    return {k: (v.to_dict() if isinstance(v, Coefficient) else v) for k, v in result.items()}


def _json_number(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def to_categories(scores: ArrayLike, *, labels: Sequence[int] = LABELS) -> NDArray[np.float64]:
    """Round half up onto the integer categories (2.5 -> 3); scores must lie in the scale.

    >>> to_categories([2.5, 2.333, 3.667, 1]).tolist()
    [3.0, 2.0, 4.0, 1.0]
    """
    values = np.asarray(scores, dtype=float)
    out = np.floor(values + 0.5)
    if out.size and (out.min() < labels[0] or out.max() > labels[-1]):
        raise ValueError(f"scores must lie within {labels[0]}..{labels[-1]}")
    return out


def _as_scores(values: ArrayLike, name: str, labels: Sequence[int]) -> Array:
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a sequence of numbers") from None
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or infinite values; drop unscored items first")
    if array.size and (array.min() < labels[0] or array.max() > labels[-1]):
        raise ValueError(
            f"{name} has values outside the {labels[0]}..{labels[-1]} scale "
            f"(min {array.min():g}, max {array.max():g})"
        )
    return array


def _undefined(what: str) -> None:
    warnings.warn(
        f"{what} is undefined for these data; reported as NaN",
        UndefinedAgreementWarning,
        stacklevel=3,
    )


def _point_estimates(
    x: Array, y: Array, cx: Array, cy: Array, labels: NDArray[np.int64]
) -> dict[str, tuple[float, float | None]]:
    out: dict[str, tuple[float, float | None]] = {}
    n = x.size
    constant = np.ptp(x) == 0 or np.ptp(y) == 0
    for name, fn in (
        ("pearson", stats.pearsonr),
        ("spearman", stats.spearmanr),
        ("kendall", stats.kendalltau),
    ):
        if n < 3 or constant:
            _undefined(f"{name} (n={n}{', constant ratings' if constant else ''})")
            out[name] = (math.nan, math.nan)
            continue
        result = fn(x, y)
        out[name] = (float(result.statistic), float(result.pvalue))
    for name, weights in (
        ("kappa", None),
        ("kappa_linear", "linear"),
        ("kappa_quadratic", "quadratic"),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # sklearn warns too; we warn once below
            value = (
                float(cohen_kappa_score(cx, cy, labels=labels, weights=weights)) if n else math.nan
            )
        if not math.isfinite(value):
            _undefined(f"{name} (both sides use one and the same category)")
        out[name] = (value, None)
    out["exact_agreement"] = (float(np.mean(cx == cy)) if n else math.nan, None)
    out["within_one"] = (float(np.mean(np.abs(cx - cy) <= 1)) if n else math.nan, None)
    out["mean_difference"] = (float(np.mean(x - y)) if n else math.nan, None)
    return out


def judge_vs_human(
    judge: ArrayLike,
    human: ArrayLike,
    *,
    n_bootstrap: int = 1000,
    seed: int | None = 0,
    confidence: float = 0.95,
    labels: Sequence[int] = LABELS,
) -> dict[str, Any]:
    """All judge-human coefficients for paired per-item scores.

    ``judge`` and ``human`` are per-item scores on the ``labels`` scale (means allowed); kappa,
    exact and within-one use them rounded half up to categories; ``mean_difference`` is
    judge - human. Returns ``{name: Coefficient}`` for the names in ``PAIR_COEFFICIENTS`` plus
    ``confusion_matrix`` (rows judge, columns human, over ``labels``).
    """
    x = _as_scores(judge, "judge", labels)
    y = _as_scores(human, "human", labels)
    if x.size != y.size:
        raise ValueError(f"judge and human must have the same length ({x.size} != {y.size})")
    if n_bootstrap < 0:
        raise ValueError(f"n_bootstrap must be >= 0, got {n_bootstrap}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    lab = np.asarray(labels, dtype=np.int64)
    cx, cy = to_categories(x, labels=labels), to_categories(y, labels=labels)
    points = _point_estimates(x, y, cx, cy, lab)
    if n_bootstrap and x.size >= 2:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            cis = bootstrap_pairs(
                x,
                y,
                cx,
                cy,
                lab.astype(float),
                n_resamples=n_bootstrap,
                seed=seed,
                confidence=confidence,
            )
    else:
        cis = {name: (math.nan, math.nan) for name in PAIR_COEFFICIENTS}
    result: dict[str, Any] = {}
    for name in PAIR_COEFFICIENTS:
        value, p = points[name]
        low, high = cis[name]
        if not math.isfinite(value):
            low = high = math.nan
        result[name] = Coefficient(value, low, high, p, int(x.size))
    result["confusion_matrix"] = {
        "labels": list(labels),
        "rows": "judge",
        "columns": "human",
        "counts": confusion_matrix(cx, cy, labels=lab).tolist() if x.size else [],
    }
    return result


# --- human ratings in long format ----------------------------------------------------------


@dataclass(frozen=True)
class RatingMatrix:
    """Ratings as a raters x items matrix with NaN where a rater did not rate an item."""

    items: list[str]
    raters: list[str]
    values: Array  # (n_raters, n_items)

    @classmethod
    def from_long(
        cls, item_ids: Sequence[Any], raters: Sequence[Any], scores: ArrayLike
    ) -> RatingMatrix:
        item_ids = [str(i) for i in item_ids]
        raters = [str(r) for r in raters]
        values = np.asarray(scores, dtype=float)
        if not (len(item_ids) == len(raters) == values.size):
            raise ValueError("item_ids, raters and scores must have the same length")
        items = sorted(set(item_ids), key=_natural)
        people = sorted(set(raters), key=_natural)
        ii = {k: i for i, k in enumerate(items)}
        ri = {k: i for i, k in enumerate(people)}
        matrix = np.full((len(people), len(items)), np.nan)
        for item, rater, score in zip(item_ids, raters, values, strict=True):
            if not np.isnan(matrix[ri[rater], ii[item]]):
                raise ValueError(f"rater {rater!r} rated item {item!r} more than once")
            matrix[ri[rater], ii[item]] = score
        return cls(items, people, matrix)

    def item_scores(self, how: str = "mean") -> Array:
        """The human score per item: mean (default, as in FairMonitor) or median."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            if how == "mean":
                return np.asarray(np.nanmean(self.values, axis=0))
            if how == "median":
                return np.asarray(np.nanmedian(self.values, axis=0))
        raise ValueError(f"how must be 'mean' or 'median', got {how!r}")


def _natural(key: str) -> tuple[int, Any]:
    return (0, int(key)) if key.isdigit() else (1, key)


def _alpha(values: Array, level: Level, domain: Sequence[float] | None) -> float:
    try:
        return float(
            krippendorff.alpha(
                reliability_data=values, level_of_measurement=level, value_domain=domain
            )
        )
    except (ValueError, ZeroDivisionError):
        return math.nan


def krippendorff_alphas(
    matrix: RatingMatrix,
    *,
    n_bootstrap: int = 1000,
    seed: int | None = 0,
    confidence: float = 0.95,
    labels: Sequence[int] = LABELS,
) -> dict[str, Coefficient]:
    """Krippendorff's alpha (nominal, ordinal, interval) among raters, missing ratings allowed.

    n is the number of items rated by at least two raters (the only ones that count); the CI
    resamples those items.
    """
    pairable = np.sum(~np.isnan(matrix.values), axis=0) >= 2
    values = matrix.values[:, pairable]
    observed = np.unique(values[~np.isnan(values)])
    domain = sorted(set(labels) | set(observed.tolist()))
    out = {}
    rng = np.random.default_rng(seed)
    draws = (
        [rng.integers(0, values.shape[1], values.shape[1]) for _ in range(n_bootstrap)]
        if values.shape[1] >= 2
        else []
    )
    for level in LEVELS:
        value = _alpha(values, level, domain) if values.shape[1] else math.nan
        if not math.isfinite(value):
            _undefined(f"alpha_{level} (n={values.shape[1]} items with 2+ ratings)")
            out[f"alpha_{level}"] = Coefficient(
                math.nan, math.nan, math.nan, None, int(values.shape[1])
            )
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            boot = np.array([_alpha(values[:, idx], level, domain) for idx in draws])
        low, high = percentile_interval(boot, confidence) if draws else (math.nan, math.nan)
        out[f"alpha_{level}"] = Coefficient(value, low, high, None, int(values.shape[1]))
    return out


def _pair(
    a: Array,
    b: Array,
    names: Sequence[str],
    *,
    n_bootstrap: int,
    seed: int | None,
    confidence: float,
    labels: Sequence[int],
) -> dict[str, Any]:
    """Selected pair coefficients (as JSON-ready dicts with CIs) of two aligned score arrays."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = judge_vs_human(
            a, b, n_bootstrap=n_bootstrap, seed=seed, confidence=confidence, labels=labels
        )
    return {name: result[name].to_dict() for name in names}


def pairwise_kappa(
    matrix: RatingMatrix,
    *,
    n_bootstrap: int = 1000,
    seed: int | None = 0,
    confidence: float = 0.95,
    labels: Sequence[int] = LABELS,
) -> list[dict[str, Any]]:
    """Cohen's kappa (unweighted and quadratic) for every pair of raters on shared items."""
    out = []
    for a, b in combinations(range(len(matrix.raters)), 2):
        both = ~np.isnan(matrix.values[a]) & ~np.isnan(matrix.values[b])
        entry: dict[str, Any] = {
            "raters": [matrix.raters[a], matrix.raters[b]],
            "n": int(both.sum()),
        }
        if both.any():
            entry.update(
                _pair(
                    matrix.values[a, both],
                    matrix.values[b, both],
                    ("kappa", "kappa_quadratic"),
                    n_bootstrap=n_bootstrap,
                    seed=seed,
                    confidence=confidence,
                    labels=labels,
                )
            )
        out.append(entry)
    return out


def annotator_vs_rest(
    matrix: RatingMatrix,
    *,
    n_bootstrap: int = 1000,
    seed: int | None = 0,
    confidence: float = 0.95,
    labels: Sequence[int] = LABELS,
) -> list[dict[str, Any]]:
    """Each rater against the mean of the other raters on the items both sides cover."""
    out = []
    for r, name in enumerate(matrix.raters):
        others = np.delete(matrix.values, r, axis=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            rest = (
                np.nanmean(others, axis=0)
                if others.size
                else np.full(matrix.values.shape[1], np.nan)
            )
        mask = ~np.isnan(matrix.values[r]) & ~np.isnan(rest)
        entry: dict[str, Any] = {"rater": name, "n": int(mask.sum())}
        if mask.any():
            entry.update(
                _pair(
                    matrix.values[r, mask],
                    rest[mask],
                    ("pearson", "spearman", "kappa_quadratic", "mean_difference"),
                    n_bootstrap=n_bootstrap,
                    seed=seed,
                    confidence=confidence,
                    labels=labels,
                )
            )
        out.append(entry)
    return out


def human_vs_human(
    matrix: RatingMatrix,
    *,
    n_bootstrap: int = 1000,
    seed: int | None = 0,
    confidence: float = 0.95,
    labels: Sequence[int] = LABELS,
) -> dict[str, Any]:
    """Agreement among human raters: alphas (with CIs), pairwise kappa, each rater vs the rest."""
    result: dict[str, Any] = dict(
        krippendorff_alphas(
            matrix, n_bootstrap=n_bootstrap, seed=seed, confidence=confidence, labels=labels
        )
    )
    result["n_raters"] = len(matrix.raters)
    shared: dict[str, Any] = {
        "n_bootstrap": n_bootstrap,
        "seed": seed,
        "confidence": confidence,
        "labels": labels,
    }
    result["pairwise_kappa"] = pairwise_kappa(matrix, **shared)
    result["per_annotator"] = annotator_vs_rest(matrix, **shared)
    return result


def kappa_per_annotator(
    judge: Array,
    matrix: RatingMatrix,
    *,
    n_bootstrap: int = 1000,
    seed: int | None = 0,
    confidence: float = 0.95,
    labels: Sequence[int] = LABELS,
) -> list[dict[str, Any]]:
    """Cohen's kappa of the judge against each annotator on that annotator's items."""
    out = []
    for r, name in enumerate(matrix.raters):
        mask = ~np.isnan(matrix.values[r])
        entry: dict[str, Any] = {"rater": name, "n": int(mask.sum())}
        if mask.any():
            entry.update(
                _pair(
                    np.asarray(judge, dtype=float)[mask],
                    matrix.values[r, mask],
                    ("kappa", "kappa_quadratic"),
                    n_bootstrap=n_bootstrap,
                    seed=seed,
                    confidence=confidence,
                    labels=labels,
                )
            )
        out.append(entry)
    return out


# --- levels -------------------------------------------------------------------------------

CORRELATIONS = {"pearson": stats.pearsonr, "spearman": stats.spearmanr, "kendall": stats.kendalltau}


def grouped_correlations(
    judge: ArrayLike,
    human: ArrayLike,
    groups: Sequence[Any],
    *,
    n_bootstrap: int = 1000,
    seed: int | None = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Correlate within each group, then average over groups (summary-level correlation).

    Groups where either side is constant (or with fewer than 2 items) are skipped and counted.
    The CI resamples groups. The p-value is not defined for an average of correlations.
    """
    x = np.asarray(judge, dtype=float)
    y = np.asarray(human, dtype=float)
    keys = np.asarray([str(g) for g in groups])
    if not (x.size == y.size == keys.size):
        raise ValueError("judge, human and groups must have the same length")
    per_group: dict[str, list[float]] = {name: [] for name in CORRELATIONS}
    used = skipped = 0
    for key in np.unique(keys):
        mask = keys == key
        gx, gy = x[mask], y[mask]
        if gx.size < 2 or np.ptp(gx) == 0 or np.ptp(gy) == 0:
            skipped += 1
            continue
        used += 1
        for name, fn in CORRELATIONS.items():
            per_group[name].append(float(fn(gx, gy).statistic))
    out: dict[str, Any] = {"n_groups": used, "n_groups_skipped": skipped}
    rng = np.random.default_rng(seed)
    for name, values in per_group.items():
        v = np.asarray(values)
        if v.size == 0:
            _undefined(f"grouped {name} (no group with varying scores on both sides)")
            out[name] = Coefficient(math.nan, math.nan, math.nan, None, 0)
            continue
        boot = (
            v[rng.integers(0, v.size, (n_bootstrap, v.size))].mean(axis=1)
            if n_bootstrap and v.size >= 2
            else np.array([])
        )
        low, high = percentile_interval(boot, confidence) if boot.size else (math.nan, math.nan)
        out[name] = Coefficient(float(v.mean()), low, high, None, int(v.size))
    return out


def system_level(
    judge: ArrayLike,
    human: ArrayLike,
    systems: Sequence[Any],
    *,
    n_bootstrap: int = 1000,
    seed: int | None = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Correlate per-system mean scores (judge means vs human means), one point per system.

    The CI resamples items within each system and recomputes the system means.
    """
    x = np.asarray(judge, dtype=float)
    y = np.asarray(human, dtype=float)
    keys = np.asarray([str(s) for s in systems])
    if not (x.size == y.size == keys.size):
        raise ValueError("judge, human and systems must have the same length")
    names, index = np.unique(keys, return_inverse=True)
    sizes = np.bincount(index)
    mx, my = np.bincount(index, x) / sizes, np.bincount(index, y) / sizes
    out: dict[str, Any] = {
        "n_systems": int(names.size),
        "systems": {
            str(k): {"judge": float(a), "human": float(b)}
            for k, a, b in zip(names, mx, my, strict=True)
        },
    }
    rng = np.random.default_rng(seed)
    members = [np.flatnonzero(index == s) for s in range(names.size)]
    boots = []
    for _ in range(n_bootstrap if names.size >= 3 else 0):
        picks = [m[rng.integers(0, m.size, m.size)] for m in members]
        boots.append(
            (np.array([x[p].mean() for p in picks]), np.array([y[p].mean() for p in picks]))
        )
    for name, fn in CORRELATIONS.items():
        if names.size < 3 or np.ptp(mx) == 0 or np.ptp(my) == 0:
            _undefined(f"system-level {name} (n={names.size} systems)")
            out[name] = Coefficient(math.nan, math.nan, math.nan, math.nan, int(names.size))
            continue
        result = fn(mx, my)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            values = np.array([fn(bx, by).statistic for bx, by in boots])
        low, high = percentile_interval(values, confidence) if boots else (math.nan, math.nan)
        out[name] = Coefficient(
            float(result.statistic), low, high, float(result.pvalue), int(names.size)
        )
    return out


def self_consistency(
    samples: ArrayLike, *, n_bootstrap: int = 1000, seed: int | None = 0
) -> dict[str, Any]:
    """Intra-judge agreement from an items x samples matrix (NaN = unscored sample).

    Alpha treats the samples as raters (with CIs); ``share_disagreeing`` is the share of items
    with two or more scored samples whose scores are not all equal.
    """
    values = np.asarray(samples, dtype=float)
    if values.ndim != 2:
        raise ValueError("samples must be a 2-D items x samples array")
    usable = values[np.sum(~np.isnan(values), axis=1) >= 2]
    disagree = [np.ptp(row[~np.isnan(row)]) > 0 for row in usable]
    out: dict[str, Any] = {
        "n_items": int(usable.shape[0]),
        "n_samples": int(values.shape[1]),
        "share_disagreeing": float(np.mean(disagree)) if disagree else None,
    }
    matrix = RatingMatrix(
        [str(i) for i in range(usable.shape[0])],
        [f"sample{k}" for k in range(values.shape[1])],
        usable.T,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alphas = krippendorff_alphas(matrix, n_bootstrap=n_bootstrap, seed=seed)
    out["alpha_ordinal"] = alphas["alpha_ordinal"].to_dict()
    out["alpha_interval"] = alphas["alpha_interval"].to_dict()
    return out


def items_needed(coefficient: Coefficient, target_half_width: float) -> int | None:
    """Items to rate for a CI half-width of ``target_half_width``, from a pilot estimate.

    Bootstrap CI widths shrink like 1/sqrt(n), so n_needed = n_pilot x (pilot half-width /
    target)^2, rounded up. None when the pilot CI is undefined.

    >>> items_needed(Coefficient(0.6, 0.4, 0.8, None, 50), 0.05)
    800
    """
    if target_half_width <= 0:
        raise ValueError(f"target_half_width must be > 0, got {target_half_width}")
    half = coefficient.half_width
    if not math.isfinite(half) or half <= 0 or coefficient.n < 2:
        return None
    return max(coefficient.n, math.ceil(round(coefficient.n * (half / target_half_width) ** 2, 9)))
