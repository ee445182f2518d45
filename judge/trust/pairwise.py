"""Imported pairwise verdicts, per judge: position bias, repetition stability, win rates and
Bradley-Terry strengths (``fairjudge judgments position``).

A *pair* is one question's two answers judged in both orders in one repetition. Its two
verdicts are positions (A: the answer shown first, B: second, or a tie), read with Shi et al.'s
rule table ("Judging the Judges", arXiv 2406.07791): AB, BA and tie-tie are consistent; AA,
A-tie and tie-A prefer the first position (primacy); BB, B-tie and tie-B the second (recency).
Position consistency (PC) and preference fairness (PF) are ``judge.trust.position``'s
``position_stats`` on those pairs, so they follow the paper exactly as the judge-run check
does: a pair with an unreadable verdict is left out of PC and kept in PF's denominator, where it
counts as neither side. Every repetition's pairs are pooled per judge; PC's and PF's intervals
resample (question, model pair) clusters, a pair's repetitions together
(``judge.stats.cluster_ratio``). A judge is flagged as
the judge-run check flags a rubric (``flag_reasons``, tolerance 0): "inconsistent" when PC's
CI upper bound is below ``min_consistency``, "primacy" or "recency" when PF's CI excludes 0;
decided on intervals at the Bonferroni simultaneous confidence over the judges' claims (two
per judge).

**Repetition stability (RS)**, as the authors compute it: for each question and order (a
judgment prompt), the share of its repetitions giving its most frequent readable verdict, an
unreadable verdict counting in the number of repetitions but never as the most frequent;
prompts with no readable verdict are left out; RS is the mean over prompts. It needs two
repetitions or more (else None).

**Outcomes.** A consistent pair's outcome is its verdict (a win for one model, or a tie). An
inconsistent pair (the verdict follows the position) is counted as a tie (``inconsistent=
"tie"``, the default, said so in the output) or kept apart (``"apart"``): left out of the win
rates and of Bradley-Terry and counted on its own. A pair with an unreadable verdict has no
outcome and is counted as such.

**Win rates** per model pair: wins, ties and losses as shares of the pairs with an outcome,
each with a Wilson score interval (``scipy.stats.binomtest``'s). Repetitions are counted as
separate pairs, so the intervals treat them as independent (the output says so).
**Bradley-Terry** (``judge.stats.bradley_terry``) for a judge with three models or more: a tie
is half a win each; intervals by a bootstrap over (question, model pair) clusters, all
repetitions of a comparison resampled together.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
from scipy.stats import binomtest
from sqlalchemy import select
from sqlmodel import Session, col

from judge.stats.bradley_terry import bootstrap_intervals, bradley_terry, win_matrix
from judge.stats.cluster_ratio import ratio_intervals
from judge.stats.multiplicity import simultaneous_confidence
from judge.stats.tests import PairedShift
from judge.store.pairwise_tables import PairwiseVerdict
from judge.trust.position import MIN_CONSISTENCY, PositionStats, flag_reasons, position_stats

Inconsistent = Literal["tie", "apart"]
LEVEL = 0.95
N_BOOTSTRAP = 1000
SEED = 0
# One order's verdict as a score for the pair's second-named model (see ``_scores``).
GIVEN_SCORE = {"B": 3.0, "tie": 2.0, "A": 1.0}
SWAPPED_SCORE = {"A": 3.0, "tie": 2.0, "B": 1.0}
NAN = float("nan")
NO_SHIFT = PairedShift(0, 0, NAN, NAN, NAN, NAN, LEVEL, NAN, NAN, False, "verdicts, not scores")
"""``flag_reasons`` reads a mean score change only with a tolerance above 0; verdicts have
none, so the flags here are decided with tolerance 0 on PC and PF alone."""
INCONSISTENT_NOTE = {
    "tie": "an inconsistent pair (the verdict follows the position) is counted as a tie",
    "apart": "an inconsistent pair (the verdict follows the position) is kept apart: left "
    "out of the win rates and Bradley-Terry, counted as inconsistent",
}


@dataclass(frozen=True)
class Verdict:
    """One stored judgment: judge, question, models as shown, repetition, verdict."""

    judge: str
    question: str
    first: str
    second: str
    repetition: int
    verdict: str


@dataclass(frozen=True)
class Pair:
    """One question's pair judged in both orders in one repetition, named by its models in
    sorted order (``low`` < ``high``): ``given`` is the verdict with ``low`` shown first,
    ``swapped`` with ``high`` first."""

    question: str
    low: str
    high: str
    repetition: int
    given: str
    swapped: str

    @property
    def readable(self) -> bool:
        return "unreadable" not in (self.given, self.swapped)

    def winners(self) -> tuple[str, str]:
        """Each order's winner as a model name, or "tie"."""
        g = {"A": self.low, "B": self.high, "tie": "tie"}[self.given]
        s = {"A": self.high, "B": self.low, "tie": "tie"}[self.swapped]
        return g, s


@dataclass(frozen=True)
class PairRates:
    """One model pair's outcomes for one judge: ``model`` against ``other``."""

    model: str
    other: str
    n: int
    wins: int
    ties: int
    losses: int
    inconsistent: int
    unreadable: int
    intervals: dict[str, tuple[float | None, float | None]]

    def to_json(self) -> dict[str, Any]:
        share = {k: (v / self.n if self.n else None) for k, v in self.counts().items()}
        return {
            "model": self.model, "other": self.other, "pairs": self.n, **self.counts(),
            "inconsistent": self.inconsistent, "unreadable": self.unreadable,
            **{f"{k}_rate": share[k] for k in share},
            **{f"{k}_rate_ci": list(self.intervals[k]) for k in share},
        }  # fmt: skip

    def counts(self) -> dict[str, int]:
        return {"wins": self.wins, "ties": self.ties, "losses": self.losses}


@dataclass(frozen=True)
class Strength:
    """A model's centred Bradley-Terry log-strength with its bootstrap interval."""

    model: str
    strength: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True)
class JudgeFigures:
    """One judge's figures over every imported verdict of it."""

    judge: str
    models: list[str]
    questions: int
    repetitions: list[int]
    judgments: int
    unreadable_judgments: int
    position: PositionStats
    repetition_stability: float | None
    stability_prompts: int
    flagged: bool
    reasons: list[str]
    rates: list[PairRates]
    strengths: list[Strength] | None
    strengths_note: str
    bootstrap_without_estimate: int = 0

    def to_json(self) -> dict[str, Any]:
        p = self.position
        return {
            "judge": self.judge, "models": self.models, "questions": self.questions,
            "repetitions": self.repetitions, "judgments": self.judgments,
            "unreadable_judgments": self.unreadable_judgments,
            "pairs": p.n + p.unreadable, "readable_pairs": p.n, "unreadable_pairs": p.unreadable,
            "consistent": p.consistent, "primacy_preferring": p.primacy,
            "recency_preferring": p.recency,
            "position_consistency": _finite(p.consistency),
            "position_consistency_ci": [_finite(p.consistency_low), _finite(p.consistency_high)],
            "preference_fairness": _finite(p.fairness),
            "preference_fairness_ci": [_finite(p.fairness_low), _finite(p.fairness_high)],
            "repetition_stability": self.repetition_stability,
            "stability_prompts": self.stability_prompts,
            "flagged": self.flagged, "flag_reasons": self.reasons,
            "win_rates": [r.to_json() for r in self.rates],
            "bradley_terry": None if self.strengths is None else [
                {"model": s.model, "strength": s.strength, "ci": [s.low, s.high]}
                for s in self.strengths
            ],
            "bradley_terry_note": self.strengths_note,
            "bootstrap_without_estimate": self.bootstrap_without_estimate,
        }  # fmt: skip


@dataclass(frozen=True)
class PairwiseResult:
    """Every judge's figures, and the rules they were computed with."""

    judges: list[JudgeFigures]
    inconsistent: Inconsistent
    level: float
    flag_level: float
    min_consistency: float
    n_bootstrap: int
    seed: int
    notes: list[str] = field(default_factory=list)

    @property
    def flagged(self) -> list[str]:
        return [j.judge for j in self.judges if j.flagged]

    def to_json(self) -> dict[str, Any]:
        return {
            "inconsistent": self.inconsistent,
            "inconsistent_rule": INCONSISTENT_NOTE[self.inconsistent],
            "level": self.level,
            "flag_level": self.flag_level,
            "min_consistency": self.min_consistency,
            "n_bootstrap": self.n_bootstrap,
            "seed": self.seed,
            "flagged": self.flagged,
            "notes": self.notes,
            "judges": [j.to_json() for j in self.judges],
        }


def _finite(x: float) -> float | None:
    return None if x != x or x in (float("inf"), float("-inf")) else float(x)


def load_verdicts(session: Session, judge: str | None = None) -> list[Verdict]:
    """The stored verdicts, of one judge or all."""
    v = PairwiseVerdict
    query = select(
        col(v.judge), col(v.question), col(v.model_first), col(v.model_second),
        col(v.repetition), col(v.verdict),
    )  # fmt: skip
    if judge is not None:
        query = query.where(col(v.judge) == judge)
    return [Verdict(*row) for row in session.execute(query)]


def pairs_of(verdicts: Iterable[Verdict]) -> list[Pair]:
    """Both orders of each pair joined; a judgment whose other order is missing is skipped
    (the import refuses such files, so none is stored)."""
    orders: dict[tuple[str, str, str, int], dict[bool, str]] = defaultdict(dict)
    for v in verdicts:
        low, high = sorted((v.first, v.second))
        orders[(v.question, low, high, v.repetition)][v.first == low] = v.verdict
    return [
        Pair(q, low, high, rep, o[True], o[False])
        for (q, low, high, rep), o in sorted(orders.items())
        if len(o) == 2
    ]


def _scores(pairs: Sequence[Pair]) -> tuple[list[float], list[float], int]:
    """Readable pairs as scores of the ``high`` model (3 won, 2 tie, 1 lost) as given (shown
    second) and swapped (shown first), and the unreadable count: the reading under which
    ``position_stats`` classes AA as primacy and BB as recency (``judge.trust.position``)."""
    readable = [p for p in pairs if p.readable]
    given = [GIVEN_SCORE[p.given] for p in readable]
    swapped = [SWAPPED_SCORE[p.swapped] for p in readable]
    return given, swapped, len(pairs) - len(readable)


def repetition_stability(verdicts: Iterable[Verdict]) -> tuple[float | None, int]:
    """RS (see the module docstring) and the number of prompts it averages over.

    >>> vs = [Verdict("j", "q", "x", "y", r, v) for r, v in enumerate(["A", "A", "B"], 1)]
    >>> vs += [Verdict("j", "q", "y", "x", r, v) for r, v in enumerate(["B", "unreadable"], 1)]
    >>> repetition_stability(vs)  # (2/3 + 1/2) / 2
    (0.5833333333333333, 2)
    """
    prompts: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for v in verdicts:
        prompts[(v.question, v.first, v.second)].append(v.verdict)
    shares = []
    for said in prompts.values():
        readable = Counter(x for x in said if x != "unreadable")
        if len(said) >= 2 and readable:
            shares.append(readable.most_common(1)[0][1] / len(said))
    return (float(np.mean(shares)) if shares else None), len(shares)


def outcomes(
    pairs: Sequence[Pair], inconsistent: Inconsistent
) -> tuple[list[tuple[Pair, str]], Counter[tuple[str, str]], Counter[tuple[str, str]]]:
    """Each pair with an outcome (a model's name or "tie"), and per (low, high) the pairs
    counted inconsistent and unreadable."""
    counted: list[tuple[Pair, str]] = []
    apart: Counter[tuple[str, str]] = Counter()
    unreadable: Counter[tuple[str, str]] = Counter()
    for p in pairs:
        if not p.readable:
            unreadable[(p.low, p.high)] += 1
            continue
        g, s = p.winners()
        if g == s:
            counted.append((p, g))
            continue
        apart[(p.low, p.high)] += 1
        if inconsistent == "tie":
            counted.append((p, "tie"))
    return counted, apart, unreadable


def wilson(k: int, n: int, level: float) -> tuple[float | None, float | None]:
    """Wilson score interval of k successes in n (None, None for n = 0)."""
    if n == 0:
        return None, None
    ci = binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
    return float(ci.low), float(ci.high)


def win_rates(pairs: Sequence[Pair], inconsistent: Inconsistent, level: float) -> list[PairRates]:
    """Per model pair (``low`` against ``high``): wins, ties, losses with Wilson intervals."""
    counted, apart, unreadable = outcomes(pairs, inconsistent)
    by_pair: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for p, outcome in counted:
        by_pair[(p.low, p.high)][outcome] += 1
    rows = []
    for low, high in sorted(set(by_pair) | set(apart) | set(unreadable)):
        c = by_pair[(low, high)]
        n = sum(c.values())
        wins, ties, losses = c[low], c["tie"], c[high]
        intervals = {
            "wins": wilson(wins, n, level), "ties": wilson(ties, n, level),
            "losses": wilson(losses, n, level),
        }  # fmt: skip
        rows.append(
            PairRates(
                low, high, n, wins, ties, losses, apart[(low, high)], unreadable[(low, high)],
                intervals,
            )
        )  # fmt: skip
    return rows


def strengths(
    pairs: Sequence[Pair],
    models: Sequence[str],
    inconsistent: Inconsistent,
    *,
    level: float,
    n_bootstrap: int,
    seed: int,
) -> tuple[list[Strength] | None, str, int]:
    """Bradley-Terry strengths of ``models`` from the pairs' outcomes (ties half a win each),
    with cluster-bootstrap intervals; None and the reason when there are fewer than three
    models or the estimate does not exist."""
    if len(models) < 3:
        return None, f"Bradley-Terry needs three models or more; this judge has {len(models)}", 0
    index = {m: k for k, m in enumerate(models)}
    counted, _, _ = outcomes(pairs, inconsistent)
    first = [index[p.low] for p, _ in counted]
    second = [index[p.high] for p, _ in counted]
    score = [1.0 if o == p.low else 0.0 if o == p.high else 0.5 for p, o in counted]
    ids: dict[tuple[str, str, str], int] = {}
    clusters = [ids.setdefault((p.question, p.low, p.high), len(ids)) for p, _ in counted]
    fit = bradley_terry(win_matrix(first, second, score, len(models)))
    if not fit.estimable:
        return None, (
            "no maximum-likelihood estimate: some group of models never beat or tied the "
            "others (or a model was never compared), so its strength is unbounded"
        ), 0  # fmt: skip
    boot = bootstrap_intervals(
        first, second, score, clusters, len(models), level=level, n_bootstrap=n_bootstrap,
        seed=seed,
    )  # fmt: skip
    rows = [
        Strength(m, float(fit.strengths[k]), _finite(boot.low[k]), _finite(boot.high[k]))
        for k, m in enumerate(models)
    ]
    note = (
        "centred log-strengths (mean 0); a tie is half a win each; intervals: percentile "
        f"bootstrap over (question, model pair) clusters, {n_bootstrap} resamples, seed {seed}"
    )
    if boot.without_estimate:
        note += f"; {boot.without_estimate} resamples had no estimate and are left out"
    return rows, note, boot.without_estimate


def _with_cluster_intervals(
    point: PositionStats,
    pairs: Sequence[Pair],
    *,
    levels: tuple[float, float],
    n_bootstrap: int,
    seed: int,
) -> tuple[PositionStats, PositionStats]:
    """``point`` (``position_stats``'s counts and figures) with PC's and PF's intervals from
    a bootstrap over (question, model pair) clusters, all repetitions of a pair together, at
    the shown level and at the flag level (the same resamples)."""
    cluster: dict[tuple[str, str, str], int] = {}
    rows: list[list[float]] = []
    for p in pairs:
        k = cluster.setdefault((p.question, p.low, p.high), len(cluster))
        if k == len(rows):
            rows.append([0.0, 0.0, 0.0, 0.0])  # consistent, readable, recency - primacy, pairs
        rows[k][3] += 1
        if p.readable:
            # +1 recency, -1 primacy, 0 consistent: position_stats's reading of the scores
            sign = float(np.sign(GIVEN_SCORE[p.given] - SWAPPED_SCORE[p.swapped]))
            rows[k][0] += sign == 0
            rows[k][1] += 1
            rows[k][2] += sign
    sums = np.asarray(rows, dtype=float).reshape(-1, 4)
    found = ratio_intervals(
        {"pc": (sums[:, 0], sums[:, 1]), "pf": (sums[:, 2], sums[:, 3])},
        levels=list(levels), n_bootstrap=n_bootstrap if point.n >= 2 else 0, seed=seed,
    )  # fmt: skip
    shown, flag = (
        replace(
            point, level=lv, consistency_low=found["pc"][lv][0],
            consistency_high=found["pc"][lv][1], fairness_low=found["pf"][lv][0],
            fairness_high=found["pf"][lv][1],
        )
        for lv in levels
    )  # fmt: skip
    return shown, flag


def judge_figures(
    judge: str,
    verdicts: Sequence[Verdict],
    *,
    inconsistent: Inconsistent,
    level: float,
    flag_level: float,
    min_consistency: float,
    n_bootstrap: int,
    seed: int,
) -> JudgeFigures:
    """One judge's figures (see the module docstring)."""
    pairs = pairs_of(verdicts)
    given, swapped, unreadable = _scores(pairs)
    point = position_stats(given, swapped, level=level, n_bootstrap=0, unreadable=unreadable)
    stats, judged = _with_cluster_intervals(
        point, pairs, levels=(level, flag_level), n_bootstrap=n_bootstrap, seed=seed
    )
    reasons = flag_reasons(judged, NO_SHIFT, 0.0, min_consistency)
    rs, prompts = repetition_stability(verdicts)
    models = sorted({m for v in verdicts for m in (v.first, v.second)})
    bt, note, missing = strengths(
        pairs, models, inconsistent, level=level, n_bootstrap=n_bootstrap, seed=seed
    )
    return JudgeFigures(
        judge=judge,
        models=models,
        questions=len({v.question for v in verdicts}),
        repetitions=sorted({v.repetition for v in verdicts}),
        judgments=len(verdicts),
        unreadable_judgments=sum(v.verdict == "unreadable" for v in verdicts),
        position=stats,
        repetition_stability=rs,
        stability_prompts=prompts,
        flagged=bool(reasons),
        reasons=reasons,
        rates=win_rates(pairs, inconsistent, level),
        strengths=bt,
        strengths_note=note,
        bootstrap_without_estimate=missing,
    )


def pairwise_figures(
    verdicts: Sequence[Verdict],
    *,
    inconsistent: Inconsistent = "tie",
    level: float = LEVEL,
    min_consistency: float = MIN_CONSISTENCY,
    n_bootstrap: int = N_BOOTSTRAP,
    seed: int = SEED,
) -> PairwiseResult:
    """Every judge's figures from ``verdicts`` (``load_verdicts``)."""
    if inconsistent not in INCONSISTENT_NOTE:
        raise ValueError(f"inconsistent must be 'tie' or 'apart', got {inconsistent!r}")
    by_judge: dict[str, list[Verdict]] = defaultdict(list)
    for v in verdicts:
        by_judge[v.judge].append(v)
    flag_level = simultaneous_confidence(level, 2 * len(by_judge))
    judges = [
        judge_figures(
            name, vs, inconsistent=inconsistent, level=level, flag_level=flag_level,
            min_consistency=min_consistency, n_bootstrap=n_bootstrap, seed=seed,
        )
        for name, vs in sorted(by_judge.items())
    ]  # fmt: skip
    notes = [
        "Verdicts are positions: A the answer shown first, B second. Position consistency: "
        "share of readable pairs with the same model chosen (or a tie) in both orders. "
        "Preference fairness (Shi et al. 2024): (recency - primacy) / pairs, every pair "
        "judged in the denominator; > 0 favours the second position, < 0 the first.",
        "A pair with an unreadable verdict is left out of position consistency and of the "
        "win rates, and kept in preference fairness's denominator, as the paper counts it.",
        "Repetition stability: per question and order, the share of repetitions giving the "
        "most frequent readable verdict (an unreadable one counts in the repetitions), "
        "averaged (the authors' computation).",
        INCONSISTENT_NOTE[inconsistent] + ".",
        "Every repetition's pairs are pooled. The intervals of position consistency, "
        "preference fairness and Bradley-Terry resample (question, model pair) clusters, a "
        "pair's repetitions together; the win rates' Wilson intervals treat each "
        "repetition's pair as independent, so they are too narrow where repetitions agree.",
        f"Flagged: inconsistent when position consistency's CI lies below {min_consistency:g}"
        "; primacy or recency when preference fairness's CI excludes 0; decided at "
        f"{flag_level:.4g} confidence (Bonferroni over two claims per judge).",
    ]
    return PairwiseResult(
        judges, inconsistent, level, flag_level, min_consistency, n_bootstrap, seed, notes
    )
