"""Qualified judges (issue 42): ``fairjudge checks qualify`` measures a judge run against
the human ratings of one rubric and stores a ``JudgeQualification``; a judge run's standing
per rubric, read from those records, is ``server.usecases.standing``'s.

The evidence, per rubric, on the rated items the judge scored (the humans' item score is
the mean of their ratings, as everywhere in FairJudge):

- exact agreement, weighted (quadratic) kappa and Gwet's AC1 (``judge.stats.pairs``), with
  the majority-class baseline and the flags that keep agreement from flattering;
- Krippendorff's alpha (interval) between the judge and the humans' item score put on the
  scale's nearest level, and among the humans (the ceiling), both from
  ``judge.stats.coincidence``;
- every interval a percentile bootstrap of the rated items, ``[qualify] n_bootstrap``
  resamples seeded with ``[qualify] seed`` (same ratings, same record);
- unweighted: each rated item counts once, also when a campaign drew them with unequal
  probabilities (``evidence["weighting"]`` says so: the figures then describe the rated
  items, not the run's items as a whole);
- the alt-test at epsilon (``server.usecases.alttest``), position consistency where the
  run judged the rubric's two texts in both orders, the directional counterfactual result
  where a copy was judged.

The rule (``judge.qualify_rule``) turns that into qualified or failed, with one line.

Standing of a judge run's rubric: the newest record for the same configuration (base URL
as stored, model, prompt variant, template hash, rubric, scale, temperature) decides;
"stale" when ratings of that rubric were stored, edited or withdrawn after the record.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, Field

from judge.errors import InvalidInputError
from judge.hashing import content_hash
from judge.vocab import SCALE
from server.usecases.requests import MAX_ID, NumbersNotBooleans

if TYPE_CHECKING:
    from sqlmodel import Session

    from judge.config_qualify import QualifyConfig
    from judge.qualify_rule import Outcome
    from judge.stats.coefficient import Coefficient
    from judge.store.tables import JudgeQualification, JudgeRun
    from judge.vocab import Scale

VALIDATED = "validated"
NOT_VALIDATED = "not validated"
FAILED_VALIDATION = "failed validation"
STALE = "stale"
STATES = (VALIDATED, NOT_VALIDATED, FAILED_VALIDATION, STALE)


class QualifyRequest(NumbersNotBooleans):
    """Qualify ``judge_run``'s judge for ``rubric`` on the ratings of ``campaigns`` (every
    campaign and import batch of its generation run when empty)."""

    model_config = ConfigDict(extra="forbid")

    judge_run: int = Field(ge=1, le=MAX_ID)
    rubric: str = Field(min_length=1, max_length=200)
    epsilon: float | None = Field(
        default=None, gt=0, lt=1, description="The alt-test's margin; default [qualify] epsilon."
    )
    campaigns: list[str] = Field(default_factory=list, max_length=50)


@dataclass(frozen=True)
class Qualification:
    """A stored record and the rule's outcome."""

    record: JudgeQualification
    outcome: Outcome

    def to_dict(self) -> dict[str, Any]:
        return record_dict(self.record)


def record_dict(r: JudgeQualification) -> dict[str, Any]:
    return {
        "id": r.id,
        "judge_run": r.judge_run_id,
        "generation_run": r.generation_run_id,
        "configuration": configuration_of(r),
        "epsilon": r.epsilon,
        "n_ratings": r.n_ratings,
        "n_raters": r.n_raters,
        "outcome": r.outcome,
        "line": r.line,
        "rule": dict(r.rule),
        "evidence": dict(r.evidence),
        "ratings_through": r.ratings_through.isoformat() if r.ratings_through else None,
        "created_at": r.created_at.isoformat(),
    }


def configuration_of(r: JudgeQualification) -> dict[str, Any]:
    """The judge configuration a record covers (the base URL as stored, already redacted
    of any secret by the store)."""
    return {
        "base_url": r.base_url,
        "model": r.model,
        "prompt_variant": r.prompt_variant,
        "template_hash": r.template_hash,
        "rubric": r.rubric,
        "scale": r.scale,
        "temperature": r.temperature,
    }


CONFIG_FIELDS = ("base_url", "model", "prompt_variant", "template_hash", "scale", "temperature")


def template_hash(session: Session, judge_run_id: int, rubric: str) -> str:
    """sha256 (16 hex) of the judge templates' versions and the rubric definitions' hashes
    the run's judgments of ``rubric`` were made with ("" when it has none)."""
    from sqlmodel import col, select

    from judge.store.tables import Judgment

    used = session.exec(
        select(Judgment.template_version, Judgment.rubric_hash)
        .where(Judgment.judge_run_id == judge_run_id, Judgment.rubric == rubric)
        .distinct()
        .order_by(col(Judgment.template_version), col(Judgment.rubric_hash))
    ).all()
    if not used:
        return ""
    return content_hash([[t, h or ""] for t, h in used])[:16]


def run_rubrics(session: Session, judge_run_id: int) -> list[str]:
    """The rubrics a judge run has judgments of, sorted."""
    from sqlmodel import select

    from judge.store.tables import Judgment

    found = session.exec(
        select(Judgment.rubric).where(Judgment.judge_run_id == judge_run_id).distinct()
    ).all()
    return sorted(set(found))


def rubric_scale(session: Session, rubric: str) -> Scale:
    """A registered rubric's own scale, else FairMonitor's 1-5."""
    from annotation.ratings import registered_scales

    return registered_scales(session).get(rubric, SCALE)


def run_configuration(session: Session, run: JudgeRun, rubric: str) -> dict[str, Any]:
    assert run.id is not None
    return {
        "base_url": run.base_url,
        "model": run.model,
        "prompt_variant": run.prompt_variant,
        "template_hash": template_hash(session, run.id, rubric),
        "scale": str(rubric_scale(session, rubric)),
        "temperature": float(run.temperature),
    }


def _interval(value: float, boot: Any, n: int, confidence: float, reason: str | None) -> Any:
    from judge.stats.bootstrap import percentile_interval
    from judge.stats.coefficient import Coefficient

    if reason is not None or not math.isfinite(value):
        return Coefficient.undefined(n, reason or "undefined for these ratings")
    low, high = percentile_interval(boot, confidence)
    return Coefficient(value, low, high, None, n)


def _alphas(
    judge: Any, human: Any, matrix: Any, scale: Scale, rule: QualifyConfig
) -> tuple[Coefficient, Coefficient]:
    """Alpha (interval) of the judge against the humans' item score on the scale's levels,
    and among the raters (the ceiling), each with its bootstrap interval."""
    import numpy as np

    from judge.stats.coincidence import bootstrap_alpha, value_counts
    from judge.stats.pairs import to_categories

    labels = [float(v) for v in scale.labels]
    rng = np.random.default_rng(rule.seed)
    coders = np.vstack(
        [to_categories(judge, labels=scale.labels), to_categories(human, labels=scale.labels)]
    )
    pair_counts = value_counts(coders, labels)
    value, boot = bootstrap_alpha(
        pair_counts, labels, level="interval", n_resamples=rule.n_bootstrap, rng=rng
    )
    constant = "constant scores: alpha is 0/0" if np.unique(coders).size < 2 else None
    vs_humans = _interval(value, boot, coders.shape[1], 0.95, constant)
    values = matrix.values
    observed = np.unique(values[~np.isnan(values)])
    domain = sorted(set(labels) | {float(v) for v in observed})
    counts = value_counts(values, domain)
    pairable = int((counts.sum(axis=1) >= 2).sum())
    value, boot = bootstrap_alpha(
        counts, domain, level="interval", n_resamples=rule.n_bootstrap, rng=rng
    )
    why = None
    if pairable == 0:
        why = "no item has ratings from two or more raters"
    elif observed.size < 2:
        why = f"constant ratings: every rating is {observed[0]:g}"
    return vs_humans, _interval(value, boot, pairable, 0.95, why)


def _position(session: Session, run: JudgeRun, rubric: str) -> dict[str, Any] | None:
    """Position consistency of ``rubric`` where the run judged its two texts in both orders."""
    from judge.trust.position import order_bias

    assert run.id is not None
    if not run.swap_order:
        return None
    result = order_bias(session, run.id)
    row = next((r for r in result.rubrics if r.rubric == rubric), None) if result else None
    return None if row is None else row.to_json()


def _directional(session: Session, run: JudgeRun, rubric: str) -> list[dict[str, Any]] | None:
    """The oriented counterfactual rows of ``rubric`` where a swapped copy was judged."""
    from judge.trust.copies import find_copies
    from judge.trust.diagnostics import counterfactual
    from judge.trust.directional import ORIENTED

    assert run.id is not None
    if not find_copies(session, run.id):  # no copy judged: nothing to read the run's facts for
        return None
    results = counterfactual(session, run.id)
    rows = [
        d.to_json()
        for r in results
        for d in r.directions
        if d.direction == ORIENTED and d.scope == rubric
    ]
    return rows or None


def _loaded(
    session: Session, request: QualifyRequest, rule: QualifyConfig
) -> tuple[JudgeRun, Any, Any, Any, Any, Scale]:
    """The run, the read (ratings selection and item scores), the rubric's ratings as a
    matrix, and the paired (judge, human) arrays; bad input raises one clear line each."""
    import numpy as np

    from judge.stats.matrix import RatingMatrix
    from judge.store.queries import get_judge_run

    run = get_judge_run(session, request.judge_run)
    rubric = request.rubric
    judged = run_rubrics(session, request.judge_run)
    if rubric not in judged:
        raise InvalidInputError(
            f"judge run {run.id} has no judgments of rubric {rubric!r}; it judged "
            f"{', '.join(judged) or 'nothing yet'}: qualify it for one of those"
        )
    from annotation.estimates import drawn_ratings

    scores = rubric_scores(session, run, rubric)
    selection = drawn_ratings(session, run.generation_run_id, request.campaigns)
    read = (selection, scores)
    rows = [r for r in selection.ratings if r.rubric == rubric]
    if not rows:
        raise InvalidInputError(
            f"no human ratings of rubric {rubric!r} for judge run {run.id}'s answers "
            f"(generation run {run.generation_run_id}); import them with `fairjudge ratings "
            f"import FILE --run {run.generation_run_id}` or run a campaign"
        )
    scale = rubric_scale(session, rubric)
    outside = [r.score for r in rows if not scale.within(r.score)]
    if outside:
        raise InvalidInputError(
            f"{len(outside)} of the {len(rows)} ratings of {rubric!r} lie outside its {scale} "
            f"scale (e.g. {outside[0]:g}): they were made on another scale; import ratings on "
            f"{scale} to qualify the judge"
        )
    raters = sorted({r.rater for r in rows})
    if len(raters) < rule.min_raters:
        only = f"one rater only ({raters[0]})" if len(raters) == 1 else f"{len(raters)} raters"
        raise InvalidInputError(
            f"the ratings of {rubric!r} come from {only}; a qualification needs at least "
            f"{rule.min_raters} raters (the human-human ceiling is measured among them)"
        )
    judge = {
        s.item_id: float(s.score) for s in scores if s.rubric == rubric and s.score is not None
    }
    matrix = RatingMatrix.from_long(
        [r.item_id for r in rows], [r.rater for r in rows], [r.score for r in rows]
    )
    human = dict(zip((int(i) for i in matrix.items), matrix.item_scores("mean"), strict=True))
    paired = [i for i in human if i in judge]
    if len(paired) < rule.min_ratings:
        raise InvalidInputError(
            f"only {len(paired)} rated items of {rubric!r} have a judge score; the rule needs "
            f"{rule.min_ratings} ([qualify] min_ratings): rate more items first"
        )
    jx = np.array([judge[i] for i in paired])
    hy = np.array([human[i] for i in paired])
    sub = matrix.columns([str(i) for i in paired])
    return run, read, sub, jx, hy, scale


def rubric_scores(session: Session, run: JudgeRun, rubric: str) -> list[Any]:
    """The run's item scores of one rubric (``judge.metrics.ItemScore``: the samples
    combined by the run's aggregation, as ``item_scores`` combines them), read as columns
    rather than rows: a qualification needs the scores, not the judgments' texts."""

    from sqlmodel import col, select

    from judge.metrics import ItemScore, aggregate
    from judge.store.tables import Judgment

    samples: dict[int, list[tuple[str, int | None]]] = defaultdict(list)
    for item_id, status, score in session.exec(
        select(Judgment.item_id, Judgment.status, Judgment.score)
        .where(Judgment.judge_run_id == run.id, Judgment.rubric == rubric)
        .order_by(col(Judgment.item_id), col(Judgment.sample_index))
    ):
        samples[item_id].append((status, score))
    out = []
    for item_id, given in samples.items():
        scored = [s for status, s in given if status == "scored" and s is not None]
        out.append(
            ItemScore(item_id, "", "", "", "", rubric, aggregate(scored, run.aggregation),
                      len(given), len(scored), (), ())
        )  # fmt: skip
    return out


def newest_rating_time(session: Session, generation_run_id: int, rubric: str) -> datetime | None:
    """The latest time a rating of ``rubric`` on the run's answers was stored, edited or
    withdrawn (every rating, used or not: one stored after a record makes it stale)."""
    from sqlalchemy import func
    from sqlmodel import select

    from judge.store.tables import HumanRating

    where = (HumanRating.generation_run_id == generation_run_id, HumanRating.rubric == rubric)
    found = session.exec(
        select(
            func.max(HumanRating.created_at),
            func.max(HumanRating.updated_at),
            func.max(HumanRating.withdrawn_at),
        ).where(*where)
    ).one()
    return max((aware_utc(t) for t in found if t is not None), default=None)


def aware_utc(t: datetime) -> datetime:
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def qualify(session: Session, request: QualifyRequest, rule: QualifyConfig) -> Qualification:
    """Measure, decide and store one qualification (see the module docstring). Bad input
    (an unknown run, a rubric the run did not judge, no ratings, ratings off the scale, one
    rater, fewer paired items than the rule needs) raises before anything is stored."""
    from judge.qualify_rule import Evidence, decide
    from judge.stats.coefficient import BootstrapOptions
    from judge.stats.pairs import judge_vs_human
    from judge.store.tables import JudgeQualification
    from server.usecases.alttest import AltTestRequest, alt_test_run

    epsilon = request.epsilon if request.epsilon is not None else rule.epsilon
    run, read, matrix, jx, hy, scale = _loaded(session, request, rule)
    assert run.id is not None
    options = BootstrapOptions(n_bootstrap=rule.n_bootstrap, seed=rule.seed)
    agreement = judge_vs_human(jx, hy, options=options, labels=scale.labels, warn=False)
    c = agreement.coefficients
    alpha, ceiling = _alphas(jx, hy, matrix, scale, rule)
    alt = AltTestRequest.model_validate(
        {
            "judge_run": run.id,
            "rubric": request.rubric,
            "epsilon": epsilon,
            "campaigns": request.campaigns,
        }
    )
    passed, omega, refused, verdict = None, None, None, None
    try:
        tested = alt_test_run(session, alt, read).rubrics[0]
        refused = tested.refused
        if tested.result is not None:
            passed, omega = tested.result.passed, tested.result.omega
            verdict = tested.verdict(None)
    except InvalidInputError as exc:  # refused: too few annotators or items
        refused = str(exc).split("\n", 1)[0].removeprefix("the alt-test cannot be run: ")
    evidence = Evidence(
        request.rubric, len(jx), epsilon, c["kappa_quadratic"], alpha,
        c["exact_agreement"], c["majority_baseline"], passed, omega, refused,
    )  # fmt: skip
    outcome = decide(evidence, rule)
    rows = [r for r in read[0].ratings if r.rubric == request.rubric]
    # The newest change among every rating of the rubric, used or not: one stored later
    # makes the record stale (standing reads the same rows).
    stored = {
        "exact_agreement": c["exact_agreement"].to_dict(),
        "kappa": c["kappa"].to_dict(),
        "kappa_quadratic": c["kappa_quadratic"].to_dict(),
        "ac1": c["ac1"].to_dict(),
        "alpha_interval": alpha.to_dict(),
        "majority_baseline": c["majority_baseline"].to_dict(),
        "majority_baseline_ac1": c["majority_baseline_ac1"].to_dict(),
        "majority_category": agreement.majority_category,
        "flags": [f.to_dict() for f in agreement.flags],
        "human_ceiling_alpha_interval": ceiling.to_dict(),
        "alt_test": {
            "epsilon": epsilon, "passed": passed, "omega": omega, "refused": refused,
            "verdict": verdict,
        },
        "position": _position(session, run, request.rubric),
        "directional": _directional(session, run, request.rubric),
        "criteria": [k.to_dict() for k in outcome.criteria],
        "n_human_ratings": len(rows),
        "ratings_used": read[0].to_dict(),
        "bootstrap": {"resamples": rule.n_bootstrap, "seed": rule.seed, "confidence": 0.95},
        "weighting": _weighting(session, read[0]),
    }  # fmt: skip
    config = run_configuration(session, run, request.rubric)
    record = JudgeQualification(
        judge_run_id=run.id,
        generation_run_id=run.generation_run_id,
        rubric=request.rubric,
        epsilon=epsilon,
        n_ratings=len(jx),
        n_raters=len(matrix.raters),
        outcome=outcome.outcome,
        line=outcome.line,
        rule=rule.model_dump(exclude={"require_qualified"}),
        evidence=_json_safe(stored),
        ratings_through=newest_rating_time(session, run.generation_run_id, request.rubric),
        **config,
    )
    session.add(record)
    session.commit()
    session.refresh(record)
    return Qualification(record, outcome)


def _weighting(session: Session, selection: Any) -> dict[str, Any]:
    """The agreement is unweighted: every rated item counts once. Where a campaign drew the
    items with unequal probabilities (stratified or disagreement-weighted), it describes the
    rated items, not the run's items as a whole, and the record says so."""
    from annotation.estimates import ratings_design

    design = ratings_design(session, selection)
    unequal = len(set(design.weights.values())) > 1
    note = "unweighted: every rated item counts once"
    if unequal:
        note += (
            f", although campaign {design.campaign}'s {design.name} design drew them with "
            "unequal probabilities: the agreement describes the rated items, not the run's "
            "items as a whole (the estimates weight them; `fairjudge estimates`)"
        )
    return {"design": design.name, "unequal_weights": unequal, "note": note}


def _json_safe(value: Any) -> Any:
    """NaN and infinities as None, recursively (JSON columns refuse them on PostgreSQL)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def qualify_in(engine: Any, request: QualifyRequest, rule: QualifyConfig) -> Qualification:
    """``qualify`` in a session of its own (the CLI's and the API's door)."""
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        done = qualify(session, request, rule)
        session.expunge(done.record)
        return done
