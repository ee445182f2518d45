"""Use cases shared by the CLI, the web API and (later) background jobs. Neither Flask nor
click is imported here: each function takes settings or a session and returns typed results.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Only what every command needs is imported here. The stages, the model client (openai), the
# reports (matplotlib) and the reliability section (scipy, scikit-learn, pandas) are imported
# inside the functions that use them, so a command that only reads the store starts in a
# fraction of the time (see tests/server/test_startup.py).
if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

    from annotation.labelstudio.campaigns import CreateResult
    from annotation.labelstudio.client import LabelStudioClient
    from annotation.labelstudio.service import LabelStudioService
    from judge.config import Settings
    from judge.costs import Prices
    from judge.data.catalog import ImportSummary
    from judge.data.catalogue import Catalogue
    from judge.data.generate import Cell
    from judge.dataset_generation import GenerationSummary
    from judge.dataset_generation import Options as GenerationOptions
    from judge.grading.registry import RegisteredRubric
    from judge.grading.rubrics import RubricSet
    from judge.models.client import ModelClient
    from judge.reports.sections import Report
    from judge.runs import RunSummary
    from judge.store.queries import GenerationRunInfo, JudgeRunInfo
    from judge.trust.audit import CounterfactualRun

Progress = Callable[[int, int], None]


def open_store(settings: Settings) -> Engine:
    from judge.store.engine import make_engine

    return make_engine(settings.database_url)


def rubrics(
    settings: Settings,
    session: Session | None = None,
    *,
    rubric_set: str | None = None,
    judge_run_id: int | None = None,
) -> RubricSet:
    """The built-in FairMonitor rubrics; with ``rubric_set`` ("NAME,NAME") the named built-in
    and registered rubrics; with ``judge_run_id`` the rubrics that judge run applied, in the
    versions it used (what a campaign over it rates). Both read through ``session``."""
    from judge.grading.registry import judge_run_rubric_set, resolve_rubric_set
    from judge.grading.rubrics import BUILTIN_SET, load_rubrics

    builtin = load_rubrics(settings.prompts_path())
    named = rubric_set is not None and rubric_set.strip().lower() != BUILTIN_SET
    if not named and judge_run_id is None:
        return builtin
    if session is None:
        raise ValueError("reading registered rubrics needs a session")
    if judge_run_id is not None:
        return judge_run_rubric_set(session, builtin, judge_run_id)
    return resolve_rubric_set(session, builtin, rubric_set)


def register_rubric(engine: Engine, source: str | Path) -> list[RegisteredRubric]:
    """Check and store the rubrics of a file (a Path to read, or its text as a str): all or
    none; an unchanged definition adds nothing, a changed one is the name's next version."""
    from judge.grading.registry import register_rubrics

    return register_rubrics(engine, source)


def list_rubrics(session: Session) -> list[RegisteredRubric]:
    """The latest version of every registered rubric, by name."""
    from judge.grading.registry import list_registered

    return list_registered(session)


def make_client(settings: Settings, endpoint: str) -> ModelClient:
    """A client for a named endpoint, after checking that it serves the configured model."""
    from judge.models.client import ModelClient

    client = ModelClient(endpoint, settings.endpoint(endpoint))
    client.check_model()
    return client


def generate(
    engine: Engine,
    settings: Settings,
    dataset: str,
    *,
    limit: int | None = None,
    accepted_only: bool = False,
    include_drafts: bool = False,
    new: bool = False,
    progress: Progress | None = None,
    on_run: Callable[[int], None] | None = None,
) -> RunSummary:
    """Answers from the model under test for a dataset (resumes a run with the same settings);
    ``on_run`` hears the run's id before any call."""
    from judge import generation
    from judge.prompts import PromptBook

    cfg = settings.generation
    return generation.generate(
        engine,
        make_client(settings, cfg.endpoint),
        PromptBook(settings.prompts_path()),
        dataset,
        temperature=cfg.temperature,
        max_tokens=cfg.max_tokens,
        limit=limit,
        accepted_only=accepted_only,
        include_drafts=include_drafts,
        new=new,
        progress=progress,
        on_run=on_run,
    )


def judge(
    engine: Engine,
    settings: Settings,
    generation_run_id: int,
    *,
    rubric_set: str | None = None,
    swap_order: bool = False,
    max_cost: float | None = None,
    progress: Progress | None = None,
    on_run: Callable[[int], None] | None = None,
) -> RunSummary:
    """Rubric scores for a generation run's answers (resumes a run with the same settings).
    ``rubric_set``: "fairmonitor" (the default) or registered or built-in rubric names,
    comma-separated; another set is another judge run. ``swap_order``: judge every pair in
    both orders (another judge run). ``max_cost``: stop before spending more, at the judge
    endpoint's prices (refused without them). ``on_run`` hears the judge run's id before
    any call."""
    from judge.costs import Budget, Prices
    from judge.grading import judging
    from judge.prompts import PromptBook
    from judge.store.engine import session_scope
    from judge.store.queries import get_generation_run

    with session_scope(engine) as session:
        get_generation_run(session, generation_run_id)  # a missing run fails before any call
        chosen = rubrics(settings, session, rubric_set=rubric_set)
    budget = None
    if max_cost is not None:  # refused before any call when the endpoint has no prices
        name = settings.judge.endpoint
        budget = Budget(max_cost, Prices.of(settings.endpoint(name)), endpoint=name)
    return judging.judge(
        engine,
        make_client(settings, settings.judge.endpoint),
        PromptBook(settings.prompts_path()),
        chosen,
        settings.judge,
        generation_run_id,
        progress=progress,
        on_run=on_run,
        swap_order=swap_order,
        budget=budget,
    )


def judge_dry_run(
    engine: Engine,
    settings: Settings,
    generation_run_id: int,
    *,
    rubric_set: str | None = None,
    swap_order: bool = False,
) -> dict[str, Any]:
    """What ``judge`` with these settings would send and cost, with nothing sent or stored:
    judgments to make, first calls the cache answers, and an estimate of the rest (tokens
    from this machine's measured ratio where there is one, cost at the endpoint's prices)."""
    from judge.costs import Prices, estimate, measured_completion_tokens, measured_tokens_per_char
    from judge.grading import judging
    from judge.models.client import ModelClient
    from judge.prompts import PromptBook
    from judge.store.engine import session_scope
    from judge.store.queries import get_generation_run

    name = settings.judge.endpoint
    endpoint = settings.endpoint(name)
    client = ModelClient(name, endpoint)  # no /models check: a dry run sends nothing
    with session_scope(engine) as session:
        get_generation_run(session, generation_run_id)
        chosen = rubrics(settings, session, rubric_set=rubric_set)
        ratio = measured_tokens_per_char(session, client.model)
        typical = measured_completion_tokens(session, client.model)
    planned = judging.plan_calls(
        engine, client, PromptBook(settings.prompts_path()), chosen, settings.judge,
        generation_run_id, swap_order=swap_order,
    )  # fmt: skip
    guess = estimate(
        planned.to_send, max_tokens=settings.judge.max_tokens, prices=Prices.of(endpoint),
        tokens_per_char=ratio, completion_tokens=typical,
    )  # fmt: skip
    return {
        "judge_run_id": planned.run_id,
        "endpoint": name,
        "model": client.model,
        "judgments_to_make": planned.judgments,
        "missing_answers": planned.missing_answers,
        "cached_calls": planned.cached,
        "calls_to_send": len(planned.to_send),
        "estimate": guess.to_json(),
    }


def run_prices(settings: Settings | None, endpoint: str) -> Prices | None:
    """The prices of a run's judge endpoint as the config gives them now (None without a
    config, an endpoint of that name, or prices)."""
    from judge.costs import Prices

    if settings is None or endpoint not in settings.endpoints:
        return None
    return Prices.of(settings.endpoints[endpoint])


def full_report(
    session: Session,
    judge_run_id: int,
    *,
    with_reliability: bool = True,
    settings: Settings | None = None,
    campaigns: Sequence[str] = (),
) -> Report:
    """The one report of a judge run, used by the CLI, the API and the demo: stage metrics,
    the judge's self-consistency (several samples), its reliability (human ratings) and the
    browser of every judged item."""
    from annotation.sections import reliability_section
    from judge.reports.browser import item_browser_section
    from judge.reports.consistency import self_consistency_section
    from judge.reports.run_report import metrics_section
    from judge.reports.sections import Report
    from judge.store.queries import get_generation_run, get_judge_run
    from judge.trust.diagnostics import self_preference
    from judge.trust.section import diagnostics_section

    jrun = get_judge_run(session, judge_run_id)
    grun = get_generation_run(session, jrun.generation_run_id)
    sections = [metrics_section(session, judge_run_id)]
    consistency = self_consistency_section(session, judge_run_id)
    if consistency is not None:
        sections.append(consistency)
    if with_reliability:
        reliability = reliability_section(session, judge_run_id, campaigns=campaigns)
        if reliability is not None:
            sections.append(reliability)
    prices = run_prices(settings, jrun.endpoint_name)
    sections.append(diagnostics_section(session, judge_run_id, prices=prices))
    sections.append(item_browser_section(session, judge_run_id))
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
            else f"{grun.endpoint_name} at {grun.base_url}, temperature {grun.temperature:g}"
        )
        + f"), judged by {jrun.model} at {jrun.base_url} ({jrun.prompt_variant} prompt, "
        f"temperature {jrun.temperature:g}). Run status: {jrun.status}"
        + (f" ({jrun.status_detail})" if jrun.status_detail else "")
        + "."
        + (" " + selfpref if (selfpref := self_preference(session, judge_run_id)) else ""),
        sections=sections,
    )


def swap_kinds(chosen: Sequence[str], available: Sequence[str]) -> list[str]:
    """The swap kinds asked for: ``all`` means every kind of the list."""
    kinds = list(dict.fromkeys(chosen))
    return list(available) if "all" in kinds else kinds


def counterfactual_audit(
    engine: Engine,
    settings: Settings,
    judge_run_id: int,
    *,
    swap: Sequence[str],
    swaps_file: str | Path | None = None,
    limit: int | None = None,
    progress: Progress | None = None,
) -> CounterfactualRun:
    """Judge a counterfactual copy of a judge run's answers (``swap``: names, gender, race
    or all; ``swaps_file``: a swap list of the user's own) with the run's own endpoint and
    settings; resumable. Everything is checked before any call: the swap list, the kinds,
    that the run scored something and that its judge can be reproduced."""
    from judge.endpoint_url import check_same_server
    from judge.grading.counterfactual import load_swaps
    from judge.prompts import PromptBook
    from judge.store.engine import session_scope
    from judge.store.queries import get_judge_run
    from judge.trust.audit import run_counterfactual

    swaps = load_swaps(swaps_file)
    kinds = swap_kinds(swap, swaps.kinds)
    chosen = swaps.select(kinds)
    with session_scope(engine) as session:
        jrun = get_judge_run(session, judge_run_id)
        endpoint, judged_at = jrun.endpoint_name, jrun.base_url
        rubric_set = rubrics(settings, session, judge_run_id=judge_run_id)
    # The copy must be judged by the same server as the run, or the comparison mixes two.
    check_same_server(
        f"judge run {judge_run_id}", judged_at, endpoint, settings.endpoint(endpoint).base_url
    )
    return run_counterfactual(
        engine, make_client(settings, endpoint), PromptBook(settings.prompts_path()),
        rubric_set, judge_run_id, kinds, chosen, limit=limit, progress=progress,
    )  # fmt: skip


def diagnostics_report(
    session: Session,
    judge_run_id: int,
    *,
    tolerance: float = 0.0,
    settings: Settings | None = None,
    margin: float | None = None,
) -> Report:
    """The "judge diagnostics" of one judge run alone (``judge-audit show``); ``margin``:
    the counterfactual equivalence margin in score points (default 0.25)."""
    from judge.reports.sections import Report
    from judge.store.queries import get_judge_run
    from judge.trust.directional import MARGIN
    from judge.trust.section import diagnostics_section

    jrun = get_judge_run(session, judge_run_id)
    prices = run_prices(settings, jrun.endpoint_name)
    section = diagnostics_section(
        session, judge_run_id, tolerance=tolerance, prices=prices,
        margin=MARGIN if margin is None else margin,
    )  # fmt: skip
    return Report(
        title=f"FairJudge judge diagnostics: judge run {judge_run_id} ({jrun.model})",
        intro=(section.notes[0] + " " if section.payload["self_preference"] else "")
        + f"Checks of the judge {jrun.model} ({jrun.prompt_variant} prompt, temperature "
        f"{jrun.temperature:g}) on its own biases (counterfactual swaps, order, length) and "
        "what it cost.",
        sections=[section],
    )


def compare_report(session: Session, judge_run_ids: Sequence[int]) -> Report:
    """Several judge runs side by side: the stage metrics of each model (or judge
    configuration) per factor and stage, with intervals and unscored counts, and their score
    distributions. Refuses run ids that do not exist, and fewer than two distinct runs."""
    from judge.reports.compare import compare_section, compared_runs
    from judge.reports.sections import Report

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
    from judge.data.catalog import import_items
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        return import_items(session, path, name or Path(path).stem, allow_unmapped=allow_unmapped)


# --- Generating test items (fairjudge dataset generate / plan) -------------------------------

GENERATED_DATASET = "generated"
"""The dataset generated items go into when none is named."""


def item_catalogue(catalogue_file: str | Path | None = None) -> Catalogue:
    """The factors and scenarios items may be generated for: the bundled catalogue, extended
    with a user's own file when given (``judge.data.catalogue.extend_catalogue``)."""
    from judge.data.catalogue import extend_catalogue, load_catalogue

    return extend_catalogue(catalogue_file) if catalogue_file else load_catalogue()


def _generation_options(
    items_per_call: int | None, temperature: float | None, max_tokens: int | None
) -> GenerationOptions:
    from judge.dataset_generation import (
        DEFAULT_ITEMS_PER_CALL,
        DEFAULT_TEMPERATURE,
        Options,
    )

    return Options(
        items_per_call=DEFAULT_ITEMS_PER_CALL if items_per_call is None else items_per_call,
        temperature=DEFAULT_TEMPERATURE if temperature is None else temperature,
        max_tokens=max_tokens,
    )


def generate_items(
    engine: Engine,
    settings: Settings,
    *,
    endpoint: str,
    stage: str,
    factor: str,
    scenario: str,
    count: int,
    into: str = GENERATED_DATASET,
    catalogue_file: str | Path | None = None,
    items_per_call: int | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    progress: Progress | None = None,
) -> GenerationSummary:
    """``count`` new test items of one cell written by ``endpoint``, stored as drafts in
    dataset ``into``. Names, options and the endpoint are checked before any call."""
    from judge import dataset_generation
    from judge.prompts import PromptBook

    catalogue = item_catalogue(catalogue_file)
    cell = dataset_generation.check_cell(catalogue, stage, factor, scenario)
    options = _generation_options(items_per_call, temperature, max_tokens)
    return dataset_generation.generate_items(
        engine, make_client(settings, endpoint), PromptBook(settings.prompts_path()), catalogue,
        into, cell, count, options=options, progress=progress,
    )  # fmt: skip


def plan_items(
    engine: Engine,
    settings: Settings,
    *,
    endpoint: str,
    per_cell: int,
    stages: Sequence[str] = (),
    factors: Sequence[str] = (),
    scenarios: Sequence[str] = (),
    into: str = GENERATED_DATASET,
    catalogue_file: str | Path | None = None,
    items_per_call: int | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    progress: Progress | None = None,
) -> GenerationSummary:
    """Fill stages x factors x each factor's scenarios (all, or those named) of dataset
    ``into`` up to ``per_cell`` items each with items ``endpoint`` writes; resumable: a
    rerun asks only for what is still missing."""
    from judge import dataset_generation
    from judge.prompts import PromptBook

    catalogue, cells = _plan_grid(catalogue_file, stages, factors, scenarios)
    options = _generation_options(items_per_call, temperature, max_tokens)
    return dataset_generation.plan_items(
        engine, make_client(settings, endpoint), PromptBook(settings.prompts_path()), catalogue,
        into, cells, per_cell, options=options, progress=progress,
    )  # fmt: skip


def _plan_grid(
    catalogue_file: str | Path | None,
    stages: Sequence[str],
    factors: Sequence[str],
    scenarios: Sequence[str],
) -> tuple[Catalogue, list[Cell]]:
    """The catalogue (bundled, or extended by ``catalogue_file``) and the cells a plan
    covers; unknown names are refused here, before any call."""
    from judge.dataset_generation import grid_cells

    catalogue = item_catalogue(catalogue_file)
    cells = grid_cells(catalogue, stages=stages, factors=factors, scenarios=scenarios)
    return catalogue, cells


def plan_items_dry_run(
    engine: Engine,
    settings: Settings,
    *,
    endpoint: str,
    per_cell: int,
    stages: Sequence[str] = (),
    factors: Sequence[str] = (),
    scenarios: Sequence[str] = (),
    into: str = GENERATED_DATASET,
    catalogue_file: str | Path | None = None,
    items_per_call: int | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
) -> dict[str, Any]:
    """What ``plan_items`` would ask for and cost at ``endpoint``'s prices, with nothing
    sent or stored."""
    from judge import dataset_generation
    from judge.costs import Prices
    from judge.models.client import ModelClient
    from judge.prompts import PromptBook

    catalogue, cells = _plan_grid(catalogue_file, stages, factors, scenarios)
    config = settings.endpoint(endpoint)
    return dataset_generation.plan_dry_run(
        engine, ModelClient(endpoint, config), PromptBook(settings.prompts_path()), catalogue,
        into, cells, per_cell, options=_generation_options(items_per_call, temperature, max_tokens),
        prices=Prices.of(config),
    )  # fmt: skip


def summary_line(kind: str, s: RunSummary) -> str:
    """One line for people about a pass over a run, e.g. 'judge run 2: 64 to do, 64 model
    calls, 0 from cache, 66 HTTP requests; 60 scored, 4 unscored'."""
    outcome = ", ".join(f"{n:,} {flag}" for flag, n in sorted(s.flags.items())) or "nothing new"
    return (
        f"{kind} run {s.run_id}: {s.tasks:,} to do, {s.model_calls:,} model calls, "
        f"{s.cached:,} from cache, {s.http_attempts:,} HTTP requests; {outcome}"
    )


# --- The demo -------------------------------------------------------------------------------

DEMO_ITEMS_PER_STAGE = 3
"""Items of each stage the demo runs unless ``full``: the whole 72-item sample takes about
10 minutes on two CPU cores, and ``make demo`` must finish in 5 (issue 10)."""


@dataclass(frozen=True)
class DemoSubset:
    """Which items of the item file the demo runs, and the file and dataset that hold them."""

    source: Path
    total: int  # items in the source file
    file: Path  # what is imported: the source itself, or the chosen items written out
    dataset: str
    items: int  # items in ``file``
    per_stage: int | None  # None when the whole source file runs

    def describe(self, limit: int | None = None) -> str:
        """What the demo runs, in words, e.g. 'demo: 24 of fairmonitor_sample's 72 items (6
        per stage) so it finishes in a few minutes; `fairjudge demo --full` runs all 72'."""
        name = self.source.stem
        if self.per_stage is None:
            line = f"demo: all {self.total:,} items of {name}"
        else:
            line = (
                f"demo: {self.items:,} of {name}'s {self.total:,} items ({self.per_stage} per "
                f"stage) so it finishes in a few minutes; `fairjudge demo --full` runs all "
                f"{self.total:,}"
            )
        if limit is not None and limit < self.items:
            line += f"; --limit {limit}: only the first {limit:,} of them"
        return line


def demo_subset(source: str | Path, state_dir: str | Path, per_stage: int | None) -> DemoSubset:
    """``per_stage`` items of each stage of ``source``, spread over its factors (the first
    item of each factor, then the second ...; kept in file order), written to
    ``<state_dir>/<name>_<per_stage>_per_stage.jsonl`` and imported as a dataset of that name,
    so the demo's runs cover exactly these items. With ``per_stage=None``, or when the file
    has no more than that in any stage, the file itself. The file is validated first, so a
    bad line is reported with its line number in ``source``."""
    from judge.data.items import read_items

    source = Path(source)
    items = read_items(source, allow_unmapped=True).items
    if per_stage is None:
        return DemoSubset(source, len(items), source, source.stem, len(items), None)
    # Per stage, take factors in turn (the first item of each factor, then the second ...),
    # so a few items per stage still show as many sensitive factors as they can.
    queues: dict[str, dict[str, list[int]]] = {}
    for index, item in enumerate(items):
        queues.setdefault(item.stage, {}).setdefault(item.factor, []).append(index)
    picked: list[int] = []
    for by_factor in queues.values():
        turns = [index for rank in zip_longest(*by_factor.values()) for index in rank]
        picked += [index for index in turns if index is not None][:per_stage]
    chosen = [items[index] for index in sorted(picked)]
    if len(chosen) == len(items):
        return DemoSubset(source, len(items), source, source.stem, len(items), None)
    name = f"{source.stem}_{per_stage}_per_stage"
    # Named by the count, so a demo with another count never adds its items to this dataset.
    file = Path(state_dir) / f"{name}.jsonl"
    file.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps(
            {"id": i.key, "stage": i.stage, "factor": i.factor, "scenario": i.scenario, **i.fields},
            ensure_ascii=False,
        )
        for i in chosen
    ]
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return DemoSubset(source, len(items), file, name, len(chosen), per_stage)


@dataclass(frozen=True)
class DemoStep:
    """One step of the demo and how long it took."""

    name: str
    seconds: float


@dataclass(frozen=True)
class DemoResult:
    subset: DemoSubset
    dataset: ImportSummary
    answers: int  # answers the generation run covers (the items' prompts)
    judgments: int  # judgments the judge run covers (rubrics x samples of the answered items)
    generation: RunSummary
    judging: RunSummary
    report: Report
    paths: dict[str, Path]
    steps: list[DemoStep]

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        """The demo's parts for a benchmark: each step's seconds, the counts, the paths."""
        from dataclasses import asdict

        return {
            "steps": [{"name": s.name, "seconds": round(s.seconds, 3)} for s in self.steps],
            "seconds": round(self.seconds, 3),
            "dataset": self.dataset.dataset,
            "source": str(self.subset.source),
            "items": self.subset.items,
            "source_items": self.subset.total,
            "per_stage": self.subset.per_stage,
            "answers": self.answers,
            "judgments": self.judgments,
            "generation": asdict(self.generation),
            "judging": asdict(self.judging),
            "paths": {k: str(v) for k, v in self.paths.items()},
        }


@dataclass(frozen=True)
class DemoHooks:
    """How the caller hears about the demo's progress (the CLI prints, tests record)."""

    say: Callable[[str], None]
    progress: Callable[[str], Progress | None]


def seconds_text(seconds: float) -> str:
    """A duration for people: '0.4 s', '74 s', '3 min 5 s'."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


@dataclass
class _Steps:
    """Numbered steps that say when they start and how long they took when they end."""

    say: Callable[[str], None]
    total: int
    done: list[DemoStep] = field(default_factory=list)

    @contextmanager
    def step(self, name: str, doing: str) -> Iterator[list[str]]:
        """Say '[n/total] doing ...', run the block, then say what the block appended to the
        yielded list and the duration: '[n/total] <what>; done in 74 s'."""
        number = len(self.done) + 1
        self.say(f"[{number}/{self.total}] {doing} ...")
        start = time.perf_counter()
        outcome: list[str] = []
        yield outcome
        seconds = time.perf_counter() - start
        self.done.append(DemoStep(name, seconds))
        self.say(
            f"[{number}/{self.total}] {'; '.join([*outcome, f'done in {seconds_text(seconds)}'])}"
        )


def demo(
    settings: Settings,
    out_dir: str | Path,
    hooks: DemoHooks,
    *,
    dataset_file: str | Path | None = None,
    limit: int | None = None,
    full: bool = False,
    per_stage: int = DEMO_ITEMS_PER_STAGE,
) -> DemoResult:
    """The whole pipeline on the configured endpoints: start the embedded model if it is not
    running, import, generate, judge, write the report, and stop the server it started.

    Unless ``full``, only the first ``per_stage`` items of each stage run (``demo_subset``),
    and the demo says so. Each step is announced when it starts and timed (``DemoResult.steps``).
    """
    from judge import paths
    from judge.models.embedded import EmbeddedServer
    from judge.reports.render import write_report
    from judge.store.engine import session_scope
    from judge.store.queries import dataset_items

    source = Path(dataset_file) if dataset_file else paths.sample_dataset()
    subset = demo_subset(source, settings.state_dir, None if full else per_stage)
    hooks.say(subset.describe(limit))
    steps = _Steps(hooks.say, 5)
    server = EmbeddedServer(settings.embedded, settings.state_dir)
    started = server.served_models() is None
    with steps.step(
        "start model server",
        "starting the embedded model server"
        if started
        else "using the embedded model server that is already running",
    ) as said:
        server.start()
        said.append(f"model server answers at {server.base_url}")
    try:
        with steps.step("import", f"importing {subset.items:,} items from {subset.file}") as said:
            engine = open_store(settings)
            imported = import_dataset(engine, subset.file, subset.dataset)
            with session_scope(engine) as session:
                chosen = dataset_items(session, imported.dataset)[:limit]
                answers = _answers_planned(chosen)
            said.append(
                f"dataset {imported.dataset}: {imported.total:,} items ({imported.added:,} new)"
            )
        with steps.step(
            "generate", f"generating {answers:,} answers to {len(chosen):,} items"
        ) as said:
            gen = generate(
                engine,
                settings,
                imported.dataset,
                limit=limit,
                progress=hooks.progress("generating"),
            )
            said.append(summary_line("generation", gen))
        judgments = _judgments_planned(engine, settings, gen.run_id)
        with steps.step("judge", f"judging the answers: {judgments:,} judgments") as said:
            jud = judge(engine, settings, gen.run_id, progress=hooks.progress("judging"))
            said.append(summary_line("judge", jud))
        with steps.step("report", f"writing the report to {out_dir}") as said:
            with session_scope(engine) as session:
                report = full_report(session, jud.run_id, settings=settings)
            written = write_report(report, out_dir)
            said.append(f"wrote {len(written)} files")
        return DemoResult(
            subset, imported, answers, judgments, gen, jud, report, written, steps.done
        )
    finally:
        if started:
            server.stop()
            hooks.say("stopped the embedded model server")


def _answers_planned(items: Sequence[Any]) -> int:
    """Answers a generation run asks for these items: one per prompt of the item's stage."""
    from judge.vocab import STAGE_PARTS

    return sum(len(STAGE_PARTS[item.stage]) for item in items)


def _judgments_planned(engine: Engine, settings: Settings, generation_run_id: int) -> int:
    """Judgments a judge run with these settings makes for a generation run: each rubric of
    an answered item's stage, ``samples`` times."""
    from sqlmodel import col, select

    from judge.store.engine import session_scope
    from judge.store.tables import Item, Response

    rubric_set = rubrics(settings)
    with session_scope(engine) as session:
        answered = select(Response.item_id).where(Response.run_id == generation_run_id)
        stages = session.exec(select(Item.stage).where(col(Item.id).in_(answered.distinct())))
        per_item = sum(len(rubric_set.for_stage(stage)) for stage in stages)
    return per_item * settings.judge.samples


def labelstudio(settings: Settings) -> tuple[LabelStudioClient, LabelStudioService | None]:
    """A client for the Label Studio campaigns use, and FairJudge's own server's manager when
    it is that one (None for a server at ``labelstudio.url``)."""
    from annotation.labelstudio.client import LabelStudioClient
    from annotation.labelstudio.service import LabelStudioService, connection

    found = connection(settings)
    client = LabelStudioClient(found.url, found.token, timeout_s=settings.labelstudio.timeout_s)
    service = (
        LabelStudioService(settings.labelstudio, settings.state_dir) if found.managed else None
    )
    return client, service


# -- the web API's use cases (also used by the dashboard) ------------------------------------


def import_items_json(
    engine: Engine, name: str, items: Sequence[dict[str, Any]], *, allow_unmapped: bool = False
) -> ImportSummary:
    """Items sent as JSON objects, imported exactly like the lines of a dataset file (the same
    checks, all or nothing)."""
    import tempfile

    from judge.data.catalog import import_items
    from judge.store.engine import session_scope

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{name}.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            for item in items:
                handle.write(json.dumps(item, ensure_ascii=False) + "\n")
        with session_scope(engine) as session:
            return import_items(session, path, name, allow_unmapped=allow_unmapped)


def generation_run_info(session: Session, run_id: int) -> GenerationRunInfo:
    from judge.store.queries import get_generation_run, list_runs

    get_generation_run(session, run_id)
    return list_runs(session, generation_run=run_id).generation_runs[0]


def judge_run_info(session: Session, run_id: int) -> JudgeRunInfo:
    from judge.store.queries import get_judge_run, list_runs

    get_judge_run(session, run_id)
    return list_runs(session, judge_run=run_id).judge_runs[0]


def run_metrics(session: Session, judge_run_id: int) -> dict[str, Any]:
    """FairMonitor's stage metrics of a judge run: per factor and over all factors."""
    from judge.metrics import item_scores, metric_dicts, stage_metrics
    from judge.store.queries import get_generation_run, get_judge_run

    jrun = get_judge_run(session, judge_run_id)
    model = get_generation_run(session, jrun.generation_run_id).model
    scores = item_scores(session, judge_run_id, jrun.aggregation)
    return {
        "judge_run": judge_run_id,
        "aggregation": jrun.aggregation,
        "overall": metric_dicts(stage_metrics(scores, model, by_factor=False)),
        "by_factor": metric_dicts(stage_metrics(scores, model)),
    }


def run_agreement(
    session: Session, judge_run_id: int, *, campaigns: Sequence[str] = ()
) -> dict[str, Any]:
    """Judge-human and human-human agreement for a judge run's answers (the reliability
    section of its report) on the ratings of ``campaigns`` (every campaign's when empty);
    NotFoundError when no human ratings exist yet."""
    from annotation.sections import reliability_section
    from judge.errors import NotFoundError

    section = reliability_section(session, judge_run_id, campaigns=campaigns)
    if section is None:
        raise NotFoundError(
            f"judge run {judge_run_id} has no human ratings to compare with; run a campaign "
            "(POST /api/v1/campaigns) or import ratings (`fairjudge ratings import`)"
        )
    return {"judge_run": judge_run_id, **section.payload}


def list_endpoints(settings: Settings) -> list[dict[str, Any]]:
    """The configured endpoints without their secrets (an API key is named by its
    environment variable in the config, and neither is returned)."""
    uses: dict[str, list[str]] = {}
    uses.setdefault(settings.generation.endpoint, []).append("generation")
    uses.setdefault(settings.judge.endpoint, []).append("judge")
    return [
        {"name": name, "base_url": e.base_url, "model": e.model, "uses": uses.get(name, [])}
        for name, e in sorted(settings.endpoints.items())
    ]


def check_endpoint(settings: Settings, name: str) -> dict[str, Any]:
    """Whether the endpoint answers, and the models it serves (never raises for an endpoint
    that is down: that is the answer)."""
    from judge.errors import EndpointError
    from judge.models.client import ModelClient

    client = ModelClient(name, settings.endpoint(name))
    try:
        models = client.served_models()
    except EndpointError as exc:
        return {"name": name, "reachable": False, "models": [], "message": str(exc)}
    except Exception as exc:  # an endpoint with no /models route still answered
        return {"name": name, "reachable": True, "models": [], "message": str(exc)}
    served = settings.endpoints[name].model in models or not models
    message = "ok" if served else f"it does not serve {settings.endpoints[name].model!r}"
    return {"name": name, "reachable": True, "models": models, "message": message}


def create_campaign(
    session: Session,
    settings: Settings,
    *,
    target_half_width: float | None = None,
    pilot: str | None = None,
    **options: Any,
) -> tuple[CreateResult, str | None]:
    """Sample a judge run's answers into a Label Studio campaign (``options``: those of
    ``annotation.labelstudio.campaigns.create_campaign``); with ``target_half_width`` the
    size is planned for that CI width instead. Returns the result and the plan's reason."""
    from annotation.labelstudio.campaigns import create_campaign as create
    from annotation.labelstudio.campaigns import plan_size
    from judge.errors import InvalidInputError

    if target_half_width is not None and options.get("size") is not None:
        raise InvalidInputError("give a size or a target half width, not both")
    client, _ = labelstudio(settings)
    plan = None if target_half_width is None else plan_size(session, target_half_width, pilot=pilot)
    if plan is not None and "progress" in options:
        options["progress"](plan.reason)
    # Any rubric the judge run applied, built-in or registered, of any number of levels: the
    # interface offers each rubric's own levels and pulls check scores against them.
    applied = rubrics(settings, session, judge_run_id=options["judge_run_id"])
    result = create(session, client, applied, size_plan=plan, **options)
    return result, None if plan is None else plan.reason


def job_counts(session: Session, result: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a job's run holds so far: rows by status (judgments, audit answers) or flag
    (answers), and the tokens they used; None before the job knows its run."""
    from sqlmodel import func, select

    from judge.store.tables import AuditAnswer, Judgment, Response

    if not result:
        return None
    if "audit_run_id" in result:
        table: Any = AuditAnswer
        column, run = AuditAnswer.status, AuditAnswer.run_id
        run_id = result["audit_run_id"]
    elif "judge_run_id" in result:
        table, column, run = Judgment, Judgment.status, Judgment.judge_run_id
        run_id = result["judge_run_id"]
    elif "generation_run_id" in result:
        table, column, run = Response, Response.flag, Response.run_id  # type: ignore[assignment]
        run_id = result["generation_run_id"]
    else:
        return None
    rows = session.exec(
        select(
            column,
            func.count(),
            func.coalesce(func.sum(table.prompt_tokens), 0),
            func.coalesce(func.sum(table.completion_tokens), 0),
        )
        .where(run == run_id)
        .group_by(column)
    ).all()
    return {
        "by_status": {str(status): int(n) for status, n, _, _ in rows},
        "prompt_tokens": sum(int(p) for _, _, p, _ in rows),
        "completion_tokens": sum(int(c) for _, _, _, c in rows),
    }


def coverage_report(session: Session, name: str) -> Report:
    """Dataset NAME's coverage of FairMonitor's grid (stage x factor x scenario, by review
    status) as a one-section report."""
    from judge.data.coverage import coverage
    from judge.reports.coverage import coverage_section
    from judge.reports.sections import Report

    section = coverage_section(coverage(session, name))
    return Report(f"FairJudge benchmark coverage: {name}", section.notes[0], [section])
