"""Krippendorff's alpha and its bootstrap interval (judge.stats.raters.krippendorff_alphas)
against the krippendorff library called on the raw reliability data of every resample.

The code under test counts each item's values once and resamples rows of those counts;
the reference here rebuilds each resample's raters x items matrix and hands it to
``krippendorff.alpha(reliability_data=...)``, the library's other input, so a slip in the
counting (a value left out of the domain, a rater counted twice, an item's rows mixed up)
moves the numbers. The resamples are drawn as the docstring says: ``n`` items with
replacement from the items that two or more raters rated, by numpy's generator seeded with
the options' seed.
"""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest

from judge.stats.bootstrap import percentile_interval
from judge.stats.coefficient import BootstrapOptions
from judge.stats.matrix import RatingMatrix
from judge.stats.raters import krippendorff_alphas


@pytest.mark.parametrize("seed", [3, 11])
def test_point_and_interval_match_the_library_on_each_resample(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = rng.integers(1, 6, size=(4, 40)).astype(float)
    values[rng.random(values.shape) < 0.3] = np.nan  # missing ratings
    values[:, :3] = np.nan  # items nobody rated: left out
    values[1:, 3] = np.nan  # an item only one rater rated: left out
    matrix = RatingMatrix([f"i{k}" for k in range(40)], ["a", "b", "c", "d"], values)
    options = BootstrapOptions(n_bootstrap=60, seed=seed)

    found = krippendorff_alphas(matrix, options=options, warn=False)

    pairable = values[:, np.sum(~np.isnan(values), axis=0) >= 2]
    n = pairable.shape[1]
    domain = sorted({1.0, 2.0, 3.0, 4.0, 5.0} | set(np.unique(pairable[~np.isnan(pairable)])))
    draws = np.random.default_rng(seed)
    picks = [draws.integers(0, n, n) for _ in range(options.n_bootstrap)]
    for level in ("nominal", "ordinal", "interval", "ratio"):
        got = found[f"alpha_{level}"]
        point = krippendorff.alpha(
            reliability_data=pairable, level_of_measurement=level, value_domain=domain
        )
        boot = np.array(
            [
                krippendorff.alpha(
                    reliability_data=pairable[:, idx], level_of_measurement=level,
                    value_domain=domain,
                )
                for idx in picks
            ]
        )  # fmt: skip
        low, high = percentile_interval(boot, options.confidence)
        assert got.n == n
        assert got.value == pytest.approx(point, abs=1e-12), level
        assert (got.ci_low, got.ci_high) == (
            pytest.approx(low, abs=1e-12),
            pytest.approx(high, abs=1e-12),
        )
