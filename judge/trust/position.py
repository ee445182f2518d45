"""Position (order) bias of a judge run judged in both orders (``fairjudge judge --swap-order``).

After Shi et al., "Judging the Judges: A Systematic Study of Position Bias in LLM-as-a-Judge"
(arXiv 2406.07791): every pair is judged with its two sides in both orders, and two numbers
summarise the outcome, each with a percentile bootstrap CI over pairs (seeded):

* **Position consistency (PC)**: the share of pairs whose verdict is the same in both orders.
* **Preference fairness (PF)**: which position the judge favours, in [-1, 1]; 0 is fair, > 0
  favours the later position (recency), < 0 the earlier one (primacy). The paper's raw score
  is rc * rc/(pc+rc) - pc * pc/(pc+rc) over the counts of recency- (rc) and primacy-preferring
  (pc) pairs, which is rc - pc; min-max scaled between its extremes -n (every pair primacy)
  and +n (every pair recency), as the paper scales it, it is (rc - pc) / n over n pairs.
  That is the mean of a per-pair value (+1 recency, -1 primacy, 0 consistent), so its CI
  resamples pairs like PC's.

FairJudge scores a pair 1-5 instead of choosing one side, so a verdict is read from the
scores. Every pair rubric rates side B (the story with the changed factor, the answer to the
question with the implied stereotype) against side A: a higher score is the more favourable
verdict for B. As given B is shown second; swapped, first. Per pair, with each order's
samples combined first as the run combines them (mean, or majority):

* same score in both orders: consistent (the paper's AB, BA and CC);
* higher as given (B shown last scores better): recency-preferring;
* higher swapped (B shown first scores better): primacy-preferring.

So PF > 0 means the pair scores higher when B comes last, and the mean change (swapped minus
given) is then negative. Repetition stability (the paper's check that a verdict is not
chance) is given when the run took several samples: per pair and order, the share of
samples giving the most frequent score, averaged.

A rubric is **flagged** when either holds:

* *inconsistent*: PC's CI upper bound is below ``min_consistency`` (default 0.8): with 95 %
  confidence the order changes the score in more than a fifth of the pairs, whatever the
  direction (a judge that flips at random has PF near 0 and a mean change near 0, so only PC
  sees it);
* *one-sided*: PF's CI excludes 0 and the mean change's size exceeds the tolerance (the
  score points the user accepts; 0: any).

A CI needs two pairs; with fewer nothing is flagged.

**Many rubrics, one reader.** A run checks several pair rubrics, each with up to two claims
("inconsistent", and "one-sided" where a preference applies), and any one flag reads as "this
judge is order-biased". So ``order_bias`` decides the flags from intervals at the
simultaneous (Bonferroni) confidence ``judge.stats.multiplicity.simultaneous_confidence(
level, m)`` over the ``m`` claims of the run: all of them hold together with at least
``level``, so the chance of any false flag stays at or below ``1 - level``. The flags rest
on intervals, not p-values, so Bonferroni's simultaneous intervals are the correction that
fits (Holm adjusts p-values). The intervals shown stay at ``level``; the one-claim
``flag_reasons`` reads the intervals it is given.

**Which rubrics get preference fairness.** Primacy, recency and PF describe a judge that
favours one of two texts; they mean something only where a higher score favours one side.
SBAS rates answer B against answer A (a higher score is better for B), and so does any pair
rubric of one's own. TCS, PCS and ETCS score how *similar* the two stories are: neither side
is preferred by a higher score, so "higher as given" is not a preference for the last
position. For them (``SIMILARITY_RUBRICS``) only PC is given, and only "inconsistent" can flag
them; the output says why PF is not shown.

**Unreadable verdicts**, as Shi et al. count them (their code counts a pair in PC only when
both orders gave a readable verdict, but scales PF by every pair judged): a pair with an
order unscored ("unpaired" here) is left out of PC's denominator and kept in PF's, where it
counts as neither primacy nor recency. So PF = (rc - pc) / (pairs + unreadable).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import select as columns
from sqlmodel import Session, col

from judge.metrics import aggregate
from judge.stats.multiplicity import simultaneous_confidence
from judge.stats.tests import PairedShift, paired_shift
from judge.store.queries import get_judge_run, sample_slot
from judge.store.tables import Judgment

LEVEL = 0.95
N_BOOTSTRAP = 2000
SEED = 0
MIN_CONSISTENCY = 0.8
"""PC below which (CI upper bound) a rubric is flagged: the order changes more than a fifth
of the verdicts. The paper sets no threshold; this one is ours."""

NAN = float("nan")

SIMILARITY_RUBRICS = frozenset({"TCS", "PCS", "ETCS"})
"""Built-in pair rubrics that score how similar the two sides are, so no side is preferred:
position consistency only (see the module docstring)."""
NOT_A_PREFERENCE = (
    "a similarity score (how alike the two sides are): a higher score favours neither side, "
    "so primacy, recency and preference fairness have no meaning here; position consistency "
    "only"
)


def judges_a_preference(rubric: str) -> bool:
    """Whether a higher score of this pair rubric favours one side (B), so that primacy,
    recency and preference fairness apply: every pair rubric but the similarity ones."""
    return rubric not in SIMILARITY_RUBRICS


def verdicts(given: Sequence[float], swapped: Sequence[float]) -> np.ndarray:
    """Per pair: +1 recency-preferring (higher as given, side B shown last), -1
    primacy-preferring (higher swapped), 0 consistent.

    >>> verdicts([5, 3, 2], [2, 3, 4]).tolist()
    [1, 0, -1]
    """
    g = np.asarray(list(given), dtype=float)
    s = np.asarray(list(swapped), dtype=float)
    if g.shape != s.shape:
        raise ValueError(f"given and swapped differ in length: {g.size} and {s.size}")
    return np.sign(np.round(g - s, 9)).astype(int)


@dataclass(frozen=True)
class PositionStats:
    """PC and PF with their CIs for one set of pairs (NaN where undefined)."""

    n: int
    consistent: int
    primacy: int
    recency: int
    consistency: float
    consistency_low: float
    consistency_high: float
    fairness: float
    fairness_low: float
    fairness_high: float
    level: float
    unreadable: int = 0  # pairs with an order unscored: in PF's denominator, not in PC's


def position_stats(
    given: Sequence[float],
    swapped: Sequence[float],
    *,
    level: float = LEVEL,
    n_bootstrap: int = N_BOOTSTRAP,
    seed: int = SEED,
    unreadable: int = 0,
) -> PositionStats:
    """PC and PF of paired scores (each order's samples already combined), with percentile
    bootstrap CIs resampling pairs from a generator seeded with ``seed``. ``unreadable``:
    pairs judged with an order that gave no readable verdict, kept in PF's denominator (as
    Shi et al. scale it) and left out of PC's.

    >>> s = position_stats([5, 5, 3, 4], [2, 5, 3, 5])
    >>> (s.consistent, s.primacy, s.recency, s.consistency, s.fairness)
    (2, 1, 1, 0.5, 0.0)
    >>> position_stats([5, 3], [2, 3], unreadable=2).fairness  # (1 - 0) / (2 + 2)
    0.25
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level!r}")
    if unreadable < 0:
        raise ValueError(f"unreadable must be non-negative, got {unreadable!r}")
    v = verdicts(given, swapped)
    n = int(v.size)
    consistent, primacy, recency = int((v == 0).sum()), int((v < 0).sum()), int((v > 0).sum())
    if n == 0:
        return PositionStats(0, 0, 0, 0, NAN, NAN, NAN, NAN, NAN, NAN, level, unreadable)
    total = n + unreadable
    pc, pf = consistent / n, (recency - primacy) / total
    pc_low = pc_high = pf_low = pf_high = NAN
    if n >= 2 and n_bootstrap > 0:
        # every judged pair is resampled; an unreadable one is NaN: out of PC, 0 in PF
        w = np.concatenate([v.astype(float), np.full(unreadable, np.nan)])
        draws = np.random.default_rng(seed).integers(0, total, size=(n_bootstrap, total))
        sample = w[draws]
        readable = (~np.isnan(sample)).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            pcs = (sample == 0).sum(axis=1) / readable
        pfs = np.nan_to_num(sample, nan=0.0).mean(axis=1)
        tails = [(1 - level) / 2 * 100, (1 + level) / 2 * 100]
        pc_low, pc_high = (float(x) for x in np.nanpercentile(pcs, tails))
        pf_low, pf_high = (float(x) for x in np.percentile(pfs, tails))
    return PositionStats(
        n, consistent, primacy, recency, pc, pc_low, pc_high, pf, pf_low, pf_high, level,
        unreadable,
    )  # fmt: skip


def repetition_stability(repeats: Sequence[Sequence[int]]) -> float | None:
    """Mean over (pair, order) cells with two or more scored samples of the share of samples
    giving the cell's most frequent score; None when no cell has two.

    >>> repetition_stability([[4, 4], [3, 5], [2]])
    0.75
    """
    shares = [Counter(r).most_common(1)[0][1] / len(r) for r in repeats if len(r) >= 2]
    return float(np.mean(shares)) if shares else None


@dataclass(frozen=True)
class PositionRow:
    """One rubric's order check: the mean score change (swapped minus given, as
    ``paired_shift`` reports it), PC and PF, repetition stability, pairs with an order
    unscored (``unpaired``), and the flag with its reasons."""

    rubric: str
    shift: PairedShift
    stats: PositionStats
    repetition_stability: float | None
    unpaired: int
    flagged: bool
    reasons: list[str] = field(default_factory=list)
    preference: bool = True  # False: a similarity rubric, position consistency only

    def to_json(self) -> dict[str, Any]:
        s, p = self.shift, self.stats
        pref = self.preference
        return {
            "rubric": self.rubric,
            "pairs": p.n,
            "consistent": p.consistent,
            "primacy_preferring": p.primacy if pref else None,
            "recency_preferring": p.recency if pref else None,
            "inconsistent": p.primacy + p.recency,
            "position_consistency": _finite(p.consistency),
            "position_consistency_ci": [_finite(p.consistency_low), _finite(p.consistency_high)],
            "preference_fairness": _finite(p.fairness) if pref else None,
            "preference_fairness_ci": [
                _finite(p.fairness_low) if pref else None,
                _finite(p.fairness_high) if pref else None,
            ],
            "preference_fairness_shown": pref,
            "preference_fairness_note": None if pref else NOT_A_PREFERENCE,
            "repetition_stability": self.repetition_stability,
            "level": p.level,
            "changed": s.changed,
            "share_changed": _finite(s.share_changed),
            "mean_difference": _finite(s.mean_difference),
            "ci_low": _finite(s.ci_low),
            "ci_high": _finite(s.ci_high),
            "wilcoxon_statistic": _finite(s.wilcoxon_statistic),
            "p_value": _finite(s.p_value),
            "tested": s.tested,
            "reason": s.reason,
            "unpaired": self.unpaired,
            "flagged": self.flagged,
            "flag_reasons": self.reasons,
        }


@dataclass(frozen=True)
class OrderResult:
    """The order check of one judge run, per pair rubric."""

    judge_run_id: int
    tolerance: float
    min_consistency: float
    samples: int
    aggregation: str
    rubrics: list[PositionRow]
    flag_level: float = LEVEL
    """The simultaneous confidence of the intervals the flags were decided on."""

    @property
    def flagged(self) -> list[str]:
        return [r.rubric for r in self.rubrics if r.flagged]

    def to_json(self) -> dict[str, Any]:
        return {
            "judge_run_id": self.judge_run_id,
            "tolerance": self.tolerance,
            "min_consistency": self.min_consistency,
            "samples_per_order": self.samples,
            "aggregation": self.aggregation,
            "verdict": "per pair, each order's samples combined; consistent when the two "
            "orders score the same, recency-preferring when the pair scores higher with side "
            "B shown last (as given), primacy-preferring when higher with B first (swapped)",
            "flag_rule": f"position consistency's CI upper bound below {self.min_consistency:g}"
            ", or (rubrics that judge a preference) preference fairness's CI excluding 0 with "
            f"a mean change larger than the tolerance ({self.tolerance:g}); decided on "
            f"intervals at {self.flag_level:.4g} confidence, Bonferroni over the run's "
            "claims, so that all of them hold together",
            "correction": "bonferroni",
            "flag_level": self.flag_level,
            "unreadable_rule": "a pair with an order unscored is left out of position "
            "consistency and kept in preference fairness's denominator (Shi et al.)",
            "flagged": self.flagged,
            "rubrics": [r.to_json() for r in self.rubrics],
        }


def _finite(x: float) -> float | None:
    return None if x != x or x in (float("inf"), float("-inf")) else float(x)


Orders = dict[int, dict[str, list[int]]]
"""Item -> order ("given", "swapped") -> its scored samples (an order may be empty)."""


def load_orders(session: Session, judge_run_id: int) -> dict[str, Orders]:
    """Rubric -> every judged pair's scored samples per order, from a run judged in both
    orders (rubrics judged in one order are left out). Unscored samples are left out; an
    order with none is an empty list, so its pair counts as unpaired, never as a score."""
    jrun = get_judge_run(session, judge_run_id)
    out: dict[str, Orders] = defaultdict(dict)
    for item_id, rubric, sample, position, status, score in session.execute(
        columns(
            col(Judgment.item_id), col(Judgment.rubric), col(Judgment.sample_index),
            col(Judgment.position), col(Judgment.status), col(Judgment.score),
        ).where(col(Judgment.judge_run_id) == judge_run_id, col(Judgment.position).is_not(None))
    ):  # fmt: skip
        order = sample_slot(sample, position, jrun.samples).order
        assert order is not None  # the query keeps judgments with a position only
        cell = out[rubric].setdefault(item_id, {"given": [], "swapped": []})
        if status == "scored" and score is not None:
            cell[order].append(score)
    return dict(out)


def _how(aggregation: str) -> str:
    # logprob runs combine their sampled scores by the mean, as item scores do
    return aggregation if aggregation in ("mean", "majority") else "mean"


def order_bias(
    session: Session,
    judge_run_id: int,
    *,
    tolerance: float = 0.0,
    min_consistency: float = MIN_CONSISTENCY,
    level: float = LEVEL,
    n_bootstrap: int = N_BOOTSTRAP,
    seed: int = SEED,
) -> OrderResult | None:
    """The order check of a judge run per pair rubric; None for a run not judged in both
    orders."""
    jrun = get_judge_run(session, judge_run_id)
    if not jrun.swap_order:
        return None
    how = _how(jrun.aggregation)
    rows, flag_level = order_rows(
        load_orders(session, judge_run_id), how, tolerance=tolerance,
        min_consistency=min_consistency, level=level, n_bootstrap=n_bootstrap, seed=seed,
    )  # fmt: skip
    return OrderResult(
        judge_run_id, tolerance, min_consistency, jrun.samples, how, rows, flag_level
    )


def claims(rubrics: Sequence[str]) -> int:
    """The flag claims of an order check over these rubrics: "inconsistent" for each, and
    "one-sided" for each that judges a preference."""
    return sum(2 if judges_a_preference(r) else 1 for r in rubrics)


def order_rows(
    orders: dict[str, Orders],
    how: str = "mean",
    *,
    tolerance: float = 0.0,
    min_consistency: float = MIN_CONSISTENCY,
    level: float = LEVEL,
    n_bootstrap: int = N_BOOTSTRAP,
    seed: int = SEED,
) -> tuple[list[PositionRow], float]:
    """One row per rubric of ``orders`` (``load_orders``'s shape), each order's samples
    combined by ``how``; flags decided on intervals at the simultaneous confidence over the
    rubrics' claims (returned beside the rows), the rows' intervals at ``level``."""
    flag_level = simultaneous_confidence(level, claims(list(orders)))
    rows = []
    for rubric, pairs in sorted(orders.items()):
        given: list[float] = []
        swapped: list[float] = []
        repeats: list[list[int]] = []
        unpaired = 0
        for item_id in sorted(pairs):
            cell = pairs[item_id]
            a, b = aggregate(cell["given"], how), aggregate(cell["swapped"], how)
            if a is None or b is None:
                unpaired += 1
                continue
            given.append(float(a))
            swapped.append(float(b))
            repeats += [cell["given"], cell["swapped"]]
        shift = paired_shift(given, swapped, level=level, n_bootstrap=n_bootstrap, seed=seed)
        stats = position_stats(
            given, swapped, level=level, n_bootstrap=n_bootstrap, seed=seed, unreadable=unpaired
        )
        judged = stats
        if flag_level != level:
            judged = position_stats(
                given, swapped, level=flag_level, n_bootstrap=n_bootstrap, seed=seed,
                unreadable=unpaired,
            )  # fmt: skip
        preference = judges_a_preference(rubric)
        reasons = flag_reasons(judged, shift, tolerance, min_consistency, preference=preference)
        rows.append(
            PositionRow(
                rubric, shift, stats, repetition_stability(repeats), unpaired, bool(reasons),
                reasons, preference,
            )
        )  # fmt: skip
    return rows, flag_level


def flag_reasons(
    stats: PositionStats,
    shift: PairedShift,
    tolerance: float,
    min_consistency: float,
    *,
    preference: bool = True,
) -> list[str]:
    """Why a rubric is flagged (empty: not flagged): "inconsistent", and "primacy" or
    "recency" for a one-sided judge of a rubric that judges a preference (``preference``;
    a similarity rubric is only ever "inconsistent"); see the module docstring."""
    reasons = []
    if stats.consistency_high == stats.consistency_high and stats.consistency_high < (
        min_consistency
    ):
        reasons.append("inconsistent")
    excludes_zero = stats.fairness_low > 0 or stats.fairness_high < 0  # False for NaN
    if preference and excludes_zero and (tolerance == 0 or abs(shift.mean_difference) > tolerance):
        reasons.append("primacy" if stats.fairness < 0 else "recency")
    return reasons
