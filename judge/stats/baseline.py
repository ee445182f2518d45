"""The majority-class baseline and the flags that keep agreement from flattering a judge.

A rubric where most answers are fair rewards a judge that always says "fair": its raw
(exact) agreement equals the share of the humans' most frequent category. The baseline is
what that constant answer scores: its exact agreement (the humans' majority share), kappa 0
by construction (a constant side leaves nothing beyond chance), and its Gwet AC1.

Two flags are computed once here and carried with every judge-vs-human agreement:

- ``kappa_covers_zero``: Cohen's (unweighted) kappa, the chance-corrected form of exact
  agreement, has an interval reaching 0 (or, without an interval, a value at or below 0),
  whatever the raw agreement says.
- ``no_better_than_majority``: the lower end of the judge's exact-agreement interval (its value
  without one) does not exceed the majority baseline: the data cannot tell the judge from
  always answering the humans' most frequent category.

>>> share = majority_share(np.array([[10.0, 90.0]]))
>>> share.tolist(), round(float(majority_ac1(np.array([[10.0, 90.0]]))[0]), 6)
([0.9], 0.889503)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from judge.stats.coefficient import Coefficient
from judge.stats.gwet import Array, agreement_weights, gwet_from_margins

KAPPA_COVERS_ZERO = "kappa_covers_zero"
NO_BETTER_THAN_MAJORITY = "no_better_than_majority"
FLAG_CODES = (KAPPA_COVERS_ZERO, NO_BETTER_THAN_MAJORITY)
BASELINES = ("majority_baseline", "majority_baseline_ac1")  # keys in PairAgreement


@dataclass(frozen=True)
class Flag:
    """A warning about an agreement figure: a stable ``code`` (one of ``FLAG_CODES``) for
    programs and a ``message`` for people."""

    code: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message}


def majority_index(cols: Array) -> Array:
    """Per row of (B, q) category counts, the position of the most frequent category (the
    lowest one on a tie: a tie gives the same baseline whichever is chosen)."""
    return np.asarray(np.argmax(cols, axis=1))


def majority_share(cols: Array) -> Array:
    """(B,) exact agreement of always answering each row's most frequent category."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(cols.max(axis=1) / cols.sum(axis=1), dtype=np.float64)


def majority_ac1(cols: Array) -> Array:
    """(B,) Gwet's AC1 of the constant answer (each row's most frequent category) against
    the humans' (B, q) category counts."""
    n = cols.sum(axis=1)
    rows = np.zeros_like(cols)
    rows[np.arange(cols.shape[0]), majority_index(cols)] = n
    return gwet_from_margins(cols.max(axis=1), rows, cols, agreement_weights(cols.shape[1]))


def _lower(c: Coefficient) -> tuple[float, bool]:
    """The interval's lower end when there is one, else the value; and whether it was the
    interval."""
    if math.isfinite(c.ci_low) and math.isfinite(c.ci_high):
        return c.ci_low, True
    return c.value, False


def _interval(c: Coefficient) -> str:
    has = math.isfinite(c.ci_low) and math.isfinite(c.ci_high)
    return f"{c.value:.2f} [{c.ci_low:.2f}, {c.ci_high:.2f}]" if has else f"{c.value:.2f}"


def kappa_flag(kappa: Coefficient, exact: Coefficient, ac1: Coefficient) -> Flag | None:
    """``kappa_covers_zero`` when kappa is defined and cannot be told from 0."""
    if kappa.undefined_reason is not None or not math.isfinite(kappa.value):
        return None
    low, from_interval = _lower(kappa)
    if low > 0:
        return None
    said = "kappa's interval covers 0" if from_interval else "kappa is not above 0"
    also = f"; AC1 {ac1.value:.2f}" if math.isfinite(ac1.value) else ""
    return Flag(
        KAPPA_COVERS_ZERO,
        f"{said} (kappa {_interval(kappa)}) although raw agreement is {exact.value:.2f}{also}",
    )


def majority_flag(exact: Coefficient, baseline: Coefficient, label: float | None) -> Flag | None:
    """``no_better_than_majority`` when the judge's exact agreement does not exceed what
    always answering the humans' most frequent category (``label``) scores."""
    if exact.undefined_reason is not None or baseline.undefined_reason is not None:
        return None
    if not (math.isfinite(exact.value) and math.isfinite(baseline.value)):
        return None
    low, _ = _lower(exact)
    if low > baseline.value + 1e-12:
        return None
    answer = f"always answering {label:g}" if label is not None else "a constant answer"
    return Flag(
        NO_BETTER_THAN_MAJORITY,
        f"no better than always answering the majority class: exact agreement "
        f"{_interval(exact)} against {baseline.value:.2f} for {answer}",
    )


def agreement_flags(coefficients: Mapping[str, Coefficient], label: float | None) -> list[Flag]:
    """Both flags that apply to one judge-vs-human agreement (``judge.stats.pairs``'s
    coefficients), in ``FLAG_CODES`` order; ``label`` is the humans' majority category."""
    exact = coefficients["exact_agreement"]
    found = [
        kappa_flag(coefficients["kappa"], exact, coefficients["ac1"]),
        majority_flag(exact, coefficients["majority_baseline"], label),
    ]
    return [f for f in found if f is not None]
