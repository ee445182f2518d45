"""The cluster bootstrap of ratios (``judge.stats.cluster_ratio``): a cluster's repeated
units carry no more information than one of them, so copying every unit within its cluster
leaves the interval exactly as it was (a unit-level bootstrap would narrow it); and on many
independent clusters the interval matches the delta-method normal interval of a ratio
estimator, written out here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from judge.stats.cluster_ratio import cluster_draws, ratio_intervals


def test_copies_within_a_cluster_do_not_narrow_the_interval() -> None:
    rng = np.random.default_rng(1)
    hits = rng.integers(0, 2, 40).astype(float)
    ones = np.ones(40)
    once = ratio_intervals({"r": (hits, ones)}, levels=[0.95], n_bootstrap=500, seed=3)
    thrice = ratio_intervals({"r": (3 * hits, 3 * ones)}, levels=[0.95], n_bootstrap=500, seed=3)
    assert thrice["r"][0.95] == once["r"][0.95]


def test_matches_the_delta_method_on_many_clusters() -> None:
    rng = np.random.default_rng(2)
    size = rng.integers(1, 4, 2000).astype(float)  # units per cluster
    hits = rng.binomial(size.astype(int), 0.3).astype(float)
    got = ratio_intervals({"r": (hits, size)}, levels=[0.95], n_bootstrap=4000, seed=0)["r"][0.95]
    # ratio estimator r = sum(y) / sum(x); its variance by the delta method (Cochran 1977,
    # eq. 6.9 with n clusters): sum((y - r x)^2) / (n (n - 1) mean(x)^2)
    r, n = hits.sum() / size.sum(), size.size
    se = math.sqrt(((hits - r * size) ** 2).sum() / (n * (n - 1)) / size.mean() ** 2)
    assert got[0] == pytest.approx(r - 1.959964 * se, abs=0.004)
    assert got[1] == pytest.approx(r + 1.959964 * se, abs=0.004)


def test_draws_and_empty_denominators() -> None:
    draws = cluster_draws(5, 100, 0)
    assert draws.shape == (100, 5) and (draws.sum(axis=1) == 5).all()
    # one cluster with a zero denominator: a resample of it alone has no ratio; none at all
    out = ratio_intervals({"r": ([0.0], [0.0])}, levels=[0.9], n_bootstrap=10, seed=0)
    assert all(math.isnan(x) for x in out["r"][0.9])
