"""Agreement among raters: Krippendorff's alpha, Fleiss' kappa, pairwise kappa, each rater
against the rest and each rater against the judge, on a raters x items matrix with missing
ratings allowed.

Point estimates come from krippendorff (alpha), ``judge.stats.fleiss`` and
``judge.stats.pairs`` (Cohen's kappa, correlations); confidence intervals from an item
bootstrap. Undefined coefficients are NaN with their reason
and one ``UndefinedWarning`` each unless ``warn=False``, as in ``judge.stats.pairs``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import combinations
from typing import Any, Literal

import krippendorff
import numpy as np
from numpy.typing import ArrayLike

from judge.stats.bootstrap import Array, percentile_interval
from judge.stats.coefficient import (
    DEFAULT_OPTIONS,
    BootstrapOptions,
    Coefficient,
    check_options,
    warn_undefined,
)
from judge.stats.fleiss import fleiss_kappa
from judge.stats.matrix import RatingMatrix, column_means
from judge.stats.pairs import LABELS, as_scores, check_labels, pair_agreement

Level = Literal["nominal", "ordinal", "interval", "ratio"]
# Ratio treats the scale's numbers as amounts from a true zero: a disagreement weighs
# ((c - k) / (c + k))^2, so 1 vs 2 counts more than 4 vs 5.
LEVELS: tuple[Level, ...] = ("nominal", "ordinal", "interval", "ratio")
PAIRWISE = ("kappa", "kappa_linear", "kappa_quadratic", "ac1")  # among humans
JUDGE_PER_ANNOTATOR = ("kappa", "kappa_quadratic")
VS_REST = ("pearson", "spearman", "kappa_quadratic", "mean_difference")


@dataclass(frozen=True)
class RaterPairAgreement:
    """Two raters on the items both rated; ``coefficients`` is empty when they share none."""

    raters: tuple[str, str]
    n: int
    coefficients: dict[str, Coefficient]

    def to_dict(self) -> dict[str, Any]:
        coefs = {k: c.to_dict() for k, c in self.coefficients.items()}
        return {"raters": list(self.raters), "n": self.n, **coefs}

    def named(self) -> Iterator[tuple[str, Coefficient]]:
        for name, c in self.coefficients.items():
            yield f"{name} of raters {self.raters[0]!r} and {self.raters[1]!r}", c


@dataclass(frozen=True)
class PerRaterAgreement:
    """One rater against a reference (the other raters, or the judge) on shared items;
    ``coefficients`` is empty when there are none."""

    rater: str
    n: int
    coefficients: dict[str, Coefficient]

    def to_dict(self) -> dict[str, Any]:
        coefs = {k: c.to_dict() for k, c in self.coefficients.items()}
        return {"rater": self.rater, "n": self.n, **coefs}

    def named(self, against: str) -> Iterator[tuple[str, Coefficient]]:
        for name, c in self.coefficients.items():
            yield f"{name} of rater {self.rater!r} vs {against}", c


@dataclass(frozen=True)
class RaterAgreement:
    """Agreement among human raters: the ceiling a judge is compared with."""

    alphas: dict[str, Coefficient]  # alpha_nominal, alpha_ordinal, alpha_interval, alpha_ratio
    n_raters: int
    pairwise: list[RaterPairAgreement]
    per_annotator: list[PerRaterAgreement]
    fleiss_kappa: Coefficient

    def to_dict(self) -> dict[str, Any]:
        return {
            **{k: c.to_dict() for k, c in self.alphas.items()},
            "fleiss_kappa": self.fleiss_kappa.to_dict(),
            "n_raters": self.n_raters,
            "pairwise_kappa": [p.to_dict() for p in self.pairwise],
            "per_annotator": [p.to_dict() for p in self.per_annotator],
        }

    def named(self) -> Iterator[tuple[str, Coefficient]]:
        yield from self.alphas.items()
        yield "fleiss_kappa", self.fleiss_kappa
        for pair in self.pairwise:
            yield from pair.named()
        for entry in self.per_annotator:
            yield from entry.named("the other raters")


def _alpha_reason(values: Array) -> str | None:
    """Alpha is 0/0 when fewer than two distinct values are pairable; say why instead."""
    if values.shape[1] == 0:
        return "no item has ratings from two or more raters"
    observed = np.unique(values[~np.isnan(values)])
    if observed.size < 2:
        return f"constant ratings: every rating is {observed[0]:g}"
    return None


def _value_counts(values: Array, domain: Sequence[float]) -> Array:
    """Items x domain values: how many raters gave each item each value (the form
    ``krippendorff.alpha`` turns its reliability data into before computing). Counted once,
    so that a bootstrap resample of items is a choice of rows, not a new count."""
    return np.stack([np.sum(values == v, axis=0) for v in domain], axis=1)


def _alpha(counts: Array, level: Level, domain: Sequence[float]) -> float:
    """Alpha from ``counts`` (``_value_counts``); NaN when fewer than two distinct values
    were given (a resample with one value: undefined, skipped by the CI)."""
    if np.count_nonzero(counts.sum(axis=0)) < 2:
        return math.nan
    return float(
        krippendorff.alpha(value_counts=counts, level_of_measurement=level, value_domain=domain)
    )


def _compare(
    a: ArrayLike, b: ArrayLike, sides: tuple[str, str], *, keep: tuple[str, ...], **kwargs: Any
) -> dict[str, Coefficient]:
    """The ``keep`` coefficients of two aligned score arrays; empty when there are no items."""
    if np.size(a) == 0:
        return {}
    result = pair_agreement(a, b, sides=sides, names=("matrix", "matrix"), **kwargs)
    return {k: result.coefficients[k] for k in keep}


def krippendorff_alphas(
    matrix: RatingMatrix,
    *,
    options: BootstrapOptions = DEFAULT_OPTIONS,
    labels: Sequence[int] = LABELS,
    warn: bool = True,
) -> dict[str, Coefficient]:
    """Krippendorff's alpha (nominal, ordinal, interval, ratio) among raters, missing ratings
    allowed.

    The value domain is the scale's ``labels`` (1-5 unless given) and any other value rated
    (a rating that is itself a mean).

    n is the number of items rated by at least two raters (the only ones that count); the CI
    resamples those items. Undefined (NaN with its reason, and one ``UndefinedWarning`` each
    unless ``warn`` is False) when no item has two ratings or all of them are one value.
    """
    check_options(options)
    labels = check_labels(labels)
    pairable = np.sum(~np.isnan(matrix.values), axis=0) >= 2
    values = matrix.values[:, pairable]
    n = int(values.shape[1])
    observed = np.unique(values[~np.isnan(values)])
    domain = sorted(set(labels) | set(observed.tolist()))
    rng = np.random.default_rng(options.seed)
    draws = [rng.integers(0, n, n) for _ in range(options.n_bootstrap)] if n >= 2 else []
    reason = _alpha_reason(values)
    counts = _value_counts(values, domain)
    out = {}
    for level in LEVELS:
        if reason is not None:
            out[f"alpha_{level}"] = Coefficient.undefined(n, reason)
            continue
        value = _alpha(counts, level, domain)
        boot = np.array([_alpha(counts[idx], level, domain) for idx in draws])
        low, high = percentile_interval(boot, options.confidence) if draws else (math.nan, math.nan)
        out[f"alpha_{level}"] = Coefficient(value, low, high, None, n)
    if warn:
        warn_undefined(out.items())
    return out


def pairwise_kappa(
    matrix: RatingMatrix,
    *,
    options: BootstrapOptions = DEFAULT_OPTIONS,
    labels: Sequence[int] = LABELS,
    warn: bool = True,
) -> list[RaterPairAgreement]:
    """Cohen's kappa (unweighted, linear and quadratic weights) and Gwet's AC1 for every pair
    of raters on shared items (AC1 beside kappa: on a skewed rubric kappa alone reads two
    raters who agree on nearly everything as near chance)."""
    compare = partial(_compare, keep=PAIRWISE, options=check_options(options), labels=labels)
    out = []
    for a, b in combinations(range(len(matrix.raters)), 2):
        both = ~np.isnan(matrix.values[a]) & ~np.isnan(matrix.values[b])
        ra, rb = matrix.raters[a], matrix.raters[b]
        sides = (f"rater {ra!r}", f"rater {rb!r}")
        found = compare(matrix.values[a, both], matrix.values[b, both], sides)
        out.append(RaterPairAgreement((ra, rb), int(both.sum()), found))
    if warn:
        warn_undefined(named for pair in out for named in pair.named())
    return out


def annotator_vs_rest(
    matrix: RatingMatrix,
    *,
    options: BootstrapOptions = DEFAULT_OPTIONS,
    labels: Sequence[int] = LABELS,
    warn: bool = True,
) -> list[PerRaterAgreement]:
    """Each rater against the mean of the other raters on the items both sides cover."""
    compare = partial(_compare, keep=VS_REST, options=check_options(options), labels=labels)
    out = []
    for r, name in enumerate(matrix.raters):
        rest = column_means(np.delete(matrix.values, r, axis=0))
        mask = ~np.isnan(matrix.values[r]) & ~np.isnan(rest)
        sides = (f"rater {name!r}", "the other raters")
        coefficients = compare(matrix.values[r, mask], rest[mask], sides)
        out.append(PerRaterAgreement(name, int(mask.sum()), coefficients))
    if warn:
        warn_undefined(named for entry in out for named in entry.named("the other raters"))
    return out


def human_vs_human(
    matrix: RatingMatrix,
    *,
    options: BootstrapOptions = DEFAULT_OPTIONS,
    labels: Sequence[int] = LABELS,
    warn: bool = True,
) -> RaterAgreement:
    """Agreement among human raters: alphas and Fleiss' kappa (with CIs), pairwise kappa, each
    rater vs the rest."""
    shared: dict[str, Any] = {"options": options, "labels": labels, "warn": False}
    result = RaterAgreement(
        krippendorff_alphas(matrix, **shared),
        len(matrix.raters),
        pairwise_kappa(matrix, **shared),
        annotator_vs_rest(matrix, **shared),
        fleiss_kappa(matrix, options=options, labels=labels),
    )
    if warn:
        warn_undefined(result.named())
    return result


def kappa_per_annotator(
    judge: ArrayLike,
    matrix: RatingMatrix,
    *,
    options: BootstrapOptions = DEFAULT_OPTIONS,
    labels: Sequence[int] = LABELS,
    warn: bool = True,
) -> list[PerRaterAgreement]:
    """Cohen's kappa of the judge against each annotator on that annotator's items; ``judge``
    holds one score per item of ``matrix``."""
    compare = partial(
        _compare, keep=JUDGE_PER_ANNOTATOR, options=check_options(options), labels=labels
    )
    scores = as_scores(judge, "judge", labels)
    if scores.size != len(matrix.items):
        raise ValueError(
            f"judge must hold one score per item of matrix ({len(matrix.items)}), got {scores.size}"
        )
    out = []
    for r, name in enumerate(matrix.raters):
        mask = ~np.isnan(matrix.values[r])
        sides = ("the judge", f"rater {name!r}")
        coefficients = compare(scores[mask], matrix.values[r, mask], sides)
        out.append(PerRaterAgreement(name, int(mask.sum()), coefficients))
    if warn:
        warn_undefined(named for entry in out for named in entry.named("the judge"))
    return out
