"""The rule that calls a judge qualified for a rubric, from numbers already computed.

Pure: no store, no I/O. ``server/usecases/qualify.py`` computes the evidence (agreement
with intervals, the majority baseline, the alt-test) and stores the record; this module only
decides, criterion by criterion, with the thresholds of the config's ``[qualify]`` section
(``judge.config_qualify.QualifyConfig``), and says in one line what passed and what failed.

Every criterion compares an interval's *lower* end with its bound, so a figure the data
cannot tell from the bound fails: a kappa of 0.30 [-0.05, 0.62] is not "above 0". A
criterion whose figure is undefined (constant ratings) fails and says so; a criterion the
config turns off is left out.

>>> from judge.stats.coefficient import Coefficient
>>> good = Evidence(
...     rubric="SBAS", n_ratings=120, epsilon=0.15,
...     kappa=Coefficient(0.62, 0.51, 0.71, None, 120),
...     alpha=Coefficient(0.60, 0.48, 0.70, None, 120),
...     exact=Coefficient(0.80, 0.72, 0.87, None, 120),
...     majority=Coefficient(0.55, 0.47, 0.64, None, 120),
...     alt_test_passed=True, alt_test_omega=1.0,
... )
>>> for part in decide(good, QualifyConfig()).line.split("; "):
...     print(part)
qualified for SBAS at epsilon 0.15 on 120 ratings: weighted kappa 0.62 [0.51, 0.71] above 0
alpha 0.60 [0.48, 0.70] above 0
exact agreement 0.80 [0.72, 0.87] above the majority baseline 0.55
alt-test passes (omega 1.00)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from judge.config_qualify import QualifyConfig
from judge.stats.coefficient import Coefficient

QUALIFIED = "qualified"
FAILED = "failed"


@dataclass(frozen=True)
class Evidence:
    """What the rule reads for one rubric: weighted (quadratic) kappa, Krippendorff's alpha
    (interval) and exact agreement, each with its interval, the majority baseline's exact
    agreement, and the alt-test at ``epsilon`` (``alt_test_passed`` None when refused, with
    ``alt_test_refused`` the reason)."""

    rubric: str
    n_ratings: int
    epsilon: float
    kappa: Coefficient
    alpha: Coefficient
    exact: Coefficient
    majority: Coefficient
    alt_test_passed: bool | None = None
    alt_test_omega: float | None = None
    alt_test_refused: str | None = None


@dataclass(frozen=True)
class Criterion:
    """One criterion's outcome: a stable ``name`` and the sentence people read."""

    name: str
    passed: bool
    says: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "says": self.says}


@dataclass(frozen=True)
class Outcome:
    """The rule's verdict: ``qualified`` when every criterion passed, and the line."""

    rubric: str
    criteria: list[Criterion] = field(default_factory=list)
    line: str = ""

    @property
    def qualified(self) -> bool:
        return all(c.passed for c in self.criteria)

    @property
    def outcome(self) -> str:
        return QUALIFIED if self.qualified else FAILED

    @property
    def failed(self) -> list[Criterion]:
        return [c for c in self.criteria if not c.passed]

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "line": self.line,
            "criteria": [c.to_dict() for c in self.criteria],
        }


def _shown(c: Coefficient) -> str:
    if math.isfinite(c.ci_low) and math.isfinite(c.ci_high):
        return f"{c.value:.2f} [{c.ci_low:.2f}, {c.ci_high:.2f}]"
    return f"{c.value:.2f} (no interval)" if math.isfinite(c.value) else "undefined"


def _above(name: str, label: str, c: Coefficient, bound: float) -> Criterion:
    """Passes when the interval's lower end exceeds ``bound``."""
    if c.undefined_reason is not None or not math.isfinite(c.value):
        why = c.undefined_reason or "not a number"
        return Criterion(name, False, f"{label} is undefined ({why})")
    if not (math.isfinite(c.ci_low) and math.isfinite(c.ci_high)):
        return Criterion(name, False, f"{label} {_shown(c)}: its interval is undefined")
    if c.ci_low > bound:
        return Criterion(name, True, f"{label} {_shown(c)} above {bound:g}")
    return Criterion(name, False, f"{label} {_shown(c)}: its interval is not above {bound:g}")


def _majority(e: Evidence) -> Criterion:
    base = e.majority.value
    if not (math.isfinite(e.exact.value) and math.isfinite(base)):
        return Criterion("beat_majority", False, "exact agreement or its baseline is undefined")
    low = e.exact.ci_low if math.isfinite(e.exact.ci_low) else e.exact.value
    if low > base + 1e-12:
        return Criterion(
            "beat_majority",
            True,
            f"exact agreement {_shown(e.exact)} above the majority baseline {base:.2f}",
        )
    return Criterion(
        "beat_majority",
        False,
        f"exact agreement {_shown(e.exact)} is no better than always answering the majority "
        f"class ({base:.2f})",
    )


def _alt_test(e: Evidence) -> Criterion:
    if e.alt_test_passed is None:
        return Criterion("alt_test", False, f"alt-test refused ({e.alt_test_refused or '?'})")
    omega = f"omega {e.alt_test_omega:.2f}" if e.alt_test_omega is not None else "omega ?"
    if e.alt_test_passed:
        return Criterion("alt_test", True, f"alt-test passes ({omega})")
    return Criterion("alt_test", False, f"alt-test fails ({omega} < 0.5)")


def decide(evidence: Evidence, rule: QualifyConfig) -> Outcome:
    """Apply ``rule`` to ``evidence``: each criterion the config keeps, in a fixed order
    (kappa, alpha, majority baseline, alt-test), and the line, e.g. ``qualified for SBAS at
    epsilon 0.15 on 120 ratings: ...`` or ``not qualified for SBAS ...: failed: ...;
    passed: ...``."""
    criteria: list[Criterion] = []
    if rule.kappa_lower_bound is not None:
        criteria.append(_above("kappa", "weighted kappa", evidence.kappa, rule.kappa_lower_bound))
    if rule.alpha_lower_bound is not None:
        criteria.append(_above("alpha", "alpha", evidence.alpha, rule.alpha_lower_bound))
    if rule.beat_majority:
        criteria.append(_majority(evidence))
    if rule.require_alt_test:
        criteria.append(_alt_test(evidence))
    head = f"for {evidence.rubric} at epsilon {evidence.epsilon:g} on {evidence.n_ratings} ratings"
    failed = [c.says for c in criteria if not c.passed]
    passed = [c.says for c in criteria if c.passed]
    if not criteria:
        line = f"qualified {head}: the rule checks nothing ([qualify] turns every criterion off)"
    elif not failed:
        line = f"qualified {head}: " + "; ".join(passed)
    else:
        line = f"not qualified {head}: failed: " + "; ".join(failed)
        if passed:
            line += "; passed: " + "; ".join(passed)
    return Outcome(evidence.rubric, criteria, line)
