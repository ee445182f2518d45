"""Krippendorff's alpha from coincidence matrices (judge.stats.coincidence) against the
``krippendorff`` package, to 1e-9: on the whole data and on every bootstrap resample, each
rebuilt here as the package's own reliability data (coders x units, NaN for missing) from
the units the resample drew, so a slip in the per-unit contributions or in the matrix
product moves the numbers."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest

from judge.stats.coincidence import alpha_from_counts, bootstrap_alpha, value_counts

DOMAIN = [1.0, 2.0, 3.0, 4.0, 5.0]


def _data(seed: int, coders: int = 4, units: int = 60) -> np.ndarray:
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, 6, units)
    values = np.clip(truth + rng.integers(-1, 2, (coders, units)), 1, 5).astype(float)
    values[rng.random(values.shape) < 0.25] = np.nan  # missing values
    values[1:, 0] = np.nan  # a unit with one value: not pairable, contributes nothing
    return values


@pytest.mark.parametrize("level", ["nominal", "interval"])
@pytest.mark.parametrize("seed", [1, 7])
def test_alpha_equals_the_package(level: str, seed: int) -> None:
    values = _data(seed)
    expected = krippendorff.alpha(
        reliability_data=values, level_of_measurement=level, value_domain=DOMAIN
    )
    assert alpha_from_counts(value_counts(values, DOMAIN), DOMAIN, level=level) == pytest.approx(
        expected, abs=1e-9
    )


def test_every_bootstrap_resample_equals_the_package_on_the_units_it_drew() -> None:
    values = _data(3)
    counts = value_counts(values, DOMAIN)
    pairable = np.flatnonzero(counts.sum(axis=1) >= 2)
    value, boot = bootstrap_alpha(
        counts, DOMAIN, level="interval", n_resamples=40, rng=np.random.default_rng(5)
    )
    # The same draws, made again: a multinomial count per pairable unit.
    draws = np.random.default_rng(5).multinomial(
        pairable.size, np.full(pairable.size, 1 / pairable.size), size=40
    )
    for got, drawn in zip(boot, draws, strict=True):
        units = np.repeat(pairable, drawn)  # each drawn unit as many times as it was drawn
        expected = krippendorff.alpha(
            reliability_data=values[:, units], level_of_measurement="interval",
            value_domain=DOMAIN,
        )  # fmt: skip
        assert got == pytest.approx(expected, abs=1e-9)
    assert value == pytest.approx(
        krippendorff.alpha(reliability_data=values, level_of_measurement="interval",
                           value_domain=DOMAIN),
        abs=1e-9,
    )  # fmt: skip


def test_constant_values_are_undefined_not_a_number() -> None:
    # Every pairable value is 3: D_e is 0, alpha 0/0; the package would divide by zero.
    values = np.full((3, 10), 3.0)
    assert np.isnan(alpha_from_counts(value_counts(values, DOMAIN), DOMAIN, level="interval"))
