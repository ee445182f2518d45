"""``/api/v1/audits`` and ``/api/v1/audit-runs``: start an audit suite as a job, read its runs
back (figures, reports), classify the award follow-ups by judge (a job) and by people (sent
as labels, or through a Label Studio campaign), a suite's statistics on CSV text of one's
own, and BBQ's figures for predictions made elsewhere (JSON-lines text)."""

from __future__ import annotations

from typing import Any

from flask import Response, current_app
from pydantic import BaseModel, ConfigDict, Field

from judge.errors import InvalidInputError
from server.api import CSV_TABLE, HTML_PAGE, blueprint, dump, in_api_words, page
from server.api.estimates import BestOut, EstimateOut, RepresentativenessOut
from server.db import get_session
from server.schemas import (
    AnalysisIn,
    AnalysisOut,
    AnalysisPath,
    AuditClassify,
    AuditCreate,
    AuditLabelsIn,
    AuditLabelsOut,
    AuditResultOut,
    AuditRunOut,
    AuditRunQuery,
    BbqAnalysisIn,
    BbqAnalysisOut,
    CsvQuery,
    FollowupCampaignIn,
    FollowupCampaignOut,
    FollowupOut,
    FollowupPullIn,
    FollowupPullOut,
    JobOut,
    Page,
    PageQuery,
    ReportOut,
    RunPath,
    Strict,
)
from server.usecases import audits, campaigns, rendering

bp = blueprint("audits", __name__, "audits")


def _engine():  # type: ignore[no-untyped-def]
    return current_app.extensions["fairjudge_engine"]


@bp.post("/audits", responses={202: JobOut})
def start_audit(body: AuditCreate) -> Any:
    """Queue an audit job: the suite's design sent to the model under test.

    Every answer is stored with its raw text; a run with the same settings is resumed. The
    job's result names the run (``audit_run_id``) as soon as it is made. A member key's audit
    over the server's ``confirm_calls`` or ``confirm_cost`` (a whole names design is
    168,000 calls) is refused with its figure unless ``confirm`` is true."""
    from server.api.jobs import queue_job

    params = body.to_params()
    params.pop("confirm", None)
    return dump(JobOut, queue_job("audit", params, confirm=body.confirm)), 202


@bp.get("/audit-runs", responses={200: Page[AuditRunOut]})
def list_audit_runs(query: AuditRunQuery) -> Any:
    """Audit runs, newest first, optionally of one suite, with their answers counted."""
    runs = audits.list_runs(get_session(), query.suite)
    chosen = runs[query.offset : query.offset + query.limit]
    return page(AuditRunOut, chosen, len(runs), query.limit, query.offset)


def _result(run_id: int) -> audits.AuditResult:
    """The run read back, its cost at the prices the server's config gives."""
    return audits.audit_result(get_session(), run_id, current_app.config["SETTINGS"])


@bp.get("/audit-runs/<int:run_id>", responses={200: AuditResultOut})
def audit_run(path: RunPath) -> Any:
    """One audit run read back: settings, answers by status, cost, figures, follow-up classes.

    The answers' tokens and cost (live and at the batch price), the suite's figures (or
    why there are none yet), the follow-up classes with their chi-square tests and
    agreement, and up to 20 answers that gave no reading, verbatim. Figures that are not
    numbers (NaN) are null."""
    return audits.finite(_result(path.run_id).to_dict())


class AuditReportQuery(Strict):
    """Whether to refuse figures a judge classified."""

    require_qualified: bool = Field(
        default=False,
        description="Answer 409 when a judge classified any of the run's answers: no "
        "qualification covers an audit's own judge (qualifications cover judge runs' "
        "rubrics), as `fairjudge audit show --require-qualified` refuses.",
    )


def _require(run_id: int, wanted: bool) -> None:
    if wanted:
        audits.require_qualified_in(_engine(), run_id)


@bp.get("/audit-runs/<int:run_id>/report.json", responses={200: ReportOut})
def audit_report_json(path: RunPath, query: AuditReportQuery) -> Any:
    """The run's report data (what ``fairjudge audit show --out`` writes as report.json);
    409 with `require_qualified=true` when a judge classified some of its answers."""
    _require(path.run_id, query.require_qualified)
    return audits.finite(_result(path.run_id).report.to_json())


@bp.get("/audit-runs/<int:run_id>/report.html", responses={200: HTML_PAGE})
def audit_report_html(path: RunPath, query: AuditReportQuery) -> Any:
    """The run's report as one self-contained HTML page, charts included (409 with
    `require_qualified=true` as report.json)."""
    _require(path.run_id, query.require_qualified)
    report = _result(path.run_id).report
    return Response(rendering.html(report), mimetype="text/html")


@bp.get("/audit-runs/<int:run_id>/report.csv", responses={200: CSV_TABLE})
def audit_report_csv(path: RunPath, query: CsvQuery) -> Any:
    """One of the report's tables as CSV (``table``: its file name, e.g. award.csv)."""
    report = _result(path.run_id).report
    name, text = rendering.csv_table(report, query.table)
    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    return Response(text, mimetype="text/csv", headers=headers)


@bp.post("/audit-runs/<int:run_id>/classify", responses={202: JobOut})
def classify(path: RunPath, body: AuditClassify) -> Any:
    """Queue a job in which the judge classifies an award run's follow-up explanations.

    Each explanation becomes indecisive, justified or irrational. Resumable: only what is
    not classified yet, and replies that could not be read, are sent. A member key's job
    over the server's ``confirm_calls`` or ``confirm_cost`` (one call per explanation) is
    refused with its figure unless ``confirm`` is true."""
    from server.api.jobs import queue_job

    params: dict[str, Any] = {"run_id": path.run_id}
    if body.endpoint is not None:
        params["endpoint"] = body.endpoint
    return dump(JobOut, queue_job("audit-classify", params, confirm=body.confirm)), 202


@bp.get("/audit-runs/<int:run_id>/followups", responses={200: Page[FollowupOut]})
def followups(path: RunPath, query: PageQuery) -> Any:
    """One page of an award run's follow-up explanations, for people to classify.

    Send the classes to ``.../labels``. The chosen student's group is not shown."""
    rows = audits.followup_rows(get_session(), path.run_id)  # an unknown run is a 404
    chosen = rows[query.offset : query.offset + query.limit]
    return page(FollowupOut, chosen, len(rows), query.limit, query.offset)


class LabelsError(InvalidInputError):
    """A batch of classes refused; ``problems`` pairs each bad entry's index in ``labels``
    (from 0, as the JSON array counts) with the reason."""

    def __init__(self, message: str, problems: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.problems = problems
        shown = "\n".join(f"  labels[{n}]: {why}" for n, why in problems[:50])
        if len(problems) > 50:
            shown += f"\n  ... and {len(problems) - 50} more"
        self.args = (f"{message}\n{shown}",)


@bp.post("/audit-runs/<int:run_id>/labels", responses={200: AuditLabelsOut})
def store_labels(path: RunPath, body: AuditLabelsIn) -> Any:
    """Store one person's classes for an award run's follow-up explanations.

    All or nothing: a batch with a bad entry is refused, every bad entry named. A class sent
    again replaces that person's earlier one. 201 when something was added or changed,
    else 200."""
    audits.run_info(get_session(), path.run_id)  # an unknown run is a 404
    entries = [(n, e.answer_id, e.label) for n, e in enumerate(body.labels)]
    what = "no class was stored: fix these labels and send the batch again"
    try:
        counts = audits.store_labels(_engine(), path.run_id, body.annotator, entries, what=what)
    except InvalidInputError as exc:
        if not exc.problems:
            raise
        raise LabelsError(what, exc.problems) from None
    status = 201 if counts["added"] or counts["changed"] else 200
    return dump(AuditLabelsOut, counts), status


@bp.post("/audits/<suite>/analyze", responses={200: AnalysisOut})
def analyze(path: AnalysisPath, body: AnalysisIn) -> Any:
    """A suite's statistics on answers of one's own sent as CSV text (nothing is stored): the
    award's binomial tests (or the follow-up's chi-square), the names audit's means and
    Welch's tests, or BBI. A bad line is a 400 naming it."""
    return audits.analyze_csv_text(path.suite, body.csv)


@bp.post("/audits/bbq/analyze", responses={200: BbqAnalysisOut})
def analyze_bbq(body: BbqAnalysisIn) -> Any:
    """BBQ's figures for predictions made elsewhere, sent as JSON-lines text (nothing is
    stored, no model is called): accuracy per context, s_DIS and s_AMB with template
    bootstrap intervals and their n, per category and overall; items with no single target
    and predictions naming no option counted apart. The figures of `fairjudge audit bbq
    analyze --from-file` on the same items. A bad text is a 400 listing every problem by
    line; a body over ``[server] max_body_mb`` a 413."""
    from server.usecases.audit_bbq import analyze_bbq_text

    found = analyze_bbq_text(
        body.jsonl, predictions=body.predictions, categories=body.categories,
        resamples=body.resamples, seed=body.seed,
    )  # fmt: skip
    return dump(BbqAnalysisOut, found)


@bp.post("/audit-runs/<int:run_id>/campaign", responses={201: FollowupCampaignOut})
def followup_campaign(path: RunPath, body: FollowupCampaignIn) -> Any:
    """Send an award run's follow-up explanations to Label Studio, one task each, for people
    to classify (the chosen student's group is not shown); again, only what is missing."""
    settings = current_app.config["SETTINGS"]
    made = campaigns.create_followup_campaign(
        _engine(), settings, path.run_id, title=body.title, annotators=body.annotators,
        project_id=body.project,
    )  # fmt: skip
    return made, 201


@bp.post("/audit-runs/<int:run_id>/campaign/pull", responses={200: FollowupPullOut})
def followup_pull(path: RunPath, body: FollowupPullIn) -> Any:
    """Store each person's class of the run's follow-ups from the Label Studio project
    (idempotent; a changed choice replaces the stored one)."""
    settings = current_app.config["SETTINGS"]
    result = campaigns.pull_followup_labels(_engine(), settings, path.run_id, body.project)
    return result.to_dict()


class FollowupEstimatesQuery(AuditReportQuery):
    """Which judge's classes, the design to assume for people's, the intervals' level."""

    assume_random: bool = Field(
        default=False,
        description="Treat the follow-ups people classified as a simple random sample of the "
        "run's; without it a subset gives no human-only or prediction-powered estimate. "
        "The subset is checked against the rest first, as for a judge run's estimates.",
    )
    accept_unrepresentative: bool = Field(
        default=False,
        description="With assume_random: use people's classes even when they fail that check; "
        "the design's name then says so.",
    )
    alpha: float = Field(
        default=0.05, ge=0.001, le=0.5, description="1 - the intervals' coverage (0.05: 95 %)."
    )
    judge: str | None = Field(
        default=None,
        min_length=1,
        max_length=300,
        description="The judge whose classes to use (judge:ENDPOINT/MODEL), where several "
        "classified; default: the only one.",
    )


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FollowupDesignOut(_Out):
    """How people's classes are used."""

    name: str = Field(description="census, assumed random, refused or no labels.")
    usable: bool = Field(description="False: no human-only or prediction-powered estimate.")
    description: str
    reason: str = Field(description="Why people's classes cannot be used; empty when they can.")
    representativeness: RepresentativenessOut | None = Field(
        default=None,
        description="For an assumed random design: how the follow-ups people classified "
        "compare with the rest, per class ('rubric' holds the class).",
    )


class FollowupCountsOut(_Out):
    """What was read: follow-ups, the judge's classes by outcome, people's."""

    followups: int = Field(description="Answered follow-ups of the run.")
    judge_classified: int = Field(description="Follow-ups whose judge class could be read.")
    judge_unparsed: int = Field(description="Judge replies with no readable class (left out).")
    judge_failed: int = Field(description="Judge calls that failed for good (left out).")
    judge_missing: int = Field(description="Follow-ups never sent to the judge.")
    people: list[str] = Field(description="Annotators who classified some.")
    human_classified: int = Field(description="Follow-ups with at least one person's class.")
    human_labels: int = Field(description="Classes people gave, all together.")
    several_people: int = Field(description="Follow-ups classified by more than one person.")
    human_unjudged: int = Field(
        description="Follow-ups people classified without a readable judge class: used by "
        "human-only, not by prediction-powered."
    )


class ClassShareOut(_Out):
    """One class's share of the follow-ups of one cell (percent), three ways."""

    chosen: str = Field(description="all, A or B: the group the model chose first.")
    group: str = Field(description="all, or the chosen group's label.")
    label: str = Field(description="indecisive, justified or irrational.")
    followups: int = Field(description="Answered follow-ups of the cell.")
    judge_only: EstimateOut
    human_only: EstimateOut
    prediction_powered: EstimateOut
    best: BestOut


class ClassGapOut(_Out):
    """Group A's share of a class minus group B's (percentage points), three ways."""

    label: str
    a: str = Field(description="Group A's label.")
    b: str = Field(description="Group B's label.")
    judge_only: EstimateOut
    human_only: EstimateOut
    prediction_powered: EstimateOut
    best: BestOut


class FollowupEstimatesOut(_Out):
    """An award run's follow-up class shares and gaps: judge-only, human-only and
    prediction-powered side by side."""

    audit_run: int
    judge: str = Field(description="The judge's source, judge:ENDPOINT/MODEL.")
    groups: dict[str, str] = Field(description="A and B -> the groups' labels.")
    alpha: float
    design: FollowupDesignOut
    people_combined: str = Field(description="How several people's classes of one combine.")
    counts: FollowupCountsOut
    shares: list[ClassShareOut]
    gaps: list[ClassGapOut]


@bp.get("/audit-runs/<int:run_id>/estimates", responses={200: FollowupEstimatesOut})
def followup_estimates(path: RunPath, query: FollowupEstimatesQuery) -> Any:
    """Each follow-up class's share of an award run, overall and per chosen group, and the
    gap between the groups: judge-only, human-only and prediction-powered (PPI++).

    The shape of `fairjudge audit award estimates RUN --json`. People's classes carry no
    sampling design: where they cover a subset of the follow-ups, the human-only and
    prediction-powered estimates are null with the reason, unless `assume_random=true`. A
    run of another suite is a 400; one no judge classified, a 404; with
    `require_qualified=true`, 409 (no qualification covers the judge's classes)."""
    _require(path.run_id, query.require_qualified)
    found = audits.followup_estimates(
        get_session(), path.run_id, assume_random=query.assume_random, alpha=query.alpha,
        judge=query.judge, accept_unrepresentative=query.accept_unrepresentative,
        rules=current_app.config["SETTINGS"].estimates,
    )  # fmt: skip
    return in_api_words(dump(FollowupEstimatesOut, found.to_dict()))
