"""The judge's own biases, read from stored judgments (nothing here calls a model).

- ``counterfactual``: the judge run's scores beside the scores the same settings gave a
  counterfactual copy of the answers (``judge.trust.copies``), paired per item and rubric.
- ``order``: in a run judged in both orders, position consistency and preference fairness
  (Shi et al.) and the mean score change, per pair rubric (``judge.trust.position``).
- ``length``: per rubric, Spearman's correlation between the answer's length in words and
  the judge's score, beside the same correlation for human ratings where people rated.
- ``self_preference``: whether the judge model is the model under test.

Paired shifts use ``judge.stats.tests.paired_shift`` (share changed, mean difference with a
bootstrap CI, Wilcoxon signed-rank). A counterfactual copy is tested by swap direction
(``judge.trust.directional``: oriented differences, exact sign-flip tests, Holm's correction
over every row of the judge run's copies, equivalence when nothing is flagged); its per-rubric
shift (both directions together) is descriptive. The order check flags a rubric on its
position consistency and preference fairness (``judge.trust.position``). The order and length
checks test every rubric of the run and a reader takes any flag as a finding, so both decide
their flags on Bonferroni-simultaneous intervals over the run's rubrics
(``judge.stats.multiplicity.simultaneous_confidence``): the chance of any false flag in the
table stays at or below 1 - ``LEVEL``. They rest on bootstrap intervals, not p-values, hence
simultaneous intervals rather than Holm's adjusted p-values.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy import stats
from sqlmodel import Session, select

from judge.metrics import aggregate
from judge.reports.facts import RunFacts, load_run_facts, self_preference_note
from judge.stats.multiplicity import simultaneous_confidence
from judge.stats.tests import PairedShift, paired_shift
from judge.store.queries import get_generation_run, get_judge_run, judgment_scores, run_answers
from judge.store.rating_scope import select_ratings
from judge.store.tables import Item, JudgeRun, Response
from judge.trust.copies import Copy, _copy_of, copy_swaps, find_copies
from judge.trust.directional import (
    ALPHA,
    MARGIN,
    DirectionRow,
    PairScore,
    correct,
    pair_rows,
)
from judge.trust.swaps import Swap, net_toward_b
from judge.trust.swaps import sides as side_names

LEVEL = 0.95
N_BOOTSTRAP = 2000
TOP_MOVES = 5
"""Items shown per rubric with the largest counterfactual moves."""
_WORD = re.compile(r"\S+")


def flagged(shift: PairedShift, tolerance: float) -> bool:
    """Whether a shift is beyond the user's tolerance: its CI excludes 0 and the mean's size
    exceeds ``tolerance``."""
    return bool(shift.tested and shift.ci_excludes_zero and abs(shift.mean_difference) > tolerance)


@dataclass(frozen=True)
class Move:
    """One item whose counterfactual score moved: both scores and both answers."""

    item_key: str
    rubric: str
    before: float
    after: float
    swaps: list[str]
    original: dict[str, str]
    swapped: dict[str, str]


@dataclass(frozen=True)
class RubricShift:
    """One rubric's paired comparison: the shift, pairs left out because a side has no
    score, whether it is flagged, and (counterfactual) the largest moves."""

    rubric: str
    shift: PairedShift
    unpaired: int
    flagged: bool
    moves: list[Move] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        s = self.shift
        return {
            "rubric": self.rubric,
            "pairs": s.n,
            "changed": s.changed,
            "share_changed": _finite(s.share_changed),
            "mean_difference": _finite(s.mean_difference),
            "ci_low": _finite(s.ci_low),
            "ci_high": _finite(s.ci_high),
            "level": s.level,
            "wilcoxon_statistic": _finite(s.wilcoxon_statistic),
            "p_value": _finite(s.p_value),
            "tested": s.tested,
            "reason": s.reason,
            "unpaired": self.unpaired,
            "flagged": self.flagged,
            "largest_moves": [m.__dict__ for m in self.moves],
        }


@dataclass(frozen=True)
class CounterfactualResult:
    judge_run_id: int
    copy: Copy
    copy_judge_run_id: int | None  # None: the copy has not been judged with these settings
    status: str | None  # the copy's judge run status
    tolerance: float
    rubrics: list[RubricShift]
    directions: list[DirectionRow] = field(default_factory=list)
    sides: dict[str, tuple[str, str]] = field(default_factory=dict)  # kind -> (A, B)
    direction_note: str | None = None  # why directions are unknown, when they are
    alpha: float = ALPHA
    margin: float = MARGIN

    @property
    def flagged(self) -> list[str]:
        """Scopes (rubrics, "all rubrics") with a flagged row, in the rows' order."""
        return list(dict.fromkeys(r.scope for r in self.directions if r.flagged))

    def to_json(self) -> dict[str, Any]:
        return {
            "judge_run_id": self.judge_run_id,
            "copy_run_id": self.copy.run_id,
            "copy_judge_run_id": self.copy_judge_run_id,
            "copy_judge_status": self.status,
            "swap_kinds": list(self.copy.swap_kinds),
            "swap_in": self.copy.swap_in,
            "swap_in_note": swap_in_note(self.copy.swap_in),
            "items_copied": self.copy.items_copied,
            "items_skipped": self.copy.items_skipped,
            "swaps": self.copy.swaps,
            "tolerance": self.tolerance,
            "alpha": self.alpha,
            "equivalence_margin": self.margin,
            "correction": "holm",
            "sides": {k: {"A": a, "B": b} for k, (a, b) in self.sides.items()},
            "direction_note": self.direction_note,
            "flagged": self.flagged,
            "directions": [r.to_json() for r in self.directions],
            "rubrics": [r.to_json() for r in self.rubrics],
        }


def _finite(x: float) -> float | None:
    return None if x != x or x in (float("inf"), float("-inf")) else float(x)


def swap_in_note(swap_in: str) -> str:
    """What a copy swapped, and what that swap cannot see."""
    if swap_in == "answers":
        return (
            "words swapped in the answers only: the questions kept their words, so a judge "
            "swayed by the question's wording cannot show here (swap in the questions too: "
            "--swap-in both)"
        )
    if swap_in == "questions":
        return (
            "words swapped in the questions only: the answers kept their words, so a judge "
            "swayed by the answer's wording cannot show here (--swap-in both)"
        )
    return "words swapped in both the questions and the answers"


def copy_judge_run(session: Session, jrun: JudgeRun, copy_run_id: int) -> JudgeRun | None:
    """The judge run that judged a copy with exactly the original run's settings."""
    return session.exec(
        select(JudgeRun).where(
            JudgeRun.generation_run_id == copy_run_id, JudgeRun.config_hash == jrun.config_hash
        )
    ).first()


def _scores(session: Session, judge_run_id: int, how: str) -> dict[tuple[int, str], float | None]:
    """(item, rubric) -> the combined score of its samples (None: no sample scored)."""
    samples: dict[tuple[int, str], list[int]] = defaultdict(list)
    for item_id, rubric, status, score in judgment_scores(session, judge_run_id):
        bucket = samples[(item_id, rubric)]
        if status == "scored" and score is not None:
            bucket.append(score)
    return {key: aggregate(v, _how(how)) for key, v in samples.items()}


def _how(aggregation: str) -> str:
    return aggregation if aggregation in ("mean", "majority", "logprob") else "mean"


def counterfactual(
    session: Session,
    judge_run_id: int,
    *,
    copy_run_id: int | None = None,
    tolerance: float = 0.0,
    alpha: float = ALPHA,
    margin: float = MARGIN,
    level: float = LEVEL,
    n_bootstrap: int = N_BOOTSTRAP,
    top: int = TOP_MOVES,
    facts: RunFacts | None = None,
) -> list[CounterfactualResult]:
    """The counterfactual comparison of every copy of a judge run (or of one copy), tested
    by swap direction with one Holm correction over all the copies' rows (the family the
    report shows); ``margin``: the equivalence margin in score points. The run's own scores
    and answers come from ``facts`` when given; the copies are read here."""
    facts = facts or load_run_facts(session, judge_run_id)
    jrun = facts.judge_run
    copies = [c for c in find_copies(session, judge_run_id) if copy_run_id in (None, c.id)]
    results = []
    before = facts.scores_by_key
    bound = _bound(before)
    for copy_run in copies:
        copy = _copy_of(copy_run, created=False)
        judged = copy_judge_run(session, jrun, copy.run_id)
        rubrics: list[RubricShift] = []
        rows: list[DirectionRow] = []
        sides: dict[str, tuple[str, str]] = {}
        note = None
        if judged is not None and judged.id is not None:
            after = _scores(session, judged.id, jrun.aggregation)
            copied = run_answers(session, copy.run_id)
            rubrics = _compare(facts, copied, before, after, tolerance, level, n_bootstrap, top)
            swaps = copy_swaps(copy_run.derivation)
            if swaps is None:
                note = (
                    "directions unknown: this copy was made from a swap list of one's own "
                    "before copies recorded their pairs; make the copy again to test them"
                )
            else:
                changes = _changes(copied)
                for kind in copy.swap_kinds:
                    sides[kind] = side_names(kind, swaps)
                    pairs = _directed(before, after, changes, swaps, kind)
                    rows += pair_rows(
                        kind, sides[kind], pairs, alpha=alpha, margin=margin, level=level,
                        n_bootstrap=n_bootstrap, bound=bound,
                    )  # fmt: skip
        results.append(
            CounterfactualResult(
                judge_run_id,
                copy,
                judged.id if judged is not None else None,
                judged.status if judged is not None else None,
                tolerance,
                rubrics,
                rows,
                sides,
                note,
                alpha,
                margin,
            )
        )
    return _corrected(results, alpha, tolerance)


def _corrected(
    results: list[CounterfactualResult], alpha: float, tolerance: float
) -> list[CounterfactualResult]:
    """Holm's correction over every row of every copy; a rubric's (descriptive) shift is
    marked flagged when one of its rows is."""
    rows = [r for result in results for r in result.directions]
    sides = {k: v for result in results for k, v in result.sides.items()}
    fixed = iter(correct(rows, sides, alpha=alpha, tolerance=tolerance))
    out = []
    for result in results:
        mine = [next(fixed) for _ in result.directions]
        hit = {r.scope for r in mine if r.flagged}
        shifts = [replace(s, flagged=s.rubric in hit) for s in result.rubrics]
        out.append(replace(result, directions=mine, rubrics=shifts))
    return out


def _bound(scores: dict[tuple[int, str], float | None]) -> float:
    """The largest score change possible: 4 on the 1-5 scale, more on a wider scale seen."""
    seen = [s for s in scores.values() if s is not None]
    return max(4.0, max(seen) - min(seen)) if seen else 4.0


def _changes(copied: Sequence[tuple[Response, Item]]) -> dict[int, list[list[Any]]]:
    """Item -> every swap recorded in its copied answer parts and its swapped questions
    ([before, after, count])."""
    out: dict[int, list[list[Any]]] = defaultdict(list)
    for response, _ in copied:
        extra = response.extra or {}
        out[response.item_id] += extra.get("swapped", []) + extra.get("question_swapped", [])
    return dict(out)


def _directed(
    before: dict[tuple[int, str], float | None],
    after: dict[tuple[int, str], float | None],
    changes: dict[int, list[list[Any]]],
    swaps: Sequence[Swap],
    kind: str,
) -> list[PairScore]:
    """The scored pairs of the items whose copy swapped a word of ``kind``, each with its
    net direction (+1 toward side B, -1 toward A, 0 mixed)."""
    out = []
    for (item_id, rubric), new in sorted(after.items()):
        old = before.get((item_id, rubric))
        net = net_toward_b(changes.get(item_id, []), swaps, kind)
        if old is None or new is None or net is None:
            continue
        out.append(PairScore(item_id, rubric, (net > 0) - (net < 0), old, new))
    return out


def _compare(
    facts: RunFacts,
    copied: Sequence[tuple[Response, Item]],
    before: dict[tuple[int, str], float | None],
    after: dict[tuple[int, str], float | None],
    tolerance: float,
    level: float,
    n_bootstrap: int,
    top: int,
) -> list[RubricShift]:
    by_rubric: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
    unpaired: dict[str, int] = defaultdict(int)
    for (item_id, rubric), new in after.items():
        old = before.get((item_id, rubric))
        if old is None or new is None:
            unpaired[rubric] += 1
        else:
            by_rubric[rubric].append((item_id, old, new))
    out = []
    for rubric in sorted(set(by_rubric) | set(unpaired)):
        pairs = by_rubric.get(rubric, [])
        shift = paired_shift(
            [p[1] for p in pairs], [p[2] for p in pairs], level=level, n_bootstrap=n_bootstrap
        )
        moved = sorted((p for p in pairs if p[2] != p[1]), key=lambda p: (-abs(p[2] - p[1]), p[0]))
        moves = _moves(facts, copied, rubric, moved[:top])
        # flagged is set from the directional rows (``_corrected``): both directions pooled,
        # this shift can cancel, so it is shown but never decides a flag
        out.append(RubricShift(rubric, shift, unpaired.get(rubric, 0), False, moves))
    return out


def _moves(
    facts: RunFacts,
    copied: Sequence[tuple[Response, Item]],
    rubric: str,
    moved: Sequence[tuple[int, float, float]],
) -> list[Move]:
    """The moved items with both answers (parts in name order) and the copy's swaps."""
    if not moved:
        return []
    keys = {item.id: item.key for _, item in facts.answers}
    keys.update((row.item.id, row.item.key) for row in facts.judgments)
    ids = {p[0] for p in moved}
    swapped: dict[int, dict[str, str]] = defaultdict(dict)
    swaps: dict[int, list[str]] = defaultdict(list)
    for r, _ in sorted(copied, key=lambda pair: (pair[0].item_id, pair[0].part)):
        if r.item_id not in ids:
            continue
        swapped[r.item_id][r.part] = r.raw_text or ""
        for before, after, n in (r.extra or {}).get("swapped", []):
            swaps[r.item_id].append(f"{before} -> {after}" + (f" (x{n})" if n > 1 else ""))

    def original(item_id: int) -> dict[str, str]:
        parts = facts.answers_by_item.get(item_id, {})
        return {part: r.raw_text or "" for part, r in sorted(parts.items())}

    return [
        Move(keys[i], rubric, old, new, swaps[i], original(i), swapped[i]) for i, old, new in moved
    ]


@dataclass(frozen=True)
class LengthRow:
    """One rubric: Spearman's rho between answer length (words) and score, for the judge on
    every scored item and, where people rated, for the judge and the people on the items both
    rated, with a bootstrap CI of (judge rho - human rho) on those items at ``LEVEL``.
    ``flagged``: the judge rewards length more than the people do: the same difference's
    interval at ``flag_level`` (Bonferroni over the rubrics with a difference) lies above 0."""

    rubric: str
    n: int
    rho: float | None
    p_value: float | None
    n_rated: int
    rho_judge_rated: float | None
    rho_human: float | None
    difference_low: float | None
    difference_high: float | None
    flagged: bool
    flag_level: float = LEVEL

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "correction": "bonferroni"}


def words_per_item(answers: Iterable[Response]) -> dict[int, int]:
    """Item -> words in its answers (every part: a rubric reads all of its stage's parts)."""
    lengths: dict[int, int] = defaultdict(int)
    for r in answers:
        lengths[r.item_id] += len(_WORD.findall(r.raw_text or ""))
    return dict(lengths)


def _spearman(x: Sequence[float], y: Sequence[float]) -> tuple[float | None, float | None]:
    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return None, None
    r = stats.spearmanr(x, y)
    return _finite(float(r.statistic)), _finite(float(r.pvalue))


def length(
    session: Session,
    judge_run_id: int,
    *,
    level: float = LEVEL,
    n_bootstrap: int = N_BOOTSTRAP,
    facts: RunFacts | None = None,
) -> list[LengthRow]:
    """Per rubric, whether the judge's scores follow the answers' length (and more than the
    people's do); scores and answers from ``facts`` when given, ratings read here."""
    facts = facts or load_run_facts(session, judge_run_id)
    jrun = facts.judge_run
    lengths = words_per_item(r for r, _ in facts.answers)
    scores = facts.scores_by_key
    human: dict[tuple[int, str], list[float]] = defaultdict(list)
    # One rating per person, item and rubric: the rule agreement uses when several campaigns
    # or import batches rated the same item (judge.store.rating_scope).
    for rating in select_ratings(session, jrun.generation_run_id).ratings:
        human[(rating.item_id, rating.rubric)].append(rating.score)
    found = []
    for rubric in sorted({r for _, r in scores}):
        judged = [
            (lengths.get(i, 0), s) for (i, r), s in scores.items() if r == rubric and s is not None
        ]
        rho, p = _spearman([a for a, _ in judged], [b for _, b in judged])
        rated = [
            (lengths.get(i, 0), s, float(np.mean(human[(i, r)])))
            for (i, r), s in scores.items()
            if r == rubric and s is not None and human.get((i, r))
        ]
        found.append((rubric, len(judged), rho, p, rated))
    return length_rows(found, level=level, n_bootstrap=n_bootstrap)


Found = tuple[str, int, float | None, float | None, list[tuple[int, float, float]]]
"""One rubric's (name, items scored, rho, its p, rated items as (length, judge, people))."""


def length_rows(found: Sequence[Found], *, level: float, n_bootstrap: int) -> list[LengthRow]:
    """The length rows of the rubrics ``found``: the difference's CI at ``level``, its flag
    on the interval at the simultaneous confidence over the rubrics with a difference."""
    draws: list[np.ndarray | None] = []
    for _, _, _, _, rated in found:
        x = [a for a, _, _ in rated]
        rho_j, _ = _spearman(x, [b for _, b, _ in rated])
        rho_h, _ = _spearman(x, [c for _, _, c in rated])
        draws.append(
            _difference_draws(rated, n_bootstrap) if rho_j is not None and rho_h is not None
            else None
        )  # fmt: skip
    flag_level = simultaneous_confidence(level, sum(d is not None for d in draws))
    rows = []
    for (rubric, n, rho, p, rated), kept in zip(found, draws, strict=True):
        x = [a for a, _, _ in rated]
        rho_j, _ = _spearman(x, [b for _, b, _ in rated])
        rho_h, _ = _spearman(x, [c for _, _, c in rated])
        low, high = _percentiles(kept, level)
        flag_low, _ = _percentiles(kept, flag_level)
        rows.append(
            LengthRow(
                rubric, n, rho, p, len(rated), rho_j, rho_h, low, high,
                bool(flag_low is not None and flag_low > 0), flag_level,
            )
        )  # fmt: skip
    return rows


def _percentiles(kept: np.ndarray | None, level: float) -> tuple[float | None, float | None]:
    if kept is None:
        return None, None
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(kept, [tail, 100 - tail])
    return float(low), float(high)


def _difference_draws(rated: list[tuple[int, float, float]], n_bootstrap: int) -> np.ndarray | None:
    """Bootstrap draws (items resampled with replacement) of rho(length, judge) -
    rho(length, human), Spearman's rho as Pearson's r of the ranks (ties get their mean
    rank, as in ``scipy.stats.spearmanr``), for all resamples at once."""
    data = np.asarray(rated, dtype=float)

    def statistic(index: np.ndarray, axis: int = -1) -> np.ndarray:
        rows = data[index.astype(int)]  # (..., n, 3)
        ranks = stats.rankdata(rows, axis=-2)
        centred = ranks - ranks.mean(axis=-2, keepdims=True)
        norm = np.sqrt((centred**2).sum(axis=-2))
        with np.errstate(invalid="ignore", divide="ignore"):
            judge = (centred[..., 0] * centred[..., 1]).sum(axis=-1) / (norm[..., 0] * norm[..., 1])
            human = (centred[..., 0] * centred[..., 2]).sum(axis=-1) / (norm[..., 0] * norm[..., 2])
        return np.asarray(judge - human)

    rng = np.random.default_rng(0)
    draws = statistic(rng.integers(0, len(data), size=(n_bootstrap, len(data))))
    # A resample whose lengths or scores are all equal has no correlation: left out (with
    # 8 items about 1 in 200 resamples; with the usual 30+ rated items, none).
    kept = draws[np.isfinite(draws)]
    if kept.size < n_bootstrap / 2:
        return None
    return kept


def self_preference(session: Session, judge_run_id: int) -> str | None:
    """A line saying the judge model is the model under test (None when it is not). For a
    counterfactual copy, the model under test is the original run's. A report has it in its
    facts (``RunFacts.self_preference``)."""
    jrun = get_judge_run(session, judge_run_id)
    run = get_generation_run(session, jrun.generation_run_id)
    return self_preference_note(jrun.model, run.model)


@dataclass(frozen=True)
class LogprobRow:
    """One rubric of a run judged with ``--aggregation logprob``: the scored judgments,
    those with a score distribution, the mean sampled and expected scores over the latter,
    their mean entropy (bits), and how often the likeliest level is not the sampled one."""

    rubric: str
    scored: int
    with_distribution: int
    mean_sampled: float | None
    mean_expected: float | None
    mean_entropy_bits: float | None
    argmax_differs: int
    missing_reasons: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def logprob(
    session: Session, judge_run_id: int, *, facts: RunFacts | None = None
) -> list[LogprobRow] | None:
    """Per rubric, the stored score distributions beside the sampled scores; None for a run
    not judged with ``--aggregation logprob``. From ``facts`` when given."""
    facts = facts or load_run_facts(session, judge_run_id)
    if facts.judge_run.aggregation != "logprob":
        return None
    rows: dict[str, list[tuple[int | None, dict[str, float] | None, float | None, str | None]]]
    rows = defaultdict(list)
    for j in (row.judgment for row in facts.judgments):
        if j.status != "scored":
            continue
        missing = (j.params or {}).get("logprob_missing")
        rows[j.rubric].append((j.score, j.score_probs, j.expected_score, missing))
    out = []
    for rubric in sorted(rows):
        have = [(s, p, e) for s, p, e, _ in rows[rubric] if p and e is not None]
        reasons: dict[str, int] = defaultdict(int)
        for _, p, _, why in rows[rubric]:
            if not p:
                reasons[why or "no distribution stored"] += 1
        entropies = [
            float(-sum(q * np.log2(q) for q in p.values() if q > 0)) for _, p, _ in have if p
        ]
        differs = sum(
            1 for s, p, _ in have if p and int(max(p, key=lambda k: (p[k], -int(k)))) != s
        )
        out.append(
            LogprobRow(
                rubric,
                len(rows[rubric]),
                len(have),
                float(np.mean([s for s, _, _ in have])) if have else None,
                float(np.mean([e for _, _, e in have if e is not None])) if have else None,
                float(np.mean(entropies)) if entropies else None,
                differs,
                dict(reasons),
            )
        )
    return out
