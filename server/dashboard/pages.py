"""What each dashboard page shows, gathered in one call per page (no Flask here: the views
parse the request, call one of these and render its result).

The numbers come from the same use cases the JSON API serialises (``list_runs``,
``full_report``, the job queue), so a page and the API cannot disagree; the job form parses
into the judge job's request (``JudgeRequest``), as the CLI's options and the API's
parameters do.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast, get_args

from sqlmodel import Session

from judge.config import JudgeConfig, Settings
from judge.errors import InvalidInputError, NotFoundError
from server import usecases
from server.jobs import queue
from server.usecases.jobs import job_request
from server.usecases.requests import MAX_ID, JudgeRequest

if TYPE_CHECKING:
    from server.usecases import Report, Section
    from server.usecases.jobs import Job
    from server.usecases.runs import GenerationRunInfo, RunListing

API = "/api/v1"
"""Where the JSON API lives; the judge run page links its reports there."""
REPORT_FORMATS = ("html", "json", "csv")
JOBS_SHOWN = 50
"""Jobs the overview lists, newest first (the JSON API pages through the rest)."""
FINAL = ("finished", "failed", "cancelled")
"""Job statuses that no longer change: a page showing one stops polling."""
PROMPT_VARIANTS: tuple[str, ...] = get_args(JudgeConfig.model_fields["prompt_variant"].annotation)
AGGREGATIONS: tuple[str, ...] = get_args(JudgeConfig.model_fields["aggregation"].annotation)


def row_id(kind: str, value: int) -> int:
    """``value`` when it can be a row's id; else NotFoundError (a 404 page), where the
    database would fail to bind a number past 64 bits (a 500)."""
    if not 1 <= value <= MAX_ID:
        raise NotFoundError(f"no {kind} {value} (ids run from 1 to {MAX_ID})")
    return value


@dataclass(frozen=True)
class Overview:
    """Generation runs, judge runs and the newest jobs."""

    runs: RunListing
    jobs: list[Job]  # the newest JOBS_SHOWN
    jobs_total: int  # jobs in the store


def overview(session: Session) -> Overview:
    jobs, total = queue.list_jobs(session, limit=JOBS_SHOWN)
    return Overview(usecases.list_runs(session), jobs, total)


@dataclass(frozen=True)
class ShownFigure:
    title: str
    png_base64: str  # the PNG ``judge.reports.render`` draws, for an inline data: URL


@dataclass(frozen=True)
class ShownSection:
    section: Section
    figures: list[ShownFigure]


@dataclass(frozen=True)
class JudgeRunPage:
    """A judge run's report as the dashboard shows it: every section's tables, notes and
    figures, except the item browser, which the HTML report (linked) holds."""

    run_id: int
    report: Report
    sections: list[ShownSection]
    report_links: dict[str, str]  # format -> URL of the API's report


def judge_run_page(session: Session, run_id: int, settings: Settings | None = None) -> JudgeRunPage:
    from server.usecases.rendering import figure_png  # matplotlib: only for this page

    report = usecases.full_report(session, row_id("judge run", run_id), settings=settings)
    shown = [
        ShownSection(
            section,
            [
                ShownFigure(figure.title, base64.b64encode(figure_png(figure)).decode("ascii"))
                for figure in section.figures
            ],
        )
        for section in report.sections
        if section.browser is None
    ]
    links = {fmt: f"{API}/judge-runs/{run_id}/report.{fmt}" for fmt in REPORT_FORMATS}
    return JudgeRunPage(run_id, report, shown, links)


@dataclass(frozen=True)
class JobForm:
    """The choices of the form that starts a judge job, and the values it shows."""

    generation_runs: list[GenerationRunInfo]
    endpoints: list[str]
    prompt_variants: tuple[str, ...]
    aggregations: tuple[str, ...]
    values: dict[str, str]  # field -> value shown: what was sent, else the config's default


def job_form(session: Session, settings: Settings, sent: Mapping[str, str]) -> JobForm:
    """The form, filled with ``sent`` (a resubmission, or ``?generation_run_id=`` from a
    link) over the config's judge settings."""
    cfg = settings.judge
    defaults = {
        "generation_run_id": "",
        "endpoint": cfg.endpoint,
        "prompt_variant": cfg.prompt_variant,
        "temperature": f"{cfg.temperature:g}",
        "samples": str(cfg.samples),
        "aggregation": cfg.aggregation,
        "rubric_set": "",
        "swap_order": "",
        "max_cost": "",
    }
    values = {name: sent.get(name, default) for name, default in defaults.items()}
    runs = usecases.list_runs(session).generation_runs
    return JobForm(runs, sorted(settings.endpoints), PROMPT_VARIANTS, AGGREGATIONS, values)


def judge_request(form: Mapping[str, str]) -> JudgeRequest:
    """The judge job's request from the form; a blank optional field is None (the config's
    value). InvalidInputError names each field that cannot be read, then each value the
    request refuses (as the job API says it)."""
    problems: list[str] = []

    def number(name: str, kind: type[int] | type[float], *, required: bool = False) -> Any:
        text = form.get(name, "").strip()
        if not text:
            if required:
                problems.append(f"{name}: choose one")
            return None
        try:
            return kind(text)
        except ValueError:
            problems.append(
                f"{name}: {text!r} is not {'an integer' if kind is int else 'a number'}"
            )
            return None

    def text(name: str) -> str | None:
        return form.get(name, "").strip() or None

    fields = {
        "generation_run_id": number("generation_run_id", int, required=True),
        "endpoint": text("endpoint"),
        "prompt_variant": text("prompt_variant"),
        "temperature": number("temperature", float),
        "samples": number("samples", int),
        "aggregation": text("aggregation"),
        "rubric_set": text("rubric_set"),
        "swap_order": True if text("swap_order") else None,  # a checkbox: sent only when on
        "max_cost": number("max_cost", float),
    }
    if problems:
        raise InvalidInputError("the judge job form has errors: " + "; ".join(problems))
    given = {name: value for name, value in fields.items() if value is not None}
    return cast(JudgeRequest, job_request("judge", given))  # the judge kind's request type


@dataclass(frozen=True)
class JobPage:
    """One job, and for a judge job that finished, its judge run and judgment counts."""

    job: Job
    final: bool
    judge_run_id: int | None
    judgments: dict[str, int]  # status (scored, unscored) -> count in the judge run


def job_page(session: Session, job_id: int) -> JobPage:
    job = queue.get_job(session, row_id("job", job_id))
    run_id = (job.result or {}).get("judge_run_id")
    judgments = usecases.judgment_counts(session, run_id) if isinstance(run_id, int) else {}
    return JobPage(job, job.status in FINAL, run_id if isinstance(run_id, int) else None, judgments)
