"""min_detectable_shift (issue 42): a hand computation from t tables and the exact power from
the noncentral t distribution."""

from __future__ import annotations

import numpy as np
import pytest


def test_min_detectable_shift_matches_a_hand_computation_and_has_80_percent_power() -> None:
    from scipy import stats as st

    from judge.stats.paired import min_detectable_shift

    # By hand from t tables: t(0.975, 24) = 2.0639, t(0.80, 24) = 0.8569; (2.0639 + 0.8569)
    # x 1.0 / sqrt(25) = 0.5842.
    assert min_detectable_shift(1.0, 25) == pytest.approx(0.5842, abs=1e-4)
    # The power of the two-sided one-sample t test at that shift, from the noncentral t
    # distribution (an exact power calculation, not the approximation the function uses):
    # close to 0.8 (the approximation drops the far tail and treats the noncentral t as
    # shifted, so it is a little off for small n).
    for n, sd in [(10, 0.7), (30, 1.3), (200, 0.5)]:
        shift = min_detectable_shift(sd, n)
        crit = st.t.ppf(0.975, n - 1)
        nc = shift / (sd / np.sqrt(n))
        power = st.nct.sf(crit, n - 1, nc) + st.nct.cdf(-crit, n - 1, nc)
        assert power == pytest.approx(0.8, abs=0.02)
    # undefined with fewer than two pairs
    assert min_detectable_shift(1.0, 1) != min_detectable_shift(1.0, 1)
