"""Does a rated subset look like the rest of the run? The judge's scores of the rated items
against its scores of the unrated ones: a check, before treating a subset of unknown origin
as a simple random sample, that it was not picked by something the judge's scores see (the
highest-scored answers, one stage, the short ones).

Two numbers, because each alone misleads: the **standardised mean difference** (rated mean
minus unrated mean over ``sqrt((s_rated**2 + s_unrated**2) / 2)``, the balance measure of
the propensity-score literature, e.g. Austin, *Statistics in Medicine* 2009) says how far
apart the two sets are in the judge's own spread, whatever their sizes; **Welch's t-test**
(``scipy.stats.ttest_ind(equal_var=False)``) says whether that gap is more than the draw of
a random subset of that size would give. A random subset of 40 of 1,200 items differs by an
SMD of about +-0.16 by chance alone (``sqrt(1/40 + 1/1160)``), so a bound on the SMD alone
refuses honest small samples; a test alone refuses trivial gaps in large ones. A caller
refuses when both say so (``unrepresentative``).

This module imports no project module.

>>> c = compare_sample([4, 5, 5, 4, 5], [1, 2, 3, 2, 1, 2, 3, 2])
>>> round(c.smd, 2), c.p_value < 0.001
(3.94, True)
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats


@dataclass(frozen=True)
class SampleComparison:
    """The judge's scores of the rated items against the unrated ones'."""

    n_rated: int
    n_unrated: int
    mean_rated: float
    mean_unrated: float
    smd: float  # standardised mean difference, rated minus unrated (0 when both are constant)
    statistic: float  # Welch's t (NaN when neither set spreads)
    p_value: float  # two-sided; 1 when neither set spreads and the means are equal

    def unrepresentative(self, *, max_smd: float, alpha: float) -> bool:
        """Both numbers past their bounds: ``|smd| > max_smd`` and ``p_value < alpha``."""
        return abs(self.smd) > max_smd and self.p_value < alpha


def compare_sample(rated: ArrayLike, unrated: ArrayLike) -> SampleComparison:
    """Compare the judge's scores of the rated items with those of the unrated ones (see the
    module docstring). Each set needs 2 scores or more (ValueError otherwise)."""
    a = np.asarray(rated, dtype=float)
    b = np.asarray(unrated, dtype=float)
    for name, values in (("rated", a), ("unrated", b)):
        if values.ndim != 1 or values.size < 2:
            raise ValueError(f"{name} needs at least 2 scores to compare, got {values.size}")
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{name} holds NaN or infinite scores; leave unscored items out")
    gap = float(a.mean() - b.mean())
    spread = math.sqrt((float(a.var(ddof=1)) + float(b.var(ddof=1))) / 2)
    if spread == 0:
        # Both constant: no test to run; the same value is no difference, another is total.
        same = gap == 0
        return SampleComparison(
            int(a.size), int(b.size), float(a.mean()), float(b.mean()),
            0.0 if same else math.copysign(math.inf, gap), math.nan, 1.0 if same else 0.0,
        )  # fmt: skip
    with warnings.catch_warnings():
        # One set of identical scores (the 40 highest of a 1-5 judge are all 5) is exact, not
        # the near-identical data scipy's precision warning is about; Welch's t stands.
        warnings.simplefilter("ignore", RuntimeWarning)
        t = stats.ttest_ind(a, b, equal_var=False)
    return SampleComparison(
        int(a.size), int(b.size), float(a.mean()), float(b.mean()), gap / spread,
        float(t.statistic), float(t.pvalue),
    )  # fmt: skip
