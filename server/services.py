"""Use cases shared by the CLI, the web API and (later) background jobs. Neither Flask nor
click is imported here: each function takes settings or a session and returns typed results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session

from annotation.sections import reliability_section
from judge import generation, paths
from judge.config import Settings
from judge.data.catalog import ImportSummary, import_items
from judge.grading import judging
from judge.grading.rubrics import RubricSet, load_rubrics
from judge.models.client import ModelClient
from judge.models.embedded import EmbeddedServer
from judge.prompts import PromptBook
from judge.reports.browser import item_browser_section
from judge.reports.compare import compare_section, compared_runs
from judge.reports.consistency import self_consistency_section
from judge.reports.render import write_report
from judge.reports.run_report import metrics_section
from judge.reports.sections import Report
from judge.runs import RunSummary
from judge.store.engine import make_engine, session_scope
from judge.store.queries import get_generation_run, get_judge_run

Progress = Callable[[int, int], None]


def open_store(settings: Settings) -> Engine:
    return make_engine(settings.database_url)


def rubrics(settings: Settings) -> RubricSet:
    return load_rubrics(settings.prompts_path())


def make_client(settings: Settings, endpoint: str) -> ModelClient:
    """A client for a named endpoint, after checking that it serves the configured model."""
    client = ModelClient(endpoint, settings.endpoint(endpoint))
    client.check_model()
    return client


def generate(
    engine: Engine,
    settings: Settings,
    dataset: str,
    *,
    limit: int | None = None,
    new: bool = False,
    progress: Progress | None = None,
) -> RunSummary:
    """Answers from the model under test for a dataset (resumes a run with the same settings)."""
    cfg = settings.generation
    return generation.generate(
        engine,
        make_client(settings, cfg.endpoint),
        PromptBook(settings.prompts_path()),
        dataset,
        temperature=cfg.temperature,
        max_tokens=cfg.max_tokens,
        limit=limit,
        new=new,
        progress=progress,
    )


def judge(
    engine: Engine, settings: Settings, generation_run_id: int, *, progress: Progress | None = None
) -> RunSummary:
    """Rubric scores for a generation run's answers (resumes a run with the same settings)."""
    with session_scope(engine) as session:
        get_generation_run(session, generation_run_id)  # a missing run fails before any call
    return judging.judge(
        engine,
        make_client(settings, settings.judge.endpoint),
        PromptBook(settings.prompts_path()),
        rubrics(settings),
        settings.judge,
        generation_run_id,
        progress=progress,
    )


def full_report(session: Session, judge_run_id: int, *, with_reliability: bool = True) -> Report:
    """The one report of a judge run, used by the CLI, the API and the demo: stage metrics,
    the judge's self-consistency (several samples), its reliability (human ratings) and the
    browser of every judged item."""
    jrun = get_judge_run(session, judge_run_id)
    grun = get_generation_run(session, jrun.generation_run_id)
    sections = [metrics_section(session, judge_run_id)]
    consistency = self_consistency_section(session, judge_run_id)
    if consistency is not None:
        sections.append(consistency)
    if with_reliability:
        reliability = reliability_section(session, judge_run_id)
        if reliability is not None:
            sections.append(reliability)
    sections.append(item_browser_section(session, judge_run_id))
    return Report(
        title=f"FairJudge report: {grun.model} (judge run {judge_run_id})",
        intro=f"FairMonitor bias evaluation of {grun.model} ({grun.endpoint_name}, temperature "
        f"{grun.temperature:g}), judged by {jrun.model} ({jrun.prompt_variant} prompt, "
        f"temperature {jrun.temperature:g}). Run status: {jrun.status}"
        + (f" ({jrun.status_detail})" if jrun.status_detail else "")
        + ".",
        sections=sections,
    )


def compare_report(session: Session, judge_run_ids: Sequence[int]) -> Report:
    """Several judge runs side by side: the stage metrics of each model (or judge
    configuration) per factor and stage, with intervals and unscored counts, and their score
    distributions. Refuses run ids that do not exist, and fewer than two distinct runs."""
    runs = compared_runs(session, judge_run_ids)
    section = compare_section(session, runs)
    labels = ", ".join(r.label for r in runs)
    return Report(
        title=f"FairJudge comparison: {labels}",
        intro=f"FairMonitor stage metrics of {len(runs)} judge runs side by side ("
        + "; ".join(r.describe() for r in runs)
        + ").",
        sections=[section],
    )


def import_dataset(
    engine: Engine, path: str | Path, name: str | None = None, *, allow_unmapped: bool = False
) -> ImportSummary:
    """Import an item file; pairs of factor and scenario outside the paper's table are
    warnings in the summary unless ``allow_unmapped``."""
    with session_scope(engine) as session:
        return import_items(session, path, name or Path(path).stem, allow_unmapped=allow_unmapped)


@dataclass(frozen=True)
class DemoResult:
    dataset: ImportSummary
    generation: RunSummary
    judging: RunSummary
    report: Report
    paths: dict[str, Path]


@dataclass(frozen=True)
class DemoHooks:
    """How the caller hears about the demo's progress (the CLI prints, tests record)."""

    say: Callable[[str], None]
    progress: Callable[[str], Progress | None]


def demo(
    settings: Settings,
    out_dir: str | Path,
    hooks: DemoHooks,
    *,
    dataset_file: str | Path | None = None,
    limit: int | None = None,
) -> DemoResult:
    """The whole pipeline on the configured endpoints: start the embedded model if it is not
    running, import, generate, judge, write the report, and stop the server it started."""
    dataset_file = Path(dataset_file) if dataset_file else paths.sample_dataset()
    server = EmbeddedServer(settings.embedded, settings.state_dir)
    started = server.served_models() is None
    hooks.say(
        "starting the embedded model server..."
        if started
        else "using the embedded model server that is already running"
    )
    server.start()
    try:
        engine = open_store(settings)
        imported = import_dataset(engine, dataset_file)
        hooks.say(f"dataset {imported.dataset}: {imported.total} items ({imported.added} new)")
        gen = generate(
            engine, settings, imported.dataset, limit=limit, progress=hooks.progress("generating")
        )
        hooks.say(summary_line("generation", gen))
        jud = judge(engine, settings, gen.run_id, progress=hooks.progress("judging"))
        hooks.say(summary_line("judge", jud))
        with session_scope(engine) as session:
            report = full_report(session, jud.run_id)
        written = write_report(report, out_dir)
        return DemoResult(imported, gen, jud, report, written)
    finally:
        if started:
            server.stop()
            hooks.say("stopped the embedded model server")


def summary_line(kind: str, s: RunSummary) -> str:
    """One line for people about a pass over a run, e.g. 'judge run 2: 64 to do, 64 model
    calls, 0 from cache, 66 HTTP requests; 60 scored, 4 unscored'."""
    outcome = ", ".join(f"{n:,} {flag}" for flag, n in sorted(s.flags.items())) or "nothing new"
    return (
        f"{kind} run {s.run_id}: {s.tasks:,} to do, {s.model_calls:,} model calls, "
        f"{s.cached:,} from cache, {s.http_attempts:,} HTTP requests; {outcome}"
    )
