"""One agreement coefficient, what happens when it is undefined, and the bootstrap options.

An undefined coefficient (constant ratings, too few items) is NaN and says why in
``undefined_reason``; the public functions of ``judge.stats`` emit one ``UndefinedWarning`` per
undefined coefficient they return (scikit-learn style), never an error. Callers that show the
reason themselves pass ``warn=False`` (thread-safe, unlike filtering warnings).

>>> Coefficient.undefined(2, "fewer than 3 items (n=2)").to_dict()["value"] is None
True
>>> BootstrapOptions(n_bootstrap=-1)
Traceback (most recent call last):
...
ValueError: n_bootstrap must be an integer >= 0, got -1
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray


class UndefinedWarning(UserWarning):
    """A coefficient is undefined for these data (constant ratings, too few items)."""


UndefinedAgreementWarning = UndefinedWarning  # the name before the stats package was split


@dataclass(frozen=True)
class BootstrapOptions:
    """How confidence intervals are computed: item bootstrap with percentile intervals.

    ``n_bootstrap`` resamples (0 = no intervals), ``seed`` of the resampling (None = fresh
    entropy, not reproducible), and the two-sided ``confidence`` level of the intervals.
    """

    n_bootstrap: int = 1000
    seed: int | None = 0
    confidence: float = 0.95

    def __post_init__(self) -> None:
        n = self.n_bootstrap
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
            raise ValueError(f"n_bootstrap must be an integer >= 0, got {n!r}")
        seed = self.seed
        if seed is not None and (
            isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0
        ):
            raise ValueError(f"seed must be None or an integer >= 0, got {seed!r}")
        c = self.confidence
        if isinstance(c, bool) or not isinstance(c, numbers.Real) or not 0 < c < 1:
            raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {c!r}")


DEFAULT_OPTIONS = BootstrapOptions()  # the default of every ``options`` argument


def check_options(options: object) -> BootstrapOptions:
    """``options`` itself, or TypeError naming the argument (e.g. a dict passed by mistake)."""
    if not isinstance(options, BootstrapOptions):
        raise TypeError(f"options must be a BootstrapOptions, got {type(options).__name__}")
    return options


@dataclass(frozen=True)
class Coefficient:
    """One agreement coefficient: value, bootstrap CI, p-value where defined, and n.

    ``undefined_reason`` is set (and ``value`` is NaN) when the data cannot define the
    coefficient, e.g. "constant ratings: the judge gave every item 4".
    """

    value: float
    ci_low: float
    ci_high: float
    p_value: float | None
    n: int
    undefined_reason: str | None = None

    @classmethod
    def undefined(cls, n: int, reason: str, *, p_value: float | None = None) -> Coefficient:
        return cls(math.nan, math.nan, math.nan, p_value, n, reason)

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: NaN and infinities become None."""
        return {
            "value": _json_number(self.value),
            "ci_low": _json_number(self.ci_low),
            "ci_high": _json_number(self.ci_high),
            "p_value": _json_number(self.p_value),
            "n": self.n,
            "undefined_reason": self.undefined_reason,
        }


def _json_number(v: float | None) -> float | None:
    if v is None or not math.isfinite(v):
        return None
    return float(v)


def warn_undefined(named: Iterable[tuple[str, Coefficient]], *, stacklevel: int = 3) -> None:
    """One ``UndefinedWarning`` per undefined coefficient; for the public functions only
    (internal helpers return the reason and stay silent). ``stacklevel`` 3 points at the
    caller of the public function that calls this."""
    for name, c in named:
        if c.undefined_reason is not None:
            warnings.warn(
                f"{name} is undefined for these data ({c.undefined_reason}); reported as NaN",
                UndefinedWarning,
                stacklevel=stacklevel,
            )


def as_vector(values: ArrayLike, name: str, *, missing: str = "unscored") -> NDArray[np.float64]:
    """``values`` as a 1-D array of finite floats, or ValueError naming ``name`` (a NaN asks
    the caller to drop the ``missing`` items first)."""
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a sequence of numbers") from None
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or infinite values; drop {missing} items first")
    return array
