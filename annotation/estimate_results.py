"""The results of ``annotation.estimates``: an estimate with its interval, a cell's three,
a gap's, the design the ratings were drawn by, and a judge run's whole set. Plain data
with their JSON shapes (``to_dict``: no NaN, JSON has none) and their words (``text``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from judge.stats.ppi import SMALL_N, MeanEstimate

JUDGE_ONLY, HUMAN_ONLY, PPI = "judge-only", "human-only", "prediction-powered"
ALL = "all"
ASSUMED = "assumed random"
JUDGED = "every item the judge scored"


def finite(value: Any) -> Any:
    """``value`` with NaN and infinities as None, in nested dicts and lists (JSON has no NaN).

    >>> finite({"a": [1.0, float("nan")], "b": float("inf")})
    {'a': [1.0, None], 'b': None}
    """
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class Estimate:
    """One estimate with its interval, in the target's unit. ``n``: rated items used (0 for
    judge-only); ``N``: items of the cell the judge scored. ``value`` is None when the
    estimate was refused, and ``reason`` says why."""

    method: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    se: float | None
    n: int
    N: int
    effective_n: float | None
    ratings_saved: float | None
    lam: float | None
    design: str
    small_sample: bool = False
    reason: str = ""
    interval: str = ""  # normal, "t, K df", Wilson, ... ("" when there is none)

    @classmethod
    def of(
        cls, m: MeanEstimate, method: str, N: int, design: str, bounds: tuple[float, float]
    ) -> Estimate:
        """From ``judge.stats.ppi``'s estimate, the interval clipped to ``bounds``; an
        interval of no width (every value the same) is given as none, with that reason."""
        low: float | None = max(bounds[0], m.ci_low)
        high: float | None = min(bounds[1], m.ci_high)
        effective, saved, lam = (finite(v) for v in (m.effective_n, m.ratings_saved, m.lam))
        reason, interval = "", m.interval
        if not m.ci_high > m.ci_low:
            low, high, interval = None, None, ""
            reason = f"no spread: the {m.n or N} values used are all the same"
        return cls(
            method, m.estimate, low, high, m.se, m.n, N, effective, saved, lam, design,
            m.small_sample, reason, interval,
        )  # fmt: skip

    @classmethod
    def refused(cls, method: str, n: int, N: int, design: str, reason: str) -> Estimate:
        return cls(method, None, None, None, None, n, N, None, None, None, design, False, reason)

    def to_dict(self) -> dict[str, Any]:
        return dict(finite(asdict(self)))

    def brief(self) -> dict[str, Any]:
        """Method, value and interval (a cell's ``best``)."""
        return finite({k: getattr(self, k) for k in ("method", "value", "ci_low", "ci_high")})

    def text(self, digits: int = 1, sign: str = "") -> str:
        """'62.5 [48.1, 76.9]', 'n/a' when refused (``sign="+"`` for a gap), or the value
        with why it has no interval: '80.0 (too few items for an interval (3; 5 needed))'."""
        f = f"{sign}.{digits}f"
        if self.value is not None and (self.ci_low is None or self.ci_high is None):
            return f"{self.value:{f}} ({self.reason or 'no interval'})"
        if self.value is None or self.ci_low is None or self.ci_high is None:
            return "n/a"
        return f"{self.value:{f}} [{self.ci_low:{f}}, {self.ci_high:{f}}]"


@dataclass(frozen=True)
class CellEstimate:
    """A stage metric (or a rubric's mean) for one factor, or for all items ("all")."""

    factor: str
    target: str  # the metric's name, or the rubric's
    label: str  # the metric's short label, or the rubric's name
    stage: str | None  # None for a rubric's mean (every stage it applies to)
    rubric: str
    unit: str  # "percent", or "score (1-5)" on the rubric's scale
    items: int  # items of the cell in the judge run, scored or not
    judge_only: Estimate
    human_only: Estimate
    prediction_powered: Estimate

    @property
    def best(self) -> Estimate:
        """Prediction-powered where people rated the cell, else judge-only."""
        ppi = self.prediction_powered
        return ppi if ppi.value is not None else self.judge_only

    @property
    def small_sample(self) -> bool:
        """Fewer than 30 rated items (but some): the row's mark (``SMALL_N``)."""
        return 0 < self.human_only.n < SMALL_N

    def to_dict(self) -> dict[str, Any]:
        out = {**finite(asdict(self)), "best": self.best.brief()}
        return {**out, "small_sample": self.small_sample}


@dataclass(frozen=True)
class GapEstimates:
    """Group A's value minus group B's for one target, three ways. Each method's gap is an
    ``Estimate`` (``n``, ``N``: both groups together) with the groups' own beside it."""

    target: str
    group_by: str
    a: str
    b: str
    unit: str
    judge_only: Estimate
    human_only: Estimate
    prediction_powered: Estimate
    groups: dict[str, tuple[Estimate, Estimate]]  # method -> (group A's, group B's)

    @property
    def best(self) -> Estimate:
        ppi = self.prediction_powered
        return ppi if ppi.value is not None else self.judge_only

    def to_dict(self) -> dict[str, Any]:
        out = finite(asdict(self))
        out["groups"] = {
            method: {"a": a.to_dict(), "b": b.to_dict()} for method, (a, b) in self.groups.items()
        }
        return {**out, "best": self.best.brief()}


@dataclass(frozen=True)
class Design:
    """How the rated items were drawn, as the ratings used tell it, and so how they are
    weighted. ``usable`` False: no human-only or prediction-powered estimate (``reason``)."""

    name: str  # random, stratified, disagreement, assumed random (...), refused, no ratings
    usable: bool
    description: str
    reason: str = ""
    campaign: str | None = None
    weights: Mapping[int, float] = field(default_factory=dict)  # item -> 1 / probability
    strata: Mapping[int, str] = field(default_factory=dict)  # item -> the campaign's stratum
    checked: dict[str, Any] | None = None  # the random-subset check (assumed random only)

    def to_dict(self) -> dict[str, Any]:
        fields = ("name", "usable", "description", "reason", "campaign")
        out: dict[str, Any] = {k: getattr(self, k) for k in fields}
        out["representativeness"] = finite(self.checked)
        return {**out, "weighted": bool(self.weights), "stratified": bool(self.strata)}


@dataclass(frozen=True)
class Estimates:
    """A judge run's corrected bias figures: stage metrics and rubric means per factor
    ("all" first), the gap asked for, the design assumed and the ratings used."""

    judge_run: int
    generation_run: int
    human_score: str
    alpha: float
    design: Design
    ratings_used: dict[str, Any]
    ratings_note: str
    metrics: list[CellEstimate]
    rubrics: list[CellEstimate]
    gap: GapEstimates | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            **{k: getattr(self, k) for k in ("judge_run", "generation_run", "human_score")},
            "alpha": self.alpha,
            "design": self.design.to_dict(),
            "ratings_used": dict(self.ratings_used),
            "ratings_note": self.ratings_note,
            "metrics": [c.to_dict() for c in self.metrics],
            "rubrics": [c.to_dict() for c in self.rubrics],
            "gap": None if self.gap is None else self.gap.to_dict(),
        }


@dataclass(frozen=True)
class GapQuery:
    """A gap to estimate: ``target`` (a stage metric's name or label, or a rubric) between
    the items whose ``group_by`` (factor, scenario, stage or fields.NAME) is ``a`` and ``b``."""

    target: str
    group_by: str
    a: str
    b: str
