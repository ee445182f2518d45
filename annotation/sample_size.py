"""How many items a rating campaign needs: the sample size for a 95 % confidence interval of
Spearman's rho of a given half-width (Fisher's z with Bonett and Wright's variance), rho taken
from a pilot campaign or assumed (``PLANNING_RHO``, an assumption the plan says it made)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from annotation.errors import CampaignError

# With no pilot, the rho to plan for (see size_for_half_width). It is an assumption, not an
# estimate: the judge's own scores say nothing about how well people will agree with them.
# 0.5 lies between the judge-human rhos FairMonitor reports for its weakest rubric (SBAS, about
# 0.41) and for ICS (about 0.80). The planned n grows as |rho| falls towards 0 (for a
# half-width of 0.1: 277 items at 0.5, 385 at 0, at most 388 near 0.08), so plan with a
# smaller rho if the judge may agree less.
PLANNING_RHO = 0.5


@dataclass(frozen=True)
class SizePlan:
    """How many items to rate for a target precision of Spearman's rho, and on what basis."""

    n: int
    rho: float
    rho_source: str
    half_width: float  # the half-width the plan reaches at n (at most the target)
    reason: str  # one sentence for the CLI

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "rho": self.rho,
            "rho_source": self.rho_source,
            "half_width": self.half_width,
            "reason": self.reason,
        }


def spearman_half_width(n: int, rho: float, *, confidence: float = 0.95) -> float:
    """The half-width of the Fisher-z confidence interval of Spearman's rho at ``n`` items:
    the distance from rho to the farther end of the interval.

    z = atanh(rho), se = sqrt((1 + rho^2 / 2) / (n - 3)) (Bonett & Wright 2000, Psychometrika
    65(1), 23-28), interval tanh(z -+ q se) with q the normal quantile of ``confidence``.
    Back on the rho scale the interval is lopsided: for rho > 0 it reaches farther below rho
    than above, so "rho within W on each side" is a bound on the lower side, and half of the
    interval's width (the mean of the two sides) would promise less than it says.

    >>> round(spearman_half_width(100, 0.0), 4)
    0.1964
    """
    if n <= 3:
        raise ValueError(f"n must be at least 4 for the Fisher z interval, got {n}")
    q = NormalDist().inv_cdf(0.5 + confidence / 2)  # the standard library's, as exact as scipy's
    z = math.atanh(rho)
    se = math.sqrt((1 + rho * rho / 2) / (n - 3))
    return max(math.tanh(z + q * se) - rho, rho - math.tanh(z - q * se))


def size_for_half_width(
    half_width: float,
    rho: float | None = None,
    *,
    rho_source: str | None = None,
    confidence: float = 0.95,
) -> SizePlan:
    """The smallest n (at least 4) whose ``confidence`` interval of Spearman's rho between the
    judge and the humans reaches at most ``half_width`` from rho on each side
    (``spearman_half_width``).

    ``rho`` is the expected correlation: a pilot campaign's (``size_from_pilot``), or, when
    None, the planning value ``PLANNING_RHO`` (0.5), an assumption the plan says it made.

    >>> plan = size_for_half_width(0.1)
    >>> plan.n, plan.rho, plan.rho_source
    (277, 0.5, 'planning value')
    """
    if (
        isinstance(half_width, bool)
        or not isinstance(half_width, numbers.Real)
        or not 0 < half_width < 1
    ):
        raise CampaignError(f"the target half-width must lie in (0, 1), got {half_width!r}")
    if not 0 < confidence < 1:
        raise CampaignError(f"confidence must lie in (0, 1), got {confidence!r}")
    source = rho_source or ("planning value" if rho is None else "given")
    value = PLANNING_RHO if rho is None else float(rho)
    if not -1 < value < 1:
        raise CampaignError(
            f"rho must lie strictly between -1 and 1 to plan a sample size, got {value:g} "
            f"({source})"
        )
    hw = float(half_width)

    def wide(m: int) -> bool:
        return spearman_half_width(m, value, confidence=confidence) > hw

    high = 4
    while wide(high):  # the half-width falls as n grows: double, then bisect
        high *= 2
    low = max(4, high // 2)
    if not wide(low):
        high = low
    while high - low > 1:
        mid = (low + high) // 2
        if wide(mid):
            low = mid
        else:
            high = mid
    reached = spearman_half_width(high, value, confidence=confidence)
    basis = {
        "planning value": "a planning value assumed without a pilot",
        "given": "as given",
    }.get(source, f"as in {source}")
    reason = (
        f"{high} rated items give Spearman's rho a {confidence:.0%} interval reaching at most "
        f"{reached:.4f} from rho on either side (target {hw:g}) if the judge-human rho is "
        f"{value:.2f}, {basis} "
        "(Fisher's z with the Bonett-Wright 2000 variance)."
    )
    return SizePlan(high, value, source, reached, reason)


def size_from_pilot(
    half_width: float,
    judge: Sequence[float],
    human: Sequence[float],
    *,
    confidence: float = 0.95,
) -> SizePlan:
    """``size_for_half_width`` with rho estimated from a pilot campaign: Spearman's rho of the
    pilot's per-item judge and human scores. CampaignError when the pilot cannot define it
    (fewer than 3 items, constant scores) or gives rho = +-1."""
    try:
        # Imported here: scikit-learn and scipy.stats take seconds to load, and only a
        # pilot needs them.
        from judge.stats.coefficient import BootstrapOptions
        from judge.stats.pairs import pair_agreement

        pilot = pair_agreement(
            np.asarray(judge, dtype=float),
            np.asarray(human, dtype=float),
            options=BootstrapOptions(n_bootstrap=0),
        )
    except ValueError as exc:
        raise CampaignError(f"the pilot's ratings cannot be used: {exc}") from None
    spearman = pilot.coefficients["spearman"]
    if spearman.undefined_reason is not None:
        raise CampaignError(
            f"the pilot does not define Spearman's rho ({spearman.undefined_reason}); "
            "plan without it or rate more items"
        )
    return size_for_half_width(
        half_width,
        spearman.value,
        rho_source=f"a pilot of {spearman.n} items",
        confidence=confidence,
    )
