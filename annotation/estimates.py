"""Bias figures corrected by human ratings: the judge's stage metrics and rubric means,
estimated three ways side by side, with prediction-powered inference (PPI++,
``judge.stats.ppi``) joining the judge's scores of every item to people's ratings of a sample.

- **judge-only**: the judge's value over every item of the cell it scored. Its interval is
  narrow, but it measures what the judge says, bias included: no interval can show that.
- **human-only**: the classical mean of the rated items' human values. Unbiased for what
  people say, wide when few items were rated.
- **prediction-powered**: the judge's value over the items nobody rated, corrected by the
  gap between people and judge on the rated items (tuned weight ``lam``): ppi_py's
  convention, each item in one set only (``judge.stats.ppi.ppi_mean``). Unbiased for what
  people say, and narrower than human-only when the judge tracks people. A weighted
  campaign (stratified, disagreement) stores no probability for the items it did not draw,
  so there the judge's part is its value over *every* scored item and the variance takes
  that overlap into account (``judge.stats.ppi_run``).

Every value is in its target's unit: a stage metric in percent (an item counts 100 when its
score reaches the metric's threshold, else 0; or score / scale maximum x 100 for a mean), a
rubric mean on the rubric's own scale. An item's human value is the same function of its
combined human score (the mean of its raters, or the median). Intervals are normal
(``1 - alpha``) and clipped to the unit's range (0-100, or the scale's ends): a share of 0/100
values near an end gives a normal interval that reaches past it. Under 30 rated items
(``SMALL_N``) the human-only and prediction-powered intervals are Student t ones with
``n - 1`` degrees of freedom, and the estimate is marked ``small_sample``.

**Design.** Human-only and prediction-powered intervals assume the rated items are a
probability sample of the run's items, so the ratings' origin decides how they are weighted:
one rating campaign drawn at random (unweighted); stratified (weights 1 / inclusion
probability, the campaign's strata in the variance); disagreement (weights). Imported
ratings, or those of several campaigns, have no design to weight by: both estimates are
refused with the reason, unless ``assume_random`` says to treat them as a simple random
sample (the output then says "assumed random"), and the judge's scores of the rated items
look like those of the unrated ones (``annotation.estimate_checks``; overridden by
``accept_unrepresentative``, which the design's name then says). A cell with fewer than 2
rated items has no human-only or prediction-powered estimate; the judge-only one is always
given, and ``best`` names the prediction-powered estimate where people rated the cell, else
the judge-only one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from sqlmodel import Session, col, select

from annotation.estimate_cells import (
    RunData,
    judge_only_estimate,
    target_cells,
    targets,
)
from annotation.estimate_checks import check_representative, guarded
from annotation.estimate_results import (
    ALL,
    ASSUMED,
    HUMAN_ONLY,
    JUDGE_ONLY,
    PPI,
    CellEstimate,
    Design,
    Estimate,
    Estimates,
    GapEstimates,
    GapQuery,
    finite,
)
from annotation.reliability import inclusion_probabilities
from judge.config_estimates import EstimatesConfig
from judge.errors import InvalidInputError
from judge.metrics import ItemScore, item_scores
from judge.stats.matrix import RatingMatrix
from judge.store.queries import get_judge_run
from judge.store.rating_scope import IMPORT, RatingSelection, select_ratings
from judge.store.tables import Campaign, CampaignTask

__all__ = [
    "ALL", "HUMAN_ONLY", "JUDGE_ONLY", "PPI", "CellEstimate", "Design", "Estimate", "Estimates",
    "GapEstimates", "GapQuery", "RunData", "drawn_ratings", "finite", "judge_only_estimate",
    "load_run_data", "run_estimates",
]  # fmt: skip

# ---------------------------------------------------------------- what the store holds


def drawn_ratings(
    session: Session, generation_run_id: int, campaigns: Sequence[str] = ()
) -> RatingSelection:
    """The ratings of a generation run's answers in ``campaigns`` (every one when empty) that
    estimates and the alt-test use: gold items left out (they were chosen to test the
    annotators, not drawn). InvalidInputError for an unknown campaign."""
    from annotation.labelstudio.gold import gold_pairs

    gold = gold_pairs(session, generation_run_id)
    return select_ratings(
        session, generation_run_id, campaigns, skip=lambda r: (r.campaign_id, r.item_id) in gold
    )


def load_run_data(
    session: Session,
    judge_run_id: int,
    campaigns: Sequence[str] = (),
    human: str = "mean",
    *,
    selection: RatingSelection | None = None,
    scores: Sequence[ItemScore] | None = None,
) -> RunData:
    """The judge run's scores and its generation run's ratings (``drawn_ratings``), raters
    combined by ``human``. A caller that has read them already passes ``selection`` (of
    ``campaigns``) and ``scores`` (the run's ``item_scores``), and nothing is read twice."""
    from annotation.ratings import registered_scales

    if human not in ("mean", "median"):
        raise InvalidInputError(f"human must be 'mean' or 'median', got {human!r}")
    run = get_judge_run(session, judge_run_id)
    if selection is None:
        selection = drawn_ratings(session, run.generation_run_id, campaigns)
    rows: dict[str, list[tuple[int, str, float]]] = defaultdict(list)
    for r in selection.ratings:
        rows[r.rubric].append((r.item_id, r.rater, r.score))
    combined = {}
    for rubric, found in rows.items():
        matrix = RatingMatrix.from_long(*zip(*found, strict=True))
        values = matrix.item_scores(human)
        combined[rubric] = {int(i): float(v) for i, v in zip(matrix.items, values, strict=True)}
    if scores is None:
        scores = item_scores(session, judge_run_id, run.aggregation)
    scales = registered_scales(session)
    return RunData(judge_run_id, run.generation_run_id, list(scores), combined, selection, scales)


def ratings_design(
    session: Session, selection: RatingSelection, *, assume_random: bool = False
) -> Design:
    """The design the ratings of ``selection`` were drawn by (see the module docstring)."""
    if not selection.ratings:
        return Design("no ratings", False, "no human ratings", "no human ratings to use yet")
    probabilities, absent = inclusion_probabilities(session, selection)
    campaign, drawn = None, set[int]()
    if not absent:
        campaign = session.get(Campaign, selection.campaign_ids[0])
        drawn = {i for i, p in probabilities.items() if p > 0}
        missing = len({r.item_id for r in selection.ratings} - drawn)
        if campaign is None or missing:
            absent = (
                f"{missing} rated item(s) are not among the campaign's tasks, so the "
                "probability with which they were drawn is unknown"
            )
    if absent or campaign is None:
        if assume_random:
            imported = any(s.scope.startswith(IMPORT) for s in selection.used)
            what = "imported ratings" if imported else "several campaigns"
            return Design(
                f"{ASSUMED} ({what})",
                True,
                "treated as a simple random sample of the run's items, unweighted, as asked; "
                "the intervals hold only if the rated items were drawn that way",
            )
        reason = absent.removeprefix("no whole-run (weighted) estimate: ")
        return Design(
            "refused",
            False,
            "no design to weight the ratings by",
            f"no human-only or prediction-powered estimate: {reason}; or pass --assume-random "
            "(assume_random=true) to treat them as a simple random sample of the run's items",
        )
    name = campaign.name
    if campaign.strategy == "random":
        return Design("random", True, f"campaign {name}: a simple random sample", campaign=name)
    weights = {i: 1.0 / probabilities[i] for i in drawn}
    if campaign.strategy != "stratified":
        how = f"campaign {name}: drawn with unequal probabilities ({campaign.strategy})"
        return Design(campaign.strategy, True, how, campaign=name, weights=weights)
    strata = session.exec(
        select(CampaignTask.item_id, CampaignTask.stratum).where(
            CampaignTask.campaign_id == campaign.id, col(CampaignTask.stratum) != ""
        )
    ).all()
    how = f"campaign {name}: a stratified sample, the variance taken within its strata"
    return Design("stratified", True, how, campaign=name, weights=weights, strata=dict(strata))


# ---------------------------------------------------------------- the use


def run_estimates(
    session: Session,
    judge_run_id: int,
    *,
    campaigns: Sequence[str] = (),
    human: str = "mean",
    assume_random: bool = False,
    accept_unrepresentative: bool = False,
    rules: EstimatesConfig | None = None,
    alpha: float = 0.05,
    gap: GapQuery | None = None,
    selection: RatingSelection | None = None,
    scores: Sequence[ItemScore] | None = None,
) -> Estimates:
    """Every stage metric and rubric mean of a judge run, per factor and overall, three ways
    (see the module docstring), and the ``gap`` asked for. ``campaigns`` names the campaigns
    (or ``import:BATCH``) whose ratings count, as for agreement (every one when empty);
    ``rules``: the config's ``[estimates]`` bounds (its defaults when None);
    ``selection`` and ``scores``: what the caller read already (see ``load_run_data``).
    NotFoundError for an unknown run; InvalidInputError for an unknown campaign or gap."""
    from annotation.estimate_gaps import gap_estimates

    if not 0 < alpha < 1:
        raise InvalidInputError(f"alpha must be between 0 and 1, got {alpha!r}")
    data = load_run_data(
        session, judge_run_id, campaigns, human, selection=selection, scores=scores
    )
    design = run_design(session, data, assume_random, accept_unrepresentative, rules)
    metrics, rubrics = targets(data)
    return Estimates(
        judge_run=data.run_id,
        generation_run=data.generation_run,
        human_score=human,
        alpha=alpha,
        design=design,
        ratings_used=data.selection.to_dict(),
        ratings_note=data.selection.describe(),
        metrics=[c for t in metrics for c in target_cells(t, data, design, alpha)],
        rubrics=[c for t in rubrics for c in target_cells(t, data, design, alpha)],
        gap=None if gap is None else gap_estimates(session, data, gap, design, alpha),
    )


def run_design(
    session: Session,
    data: RunData,
    assume_random: bool,
    accept_unrepresentative: bool = False,
    rules: EstimatesConfig | None = None,
) -> Design:
    """The ratings' design (``ratings_design``); an assumed random one passes the
    random-subset check first (``annotation.estimate_checks``)."""
    design = ratings_design(session, data.selection, assume_random=assume_random)
    if not design.name.startswith(ASSUMED):
        return design
    check = check_representative(
        data.scores, data.human, rules or EstimatesConfig(), accepted=accept_unrepresentative
    )
    return guarded(design, check)
