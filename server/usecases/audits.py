"""Audit use cases shared by the CLI, the web API and background jobs: run a suite against a
model, classify the award follow-ups with the judge, and read a run back as figures and a
report. Neither Flask nor click is imported here (as in ``server.usecases``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from server.usecases import make_client

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

    from judge.audits.runner import AuditSummary
    from judge.config import Settings
    from judge.reports.sections import Report
    from judge.runs import RunSummary

Progress = Callable[[int, int], None]


def finite(value: Any) -> Any:
    """``value`` with NaN and infinities as None, in nested dicts and lists: JSON has no NaN,
    and a test on too few answers gives one."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


DEFAULT_MAX_TOKENS = {"award": 300, "names": 200, "bbi": 2048}
"""Room for each suite's answer: a name (and, on the follow-up turn, an explanation), a number
with a sentence of rationale, one line per item of a 60-item batch."""
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
    progress: Progress | None = None,
    on_run: Callable[[int], None] | None = None,
) -> AuditSummary:
    """Send a suite's design to the model under test (the generation endpoint unless
    ``endpoint`` names another) and store every answer; resumes a run with the same
    settings. ``options`` are the suite's design options (see ``judge.audits.suites``)."""
    from judge.audits import runner
    from judge.audits.suites import make_suite

    suite = make_suite(suite_name, **options)
    client = make_client(settings, endpoint or settings.generation.endpoint)
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
    )


def classify_followups(
    engine: Engine,
    settings: Settings,
    run_id: int,
    *,
    endpoint: str | None = None,
    progress: Progress | None = None,
) -> RunSummary:
    """The judge's class for every follow-up explanation of an award run (the judge endpoint
    unless ``endpoint`` names another), at the judge's temperature."""
    from judge.audits.followup import check_award_run
    from judge.audits.followup import classify_followups as classify
    from judge.prompts import PromptBook
    from judge.store.engine import session_scope

    with session_scope(engine) as session:  # a wrong run is named before any endpoint is tried
        check_award_run(session, run_id)
    cfg = settings.judge
    return classify(
        engine,
        make_client(settings, endpoint or cfg.endpoint),
        PromptBook(settings.prompts_path()),
        run_id,
        temperature=cfg.temperature,
        max_tokens=cfg.max_tokens,
        progress=progress,
    )


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.info,
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


def audit_result(session: Session, run_id: int) -> AuditResult:
    """Everything one run says: figures, counts, follow-up tests and agreement, and the
    report (tables, bar charts, the answers that could not be read, raw text kept)."""
    from judge.audits import followup as fu
    from judge.audits.run_report import answers_section, followup_sections
    from judge.audits.runner import get_run, status_counts, stored_answers, unread
    from judge.audits.suites import SUITES
    from judge.errors import InvalidInputError
    from judge.reports.sections import Report

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
        sections += followup_sections(tests, agreement)
    info = _info(run)
    sections.insert(0, answers_section(info, statuses, examples, error))
    title = f"FairJudge audit run {run.id}: {run.suite} on {run.model}"
    report = Report(title, f"Endpoint {run.endpoint_name}; status {run.status}.", sections)
    return AuditResult(info, statuses, analysis, error, followup, examples, report)
