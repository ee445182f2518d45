"""Reports: a judge run's full report, the judge's diagnostics, comparisons, dataset coverage,
and agreement between the judge and human ratings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from judge.endpoint_url import redacted
from judge.errors import InvalidInputError, NotFoundError

# The report's types are plain dataclasses (no heavy import): the interfaces read them here.
from judge.reports.sections import Report, Table
from judge.reports.sections import Section as Section
from server.usecases.context import run_prices

# Only what every command needs is imported here. The stages, the model client (openai), the
# reports (matplotlib) and the reliability section (scipy, scikit-learn, pandas) are imported
# inside the functions that use them, so a command that only reads the store starts in a
# fraction of the time (see tests/server/test_startup.py).
if TYPE_CHECKING:
    from sqlmodel import Session

    from annotation.estimates import Estimates
    from judge.config import Settings
    from judge.reports.facts import RunFacts
    from server.usecases.estimates import RatedRead


def full_report(
    session: Session,
    judge_run_id: int,
    *,
    with_reliability: bool = True,
    settings: Settings | None = None,
    campaigns: Sequence[str] = (),
) -> Report:
    """The one report of a judge run, used by the CLI, the API and the demo: the judge's
    standing per rubric first (``server.usecases.qualify``), stage metrics, the judge's
    self-consistency (several samples), its reliability (human ratings) and the browser of
    every judged item. The run's facts are read once and given to every section."""
    from annotation.estimates_section import section_of
    from annotation.sections import reliability_section
    from judge.reports.browser import item_browser_section
    from judge.reports.consistency import self_consistency_section
    from judge.reports.facts import load_run_facts
    from judge.reports.run_report import metrics_section
    from judge.store.queries import get_judge_run
    from judge.trust.section import diagnostics_section
    from server.usecases.standing import mark_rows, run_standing, standing_section

    jrun = get_judge_run(session, judge_run_id)
    standing = run_standing(session, judge_run_id)
    facts = load_run_facts(session, judge_run_id, prices=run_prices(settings, jrun.endpoint_name))
    grun = facts.generation_run
    sections = [standing_section(standing)]
    estimates = None
    if with_reliability:
        estimates, opening = opening_of(session, facts, campaigns)
        sections.append(opening)
    sections.append(metrics_section(session, judge_run_id, facts=facts))
    consistency = self_consistency_section(session, judge_run_id, facts=facts)
    if consistency is not None:
        sections.append(consistency)
    if with_reliability:
        reliability = reliability_section(session, judge_run_id, campaigns=campaigns, facts=facts)
        if reliability is not None:
            sections.append(reliability)
        if estimates is not None and estimates.ratings_used.get("scopes"):
            sections.append(section_of(estimates))  # the three estimates side by side
    sections.append(diagnostics_section(session, judge_run_id, facts=facts))
    sections.append(item_browser_section(session, judge_run_id, facts=facts))
    selfpref = facts.self_preference
    mark_rows(sections, standing)
    return Report(
        title=f"FairJudge report: {grun.model} (judge run {judge_run_id})",
        intro=(
            "FairMonitor bias evaluation"
            if jrun.rubric_set == "fairmonitor"
            else f"Evaluation with the rubrics {jrun.rubric_set}"
        )
        + f" of {grun.model} ("
        + (
            "answers imported from elsewhere"
            if grun.source == "imported"
            else f"{grun.endpoint_name} at {redacted(grun.base_url)}, "
            f"temperature {grun.temperature:g}"
        )
        + f"), judged by {jrun.model} at {redacted(jrun.base_url)} ({jrun.prompt_variant} prompt, "
        f"temperature {jrun.temperature:g}). Run status: {jrun.status}"
        + (f" ({jrun.status_detail})" if jrun.status_detail else "")
        + "."
        + (" " + selfpref if selfpref else ""),
        sections=sections,
    )


def opening_of(
    session: Session, facts: RunFacts, campaigns: Sequence[str] = ()
) -> tuple[Estimates, Section]:
    """A run's estimates and the opening section built on them, from the run's facts: the
    ratings read once for the estimates and the alt-test, the item scores taken from the
    facts (the full report and the dashboard's run page both open this way)."""
    from annotation.estimates import run_estimates
    from server.usecases.estimates import rated_read

    run = facts.judge_run_id
    read = rated_read(session, run, campaigns, scores=facts.item_scores)
    estimates = run_estimates(session, run, campaigns=campaigns, selection=read[0], scores=read[1])
    return estimates, opening_section(session, run, estimates, campaigns=campaigns, read=read)


def opening_section(
    session: Session,
    judge_run_id: int,
    estimates: Estimates,
    *,
    campaigns: Sequence[str] = (),
    read: RatedRead | None = None,
) -> Section:
    """The answer a run's report opens with: the best figure per factor and stage metric
    (corrected by human ratings where people rated) and the alt-test's verdict per rated
    rubric at each margin preset (``annotation.answer_section``). ``read``: the ratings of
    ``campaigns`` and the run's item scores, where the caller has read them."""
    from annotation.answer_section import Verdict, answer_section
    from judge.stats.alttest import EPSILON
    from server.usecases.alttest import AltTestRequest, alt_test_margins

    by_rubric: dict[str, dict[str, str | None]] = {}
    refused: dict[str, str | None] = {}
    presets = list(EPSILON)
    request = AltTestRequest.model_validate(
        {"judge_run": judge_run_id, "epsilon": presets[0], "campaigns": list(campaigns)}
    )
    try:
        found = alt_test_margins(session, request, presets, read)  # read once, if not given
    except NotFoundError:  # no human ratings: nothing to test
        found = []
    except InvalidInputError as exc:  # every rated rubric refused, with the reason
        refused["every rated rubric"] = str(exc).split("\n", 1)[0]
        found = []
    for preset, report in zip(presets, found, strict=False):
        for rubric in report.rubrics:
            name = rubric.rubric or "?"
            by_rubric.setdefault(name, {})[preset] = rubric.verdict(preset)
            refused[name] = rubric.refused
    verdicts = [Verdict(r, by_rubric.get(r, {}), refused.get(r)) for r in refused]
    return answer_section(estimates, verdicts)


def diagnostics_report(
    session: Session,
    judge_run_id: int,
    *,
    tolerance: float = 0.0,
    settings: Settings | None = None,
    margin: float | None = None,
) -> Report:
    """The "judge diagnostics" of one judge run alone (``checks show``); ``margin``:
    the counterfactual equivalence margin in score points (default 0.25)."""
    from judge.store.queries import get_judge_run
    from judge.trust.directional import MARGIN
    from judge.trust.section import diagnostics_section
    from server.usecases.standing import mark_rows, run_standing, standing_section

    jrun = get_judge_run(session, judge_run_id)
    standing = run_standing(session, judge_run_id)
    prices = run_prices(settings, jrun.endpoint_name)
    section = diagnostics_section(
        session, judge_run_id, tolerance=tolerance, prices=prices,
        margin=MARGIN if margin is None else margin,
    )  # fmt: skip
    mark_rows([section], standing)
    return Report(
        title=f"FairJudge judge diagnostics: judge run {judge_run_id} ({jrun.model})",
        intro=(section.notes[0] + " " if section.payload["self_preference"] else "")
        + f"Checks of the judge {jrun.model} ({jrun.prompt_variant} prompt, temperature "
        f"{jrun.temperature:g}) on its own biases (counterfactual swaps, order, length) and "
        "what it cost.",
        sections=[standing_section(standing), section],
    )


def compare_report(
    session: Session,
    judge_run_ids: Sequence[int],
    *,
    paired: bool = False,
    margin: float | None = None,
    assume_random: bool = False,
) -> Report:
    """Several judge runs side by side: the stage metrics of each model (or judge
    configuration) per factor and stage, with intervals and unscored counts, and their score
    distributions. Refuses run ids that do not exist, and fewer than two distinct runs.

    With ``paired``: exactly two runs judged on the same items, and a second section of
    paired differences B - A (``judge.reports.compare_paired``) at equivalence ``margin``
    (percentage points); runs of different items are refused with the counts. Where people
    rated both runs' answers, a third section: the differences corrected by their ratings
    (``annotation.paired_estimates``; ``assume_random`` treats imported ratings as a simple
    random sample)."""
    from judge.metrics import item_scores
    from judge.reports.compare import compare_section, compared_runs
    from judge.reports.compare_paired import DEFAULT_MARGIN, paired_section

    if margin is not None and not paired:
        raise InvalidInputError("--margin is the equivalence margin of --paired: add --paired")
    if assume_random and not paired:
        raise InvalidInputError("--assume-random is for the corrected differences of --paired")
    distinct = list(dict.fromkeys(judge_run_ids))
    if paired and len(distinct) != 2:
        raise InvalidInputError(
            f"--paired compares exactly two judge runs (A then B), got {len(distinct)}"
        )
    from server.usecases.standing import mark_compared_rows, run_standing

    runs = compared_runs(session, judge_run_ids)
    sections = [compare_section(session, runs)]
    if paired:
        from annotation.paired_estimates import corrected_section, paired_estimates

        a, b = runs
        scores = (
            item_scores(session, a.judge_run_id, a.aggregation),
            item_scores(session, b.judge_run_id, b.aggregation),
        )
        sections.append(
            paired_section(
                *scores,
                (a.label, b.label),
                (a.judge_run_id, b.judge_run_id),
                margin=DEFAULT_MARGIN if margin is None else margin,
            )
        )
        ids = (a.judge_run_id, b.judge_run_id)
        corrected = paired_estimates(session, ids, scores, assume_random=assume_random)
        if corrected is not None:
            sections.append(corrected_section(corrected, (a.label, b.label)))
    standings = {r.judge_run_id: run_standing(session, r.judge_run_id) for r in runs}
    mark_compared_rows(sections, standings, [r.judge_run_id for r in runs] if paired else [])
    labels = ", ".join(r.label for r in runs)
    return Report(
        title=f"FairJudge comparison: {labels}",
        intro=f"FairMonitor stage metrics of {len(runs)} judge runs side by side ("
        + "; ".join(r.describe() for r in runs)
        + ")"
        + (", and their paired differences item by item." if paired else "."),
        sections=sections,
    )


def run_agreement(
    session: Session, judge_run_id: int, *, campaigns: Sequence[str] = ()
) -> dict[str, Any]:
    """Judge-human and human-human agreement for a judge run's answers (the reliability
    section of its report) on the ratings of ``campaigns`` (every campaign's when empty);
    NotFoundError when no human ratings exist yet."""
    from annotation.sections import reliability_section

    section = reliability_section(session, judge_run_id, campaigns=campaigns)
    if section is None:
        raise NotFoundError(
            f"judge run {judge_run_id} has no human ratings to compare with; run a campaign "
            "(POST /api/v1/campaigns) or import ratings (`fairjudge ratings import`)"
        )
    return {"judge_run": judge_run_id, **section.payload}


def coverage_report(session: Session, name: str) -> Report:
    """Dataset NAME's coverage of FairMonitor's grid (stage x factor x scenario, by review
    status) as a one-section report."""
    from judge.data.coverage import coverage
    from judge.reports.coverage import coverage_section

    section = coverage_section(coverage(session, name))
    return Report(f"FairJudge benchmark coverage: {name}", section.notes[0], [section])


def metrics_summary(report: Report) -> tuple[Table, list[str]]:
    """A run report's FairMonitor metrics table, and its unscored judgments and tokens in
    words (what the CLI prints after a report or the demo)."""
    from judge.reports.run_report import METRICS_TITLE, counts_phrase, tokens_phrase

    section = report.section(METRICS_TITLE)
    if section is None:
        raise ValueError("a run report always has its metrics section")
    data = report.to_json()
    return section.tables[0], [
        f"unscored judgments: {counts_phrase(data['unscored'])}",
        f"tokens: {tokens_phrase(data['tokens'])}",
    ]


def comparison_summary(report: Report) -> tuple[list[Table], list[str]]:
    """A comparison's tables, then its legend (the by-factor table's notes: what a cell
    says) and the unscored judgments of each run; with a paired section, its table, its
    legend and which cells differ after."""
    from annotation.paired_estimates import CORRECTED_TITLE
    from judge.reports.compare import COMPARE_TITLE
    from judge.reports.compare_paired import PAIRED_TITLE

    section = report.section(COMPARE_TITLE)
    if section is None:
        raise ValueError("a comparison always has its section")
    tables, lines = list(section.tables), [*section.tables[-1].notes, *section.notes]
    paired = report.section(PAIRED_TITLE)
    if paired is not None:
        tables += paired.tables
        lines += [*paired.tables[0].notes, *paired.notes]
    corrected = report.section(CORRECTED_TITLE)
    if corrected is not None:
        tables += corrected.tables
        lines += [*(n for t in corrected.tables for n in t.notes), *corrected.notes]
    return tables, lines
