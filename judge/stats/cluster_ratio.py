"""Percentile bootstrap intervals of ratios of sums, resampling whole clusters.

A share such as "consistent pairs / readable pairs" is a ratio of two sums over units. When
units come in clusters that are not independent (the repetitions of one comparison), the
bootstrap must resample clusters, not units. Each resample's sums are the clusters' sums
weighted by how often the cluster was drawn, so every resample of every ratio is computed at
once from one matrix of draw counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike


def cluster_draws(n_clusters: int, n_bootstrap: int, seed: int) -> np.ndarray:
    """How often each cluster is drawn in each resample: (n_bootstrap, n_clusters).

    >>> cluster_draws(3, 2, 0).sum(axis=1).tolist()  # each resample draws 3 clusters
    [3, 3]
    """
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, n_clusters, size=(n_bootstrap, n_clusters))
    offsets = np.arange(n_bootstrap)[:, None] * n_clusters
    flat = np.bincount((picks + offsets).ravel(), minlength=n_bootstrap * n_clusters)
    return flat.reshape(n_bootstrap, n_clusters)


def ratio_intervals(
    ratios: Mapping[str, tuple[ArrayLike, ArrayLike]],
    *,
    levels: Sequence[float],
    n_bootstrap: int,
    seed: int,
) -> dict[str, dict[float, tuple[float, float]]]:
    """Per named ratio (per-cluster numerator and denominator sums), its percentile interval
    at each of ``levels``; resamples whose denominator is 0 are left out (NaN, NaN when all
    are). All ratios share the same resamples.

    >>> out = ratio_intervals({"r": ([1, 1], [1, 1])}, levels=[0.9], n_bootstrap=50, seed=0)
    >>> out["r"][0.9]
    (1.0, 1.0)
    """
    arrays = {k: (np.asarray(a, float), np.asarray(b, float)) for k, (a, b) in ratios.items()}
    sizes = {a.size for a, _ in arrays.values()} | {b.size for _, b in arrays.values()}
    if len(sizes) > 1:
        raise ValueError("every numerator and denominator needs one value per cluster")
    n = sizes.pop() if sizes else 0
    nan = (float("nan"), float("nan"))
    if n == 0 or n_bootstrap <= 0:
        return {name: dict.fromkeys(levels, nan) for name in ratios}
    draws = cluster_draws(n, n_bootstrap, seed).astype(float)
    out: dict[str, dict[float, tuple[float, float]]] = {}
    for name, (num, den) in arrays.items():
        top, bottom = draws @ num, draws @ den
        with np.errstate(invalid="ignore", divide="ignore"):
            values = top / bottom
        values = values[np.isfinite(values)]
        out[name] = {}
        for level in levels:
            if not 0 < level < 1:
                raise ValueError(f"level must be between 0 and 1, got {level!r}")
            if values.size == 0:
                out[name][level] = nan
                continue
            low, high = np.percentile(values, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
            out[name][level] = (float(low), float(high))
    return out
