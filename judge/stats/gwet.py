"""Gwet's AC1 (nominal) and AC2 (weighted) for two raters, from a confusion table.

Why it is here: on a skewed rubric (most answers fair) Cohen's kappa collapses towards 0 even
when the raters agree on nearly everything (the "kappa paradox"), because its chance term
comes from the product of the two margins. Gwet's chance term asks instead how likely it is
that a rating is a random pick among the q categories, which stays small when one category
dominates. Reporting AC1 beside kappa shows which of the two readings a skewed table gives.

With p_kl the share of items the first rater put in k and the second in l, w_kl agreement
weights (1 on the diagonal), pi_k the mean of the two margins for category k and T_w the sum
of all the weights:

    pa = sum_kl w_kl p_kl
    pe = T_w / (q (q - 1)) * sum_k pi_k (1 - pi_k)
    AC = (pa - pe) / (1 - pe)

Unweighted (AC1) T_w = q, so pe = sum_k pi_k (1 - pi_k) / (q - 1). q counts every category
of the scale, rated or not. The weights are those of weighted kappa turned into agreement:
1 - |k - l| / (q - 1) (linear) or 1 - (k - l)^2 / (q - 1)^2 (quadratic), as irrCAC's are.

A judge that always says "pass" while the humans say pass on 90 of 100 items: pa = 0.90,
pi = (0.95, 0.05), pe = 2 * 0.95 * 0.05 / 1 = 0.095, AC1 = 0.805 / 0.905.

>>> round(gwet_from_table([[0, 0], [10, 90]]), 6)
0.889503
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]
WEIGHTINGS = (None, "linear", "quadratic")


def agreement_weights(n_labels: int, weights: str | None = None) -> Array:
    """(q, q) agreement weights: identity, or 1 - distance / largest distance (linear or
    squared), distances in positions on the scale.

    >>> agreement_weights(3, "linear").tolist()
    [[1.0, 0.5, 0.0], [0.5, 1.0, 0.5], [0.0, 0.5, 1.0]]
    """
    if weights not in WEIGHTINGS:
        raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")
    if n_labels < 2:
        raise ValueError(f"n_labels must be at least 2, got {n_labels}")
    i, j = np.meshgrid(np.arange(n_labels), np.arange(n_labels), indexing="ij")
    if weights is None:
        return (i == j).astype(np.float64)
    power = 1 if weights == "linear" else 2
    return np.asarray(1.0 - np.abs(i - j) ** power / (n_labels - 1) ** power, dtype=np.float64)


def gwet_from_margins(agreement: Array, rows: Array, cols: Array, weights: Array) -> Array:
    """AC per resample, vectorised: ``agreement`` (B,) the weighted observed agreement sum_kl
    w_kl n_kl in counts, ``rows``/``cols`` (B, q) the two raters' counts per category,
    ``weights`` (q, q). NaN where a resample has no items or pe is 1."""
    n = rows.sum(axis=1)
    q = weights.shape[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        pa = agreement / n
        pi = (rows + cols) / (2 * n[:, None])
        pe = weights.sum() / (q * (q - 1)) * (pi * (1 - pi)).sum(axis=1)
        out = (pa - pe) / (1 - pe)
    return np.asarray(np.where(np.isclose(pe, 1.0), np.nan, out), dtype=np.float64)


def gwet_from_table(table: ArrayLike, *, weights: str | None = None) -> float:
    """Gwet's AC1 (``weights`` None) or AC2 (``"linear"``/``"quadratic"``) of a square
    confusion table of counts: rows one rater, columns the other, one per category of the
    scale. NaN for an empty table."""
    counts = np.asarray(table, dtype=np.float64)
    if counts.ndim != 2 or counts.shape[0] != counts.shape[1]:
        raise ValueError(f"table must be square, got shape {counts.shape}")
    w = agreement_weights(counts.shape[0], weights)
    observed = np.array([(w * counts).sum()])
    return float(gwet_from_margins(observed, counts.sum(1)[None], counts.sum(0)[None], w)[0])


def gwet_ac(
    a: NDArray[np.int64], b: NDArray[np.int64], n_labels: int, *, weights: str | None = None
) -> float:
    """AC1/AC2 of two aligned arrays of category positions in ``range(n_labels)``.

    >>> gwet_ac(np.array([1, 1, 1, 1]), np.array([1, 1, 1, 0]), 2)
    0.68
    """
    table = np.zeros((n_labels, n_labels))
    np.add.at(table, (a, b), 1.0)
    return gwet_from_table(table, weights=weights)
