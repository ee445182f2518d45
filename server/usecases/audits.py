"""Audit use cases shared by the CLI, the web API and background jobs: run a suite against a
model, store people's classes of the award follow-ups (the judge's classes:
server/usecases/followups.py), read a run back as figures and a report, and analyse answers
classified elsewhere. Neither Flask nor click is imported here (as in ``server.usecases``).

One request per use case: ``AuditRequest`` (the suite, its design options and who is asked
how) is what the API's ``POST /audits`` body and an audit job's parameters are; the CLI's
``AuditRunRequest`` adds the input files and ``new`` that only the CLI may give. Without
them a suite reads its bundled design, or for BBQ the items the server's config names
(``design_inputs``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from annotation.estimate_results import finite  # the one definition; the CLI and API use it
from judge.audits.award_csv import read_award_csv
from judge.audits.award_data import load_name_groups
from judge.audits.report import award_report, bbi_report, names_report
from judge.audits.suites import SUITES, make_suite
from judge.errors import FairJudgeError, InvalidInputError
from judge.progress import Progress
from judge.reports.sections import Report
from server.usecases.audit_requests import AuditRequest, suite_inputs
from server.usecases.context import make_client, run_prices

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

    from judge.audits.runner import AuditSummary
    from judge.config import Settings


DEFAULT_MAX_TOKENS = {"award": 300, "names": 200, "bbi": 2048, "bbq": 100}
"""Room for each suite's answer: a name (and, on the follow-up turn, an explanation), a number
with a sentence of rationale, one line per item of a 60-item batch, a BBQ option."""
DEFAULT_TEMPERATURE = 1.0
"""The seeds sampled their models at the providers' default temperature (1.0): the repeats of
the name and BBI audits only differ when sampling does."""


def run_audit(
    engine: Engine,
    settings: Settings,
    suite_name: str,
    options: dict[str, Any],
    *,
    endpoint: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    limit: int | None = None,
    new: bool = False,
    max_cost: float | None = None,
    progress: Progress | None = None,
    on_run: Callable[[int], None] | None = None,
) -> AuditSummary:
    """Send a suite's design to the model under test (the generation endpoint unless
    ``endpoint`` names another) and store every answer; resumes a run with the same
    settings. ``options`` are the suite's design options (see ``judge.audits.suites``).
    ``max_cost``: stop before spending more, at the endpoint's prices (refused before any
    call without them)."""
    from judge.audits import runner
    from judge.costs import Prices, make_budget

    suite = make_suite(suite_name, **options)
    name = endpoint or settings.generation.endpoint
    budget = make_budget(max_cost, Prices.of(settings.endpoint(name)), name)
    client = make_client(settings, name)
    return runner.run_audit(
        engine,
        client,
        suite,
        temperature=DEFAULT_TEMPERATURE if temperature is None else temperature,
        max_tokens=max_tokens or DEFAULT_MAX_TOKENS[suite.name],
        limit=limit,
        new=new,
        progress=progress,
        on_run=on_run,
        budget=budget,
        max_unusable=settings.runs.max_unusable_share,
    )


def audit_dry_run(engine: Engine, settings: Settings, request: AuditRequest) -> dict[str, Any]:
    """What ``audit`` with ``request`` would send and cost, with nothing sent or stored: the
    first-turn prompts to ask, those the call cache holds, an estimate of the rest (prompt
    tokens from the model's measured tokens per character where there is one, completion
    tokens at most ``max_tokens`` and typically the model's measured mean answer to this
    suite; cost live and at the batch price), and for the award audit with follow-ups a
    second estimate of the "why?" turn, which is asked only after an answer that chose."""
    from judge.audits import runner
    from judge.costs import Prices, estimate, measured_audit_tokens, measured_tokens_per_char
    from judge.models.client import ModelClient
    from judge.store.engine import session_scope

    files, new = design_inputs(settings, request)
    suite = make_suite(request.suite, **{**request.options, **files})
    name = request.endpoint or settings.generation.endpoint
    endpoint = settings.endpoint(name)
    client = ModelClient(name, endpoint)  # no /models check: a dry run sends nothing
    temperature = DEFAULT_TEMPERATURE if request.temperature is None else request.temperature
    max_tokens = request.max_tokens or DEFAULT_MAX_TOKENS[suite.name]
    planned = runner.plan_audit(
        engine, client, suite, temperature=temperature, max_tokens=max_tokens,
        limit=request.limit, new=new,
    )  # fmt: skip
    with session_scope(engine) as session:
        ratio = measured_tokens_per_char(session, client.model)
        typical = measured_audit_tokens(session, client.model, suite.name)
    prices = Prices.of(endpoint)
    main = estimate(
        planned.to_send, max_tokens=max_tokens, prices=prices, tokens_per_char=ratio,
        completion_tokens=typical, repairs=False,
    )  # fmt: skip
    followup = None
    if planned.followups:
        followup = estimate(
            planned.followups, max_tokens=max_tokens, prices=prices, tokens_per_char=ratio,
            repairs=False, unknown_prompt_tokens=planned.replies_to_come * max_tokens,
        ).to_json()  # fmt: skip
    return {
        "audit_run_id": planned.run_id,
        "suite": suite.name,
        "endpoint": name,
        "model": client.model,
        "prompts": planned.prompts,
        "prompts_to_ask": planned.to_ask,
        "cached_calls": planned.cached,
        "calls_to_send": len(planned.to_send),
        "estimate": main.to_json(),
        "followup_calls_max": len(planned.followups),
        "followup_estimate": followup,
    }


@dataclass(frozen=True)
class AuditResult:
    """One run read back: its settings, its answers counted by status, the suite's figures,
    the follow-up classes and their agreement where there are any, and the report."""

    info: dict[str, Any]
    statuses: dict[str, dict[str, int]]
    analysis: dict[str, Any] | None
    analysis_error: str | None
    followup: dict[str, Any]
    unread: list[dict[str, Any]]
    report: Report
    cost: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.info,
            "cost": self.cost,
            "answers": self.statuses,
            "analysis": self.analysis,
            "analysis_error": self.analysis_error,
            "followup": self.followup,
            "unread_examples": self.unread,
        }


def run_info(session: Session, run_id: int) -> dict[str, Any]:
    from judge.audits.runner import get_run

    run = get_run(session, run_id)
    return _info(run)


def _info(run: Any) -> dict[str, Any]:
    return {
        "id": run.id,
        "suite": run.suite,
        "endpoint": run.endpoint_name,
        "model": run.model,
        "temperature": run.temperature,
        "max_tokens": run.max_tokens,
        "params": run.params,
        "status": run.status,
        "status_detail": run.status_detail,
        "created_at": run.created_at.isoformat() if run.created_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }


def list_runs(session: Session, suite: str | None = None) -> list[dict[str, Any]]:
    """Every audit run, newest first, with its answers counted."""
    from sqlalchemy import func
    from sqlmodel import col, select

    from judge.store.tables import AuditAnswer, AuditRun

    query = select(AuditRun).order_by(col(AuditRun.id).desc())
    if suite is not None:
        query = query.where(AuditRun.suite == suite)
    counts = dict(
        session.exec(
            select(AuditAnswer.run_id, func.count()).group_by(col(AuditAnswer.run_id))
        ).all()
    )
    return [{**_info(run), "answers": counts.get(run.id or 0, 0)} for run in session.exec(query)]


def audit_result(session: Session, run_id: int, settings: Settings | None = None) -> AuditResult:
    """Everything one run says: figures, counts, follow-up tests and agreement, the tokens
    and their cost (at the endpoint's prices in ``settings``, live and at the batch price;
    unknown without them), and the report (tables, bar charts, the answers that could not be
    read, raw text kept)."""
    from judge.audits import followup as fu
    from judge.audits.run_report import answers_section, followup_sections
    from judge.audits.runner import get_run, status_counts, stored_answers, unread
    from judge.costs import answers_cost

    run = get_run(session, run_id)
    assert run.id is not None
    suite = SUITES[run.suite]
    answers = stored_answers(session, run.id)
    statuses = status_counts(answers)
    examples = list(unread(answers))
    analysis: dict[str, Any] | None = None
    error: str | None = None
    sections = []
    try:
        result = suite.analyze(answers)
        analysis = result.to_dict()
        sections += suite.report(result).sections
    except InvalidInputError as exc:
        error = str(exc)
    followup: dict[str, Any] = {}
    if run.suite == "award":
        followup["classes"] = fu.label_counts(session, run.id)
        tests = {}
        for source in fu.sources(session, run.id):
            tests[source] = fu.followup_analysis(session, run.id, source)
        followup["tests"] = {k: v.to_dict() for k, v in tests.items()}
        agreement = None
        if len(tests) >= 2:
            agreement = fu.label_agreement(session, run.id)
            followup["agreement"] = agreement.to_dict()
        from server.usecases.standing import judged_parts_section, judged_parts_standing

        standing = judged_parts_standing(list(tests))
        if standing:
            followup["standing"] = standing
            sections.append(judged_parts_section(standing))  # before the classes' figures
        states = {source: v["state"] for source, v in standing.items()}
        sections += followup_sections(tests, agreement, states)
    info = _info(run)
    spent = answers_cost(session, "audit", run.id, run_prices(settings, run.endpoint_name))
    sections.insert(0, answers_section(info, statuses, examples, error, spent))
    title = f"FairJudge audit run {run.id}: {run.suite} on {run.model}"
    report = Report(title, f"Endpoint {run.endpoint_name}; status {run.status}.", sections)
    cost = spent.to_json()
    cost.pop("prices")
    return AuditResult(info, statuses, analysis, error, followup, examples, report, cost)


# -- one request for every interface --------------------------------------------------------


class AuditInputs(BaseModel):
    """Input files a suite's design may be read from instead of the bundled ones: the CLI's
    only (over HTTP they would let any key holder make the server read a file of its
    choosing), so they are not part of a job's parameters."""

    model_config = ConfigDict(extra="forbid")

    items: str | None = Field(default=None, description="award: the item bank (JSON).")
    names_file: str | None = Field(default=None, description="award: name groups (TOML).")
    design: str | None = Field(default=None, description="names: the design file (TOML).")
    stereoset: str | None = Field(default=None, description="bbi: StereoSet JSON.")
    crows_pairs: str | None = Field(default=None, description="bbi: CrowS-Pairs CSV.")
    data: str | None = Field(default=None, description="bbq: BBQ items (.jsonl file or folder).")

    SUITE_FILES: ClassVar[dict[str, tuple[str, ...]]] = {
        "award": ("items", "names_file"),
        "names": ("design",),
        "bbi": ("stereoset", "crows_pairs"),
        "bbq": ("data",),
    }

    def of(self, suite: str) -> dict[str, str]:
        """The files given for ``suite``; InvalidInputError for a file of another suite."""
        given = self.model_dump(exclude_none=True)
        wrong = sorted(set(given) - set(self.SUITE_FILES.get(suite, ())))
        if wrong:
            raise InvalidInputError(f"not an input of the {suite} suite: {', '.join(wrong)}")
        return given


class AuditRunRequest(AuditRequest):
    """An ``AuditRequest`` (the suite, its design and who is asked how: what the API and a
    job take) with what only the CLI may add: input files and ``new``."""

    NOT_FOR_JOBS: ClassVar[dict[str, str]] = {
        **AuditRequest.NOT_FOR_JOBS,
        "inputs": "a job reads the bundled designs only, and BBQ's items from the config's "
        "[audits] bbq_data (leave out --data)",
        "new": "a resumed job would start yet another run",
        "dry_run": "a job always runs; POST /jobs/dry-run says what it would cost",
    }

    inputs: AuditInputs = Field(default_factory=AuditInputs)
    new: bool = Field(default=False, description="Start a new run even if one matches.")
    dry_run: bool = Field(default=False, description="Only say what it would send and cost.")

    def job_problems(self) -> list[str]:
        return [
            f"{name}: {why}"
            for name, why in self.NOT_FOR_JOBS.items()
            if getattr(self, name)
            != type(self).model_fields[name].get_default(call_default_factory=True)
        ]


def design_inputs(settings: Settings | None, request: AuditRequest) -> tuple[dict[str, str], bool]:
    """The input files ``request``'s suite reads and whether it starts a new run: the CLI's
    own (an ``AuditRunRequest``'s ``inputs`` and ``new``), else those the config names
    (``suite_inputs``: BBQ's ``[audits] bbq_data``; InvalidInputError saying to set it when
    unset) and never a new run. ``audit bbq run`` without ``--data`` reads the config's."""
    if isinstance(request, AuditRunRequest):
        files = request.inputs.of(request.suite)
        if request.suite == "bbq" and "data" not in files:
            files = {**files, **suite_inputs(settings, "bbq")}
        return files, request.new
    return suite_inputs(settings, request.suite), False


def audit(
    engine: Engine,
    settings: Settings,
    request: AuditRequest,
    *,
    progress: Progress | None = None,
    on_run: Callable[[int], None] | None = None,
) -> AuditSummary:
    """Run the suite ``request`` names (``run_audit`` with the request's fields)."""
    files, new = design_inputs(settings, request)
    return run_audit(
        engine,
        settings,
        request.suite,
        {**request.options, **files},
        endpoint=request.endpoint,
        temperature=request.temperature,
        max_tokens=request.max_tokens,
        limit=request.limit,
        new=new,
        max_cost=request.max_cost,
        progress=progress,
        on_run=on_run,
    )


# -- reading runs back, in a session of their own (the CLI) ---------------------------------


def show(engine: Engine, run_id: int, settings: Settings | None = None) -> AuditResult:
    """``audit_result`` in a session of its own."""
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        return audit_result(session, run_id, settings)


def run_status(engine: Engine, run_id: int) -> dict[str, Any]:
    """``run_info`` in a session of its own."""
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        return run_info(session, run_id)


def runs(engine: Engine, suite: str | None = None) -> list[dict[str, Any]]:
    """``list_runs`` in a session of its own."""
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        return list_runs(session, suite)


# -- the award audit's follow-ups, classified by people -------------------------------------


def followup_columns() -> tuple[str, ...]:
    """The columns of the follow-ups CSV people fill in."""
    from judge.audits.followup import EXPORT_COLUMNS

    return tuple(EXPORT_COLUMNS)


def followup_rows(session: Session, run_id: int) -> list[dict[str, Any]]:
    """An award run's follow-up explanations for people to classify (the chosen student's
    group left out); NotFoundError for an unknown run."""
    from judge.audits.followup import export_rows

    run_info(session, run_id)  # an unknown run is named as such
    return export_rows(session, run_id)


def export_followups(engine: Engine, run_id: int) -> list[dict[str, Any]]:
    """The follow-up rows of ``export-followups`` (no run check: as the CLI always had)."""
    from judge.audits.followup import export_rows
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        return export_rows(session, run_id)


def import_labels(engine: Engine, run_id: int, path: str | Path, annotator: str) -> dict[str, int]:
    """Store one person's classes (CSV with answer_id,label) of an award run's follow-ups."""
    from judge.audits.followup import import_labels as store

    return store(engine, run_id, path, annotator)


def store_labels(
    engine: Engine,
    run_id: int,
    annotator: str,
    entries: list[tuple[int, int, str]],
    *,
    what: str,
) -> dict[str, int]:
    """Store one person's classes ((position, answer_id, label) each) all or nothing; a bad
    batch is an InvalidInputError whose ``problems`` pair positions with reasons."""
    from judge.audits.followup import store_labels as store

    return store(engine, run_id, annotator, entries, what=what)


# -- answers classified elsewhere (analyze --from-csv) --------------------------------------


@dataclass(frozen=True)
class Analysis:
    """A suite's figures from a CSV of answers classified elsewhere, and their report.
    ``note``: what the CSV could not give (a missing column), or None."""

    data: dict[str, Any]
    report: Report
    note: str | None = None


def analyze_award_csv(path: str | Path, names: str | Path | None = None) -> Analysis:
    """Binomial tests per level (level,choice) and, with a name_pair column, Kruskal-Wallis
    across name pairs; or the follow-up's chi-square (level,chosen_group,followup_class)."""
    from judge.audits import award as suite

    groups = load_name_groups(names) if names else None
    read = read_award_csv(path, groups)
    note = None
    if read.layout == "choice":
        result: Any = suite.analyze(read.choices)
        if not read.name_pairs:
            note = (
                "no Kruskal-Wallis test across name pairs: the CSV has no name_pair column "
                "(add one, e.g. Latoya/Mary; docs/audits.md)"
            )
    else:
        result = suite.analyze_followup(read.followups)
    data = {"layout": read.layout, **result.to_dict()}
    return Analysis(data, award_report(result), note)


def analyze_names_csv(path: str | Path) -> Analysis:
    """Means and CIs by race and gender, Welch's tests, per-name standardised means."""
    from judge.audits import names as suite

    result = suite.analyze(suite.read_answers_csv(Path(path)))
    return Analysis(result.to_dict(), names_report(result))


def analyze_bbi_csv(path: str | Path) -> Analysis:
    """RS, SBS per dataset and BBI, overall and per bias type (dataset,bias_type,label)."""
    from judge.audits import bbi as suite

    result = suite.analyze_labels(suite.read_labels_csv(Path(path)))
    return Analysis(result.to_dict(), bbi_report(result))


ANALYSES = ("award", "names", "bbi")


def analyze_csv_text(suite: str, text: str) -> dict[str, Any]:
    """A suite's statistics on CSV text sent in a request (``audit SUITE analyze`` on a
    file), as JSON with non-finite numbers as null, and its ``note`` when there is one; a
    problem names the text, not a temporary file."""

    if suite not in ANALYSES:
        raise InvalidInputError(f"unknown suite {suite!r}: use one of {', '.join(ANALYSES)}")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "answers.csv"
        path.write_text(text, encoding="utf-8")
        try:
            if suite == "award":
                found = analyze_award_csv(path)
            elif suite == "names":
                found = analyze_names_csv(path)
            else:
                found = analyze_bbi_csv(path)
        except FairJudgeError as exc:
            # the first line, naming the text; the problems (line numbers) stay as they are
            head = str(exc).split("\n", 1)[0]
            head = head.replace(f"the CSV file {path}", "the CSV text")
            head = head.replace(str(path), "the CSV text")
            raise InvalidInputError(head, getattr(exc, "problems", None)) from None
    return {"suite": suite, **finite(found.data), "note": found.note}


# -- the follow-up classes corrected by people's (prediction-powered) ------------------------

if TYPE_CHECKING:
    from annotation.followup_estimates import FollowupEstimates
    from judge.config_estimates import EstimatesConfig


def followup_estimates(
    session: Session,
    run_id: int,
    *,
    assume_random: bool = False,
    alpha: float = 0.05,
    judge: str | None = None,
    accept_unrepresentative: bool = False,
    rules: EstimatesConfig | None = None,
) -> FollowupEstimates:
    """Each follow-up class's share of an award run, overall and per chosen group, and the
    gap between the groups: judge-only, human-only and prediction-powered side by side
    (``annotation.followup_estimates``). NotFoundError for an unknown run or one no judge has
    classified; InvalidInputError for a run of another suite. ``assume_random`` is checked
    (``accept_unrepresentative`` overrides a failure; ``rules``: the config's
    ``[estimates]``), as for a judge run's estimates: a failed check is an InvalidInputError
    whose line gives the numbers, the bound and the override."""
    from annotation.estimate_checks import UNREPRESENTATIVE
    from annotation.followup_estimates import followup_estimates as estimate

    info = run_info(session, run_id)  # an unknown run is named as such
    if info["suite"] != "award":
        raise InvalidInputError(
            f"audit run {run_id} is a {info['suite']} audit; estimates of the follow-up "
            "classes need an award audit run with follow-ups"
        )
    found = estimate(
        session, run_id, judge=judge, assume_random=assume_random, alpha=alpha,
        accept_unrepresentative=accept_unrepresentative, rules=rules,
    )  # fmt: skip
    if found.design.name == UNREPRESENTATIVE:  # refused as `estimates` refuses it
        raise InvalidInputError(found.design.reason)
    return found


def followup_estimates_in(
    engine: Engine,
    run_id: int,
    *,
    assume_random: bool = False,
    alpha: float = 0.05,
    judge: str | None = None,
    accept_unrepresentative: bool = False,
    rules: EstimatesConfig | None = None,
) -> FollowupEstimates:
    """``followup_estimates`` in a session of its own (the CLI)."""
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        return followup_estimates(
            session, run_id, assume_random=assume_random, alpha=alpha, judge=judge,
            accept_unrepresentative=accept_unrepresentative, rules=rules,
        )  # fmt: skip


def require_qualified_in(engine: Engine, run_id: int) -> None:
    """``UnqualifiedError`` when a judge classified any of the audit run's answers (no
    qualification covers those classes: ``server.usecases.standing.judged_parts_standing``)."""
    from judge.audits import followup as fu
    from judge.audits.runner import get_run
    from judge.store.engine import session_scope
    from server.usecases.standing import require_judged_parts

    with session_scope(engine) as session:
        get_run(session, run_id)  # an unknown run is named as such
        sources = fu.sources(session, run_id)
    require_judged_parts(sources, f"audit run {run_id}")
