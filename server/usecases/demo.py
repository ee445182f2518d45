"""The demo: a small subset of the bundled sample, answered and judged on the embedded model."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from itertools import zip_longest
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge import paths
from judge.progress import Progress
from judge.vocab import STAGE_PARTS
from server.usecases.context import open_store
from server.usecases.datasets import import_dataset
from server.usecases.reports import full_report
from server.usecases.requests import GenerateRequest, JudgeRequest
from server.usecases.rubrics import rubrics
from server.usecases.runs import generate, judge, summary_line

# Only what every command needs is imported here. The stages, the model client (openai), the
# reports (matplotlib) and the reliability section (scipy, scikit-learn, pandas) are imported
# inside the functions that use them, so a command that only reads the store starts in a
# fraction of the time (see tests/server/test_startup.py).
if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings
    from judge.data.datasets import ImportSummary
    from judge.reports.sections import Report
    from judge.runs import RunSummary


DEMO_ITEMS_PER_STAGE = 3


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
    def standing_line(self) -> str:
        """The one line the demo's report, terminal summary and dashboard open with."""
        section = self.report.section("Judge standing")
        return section.notes[0] if section is not None and section.notes else ""

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        """The demo's parts for a benchmark: each step's seconds, the counts, the paths."""

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
            "standing": self.standing_line,
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
                GenerateRequest.build(dataset=imported.dataset, limit=limit),
                progress=hooks.progress("generating"),
            )
            said.append(summary_line("generation", gen))
        judgments = _judgments_planned(engine, settings, gen.run_id)
        with steps.step("judge", f"judging the answers: {judgments:,} judgments") as said:
            jud = judge(
                engine,
                settings,
                JudgeRequest.build(generation_run_id=gen.run_id),
                progress=hooks.progress("judging"),
            )
            said.append(summary_line("judge", jud))
        with steps.step("report", f"writing the report to {out_dir}") as said:
            with session_scope(engine) as session:
                report = demo_standing(full_report(session, jud.run_id, settings=settings))
            written = write_report(report, out_dir)
            said.append(f"wrote {len(written)} files")
        return DemoResult(
            subset, imported, answers, judgments, gen, jud, report, written, steps.done
        )
    finally:
        if started:
            server.stop()
            hooks.say("stopped the embedded model server")


EMBEDDED_NOT_VALIDATED = (
    "The judge of this demo is NOT VALIDATED: no person has checked its scores for any "
    "rubric (`fairjudge checks qualify`), and the embedded SmolLM2-135M judges at about "
    "chance level. Its figures exercise the machinery; they are not verdicts. Point [judge] "
    "at a capable endpoint and qualify it on human ratings for real scores."
)


def demo_standing(report: Report) -> Report:
    """The report with its standing section's line made plain for the demo's judge, once,
    at the top (unless someone qualified it: then the section's own line stays)."""

    section = report.section("Judge standing")
    if section is None:
        return report
    states = {r["state"] for r in section.payload["rubrics"].values()}
    if "validated" in states:
        return report
    lead = replace(
        section,
        notes=[EMBEDDED_NOT_VALIDATED],
        payload={**section.payload, "summary": EMBEDDED_NOT_VALIDATED},
    )
    return replace(report, sections=[lead if s is section else s for s in report.sections])


def _answers_planned(items: Sequence[Any]) -> int:
    """Answers a generation run asks for these items: one per prompt of the item's stage."""

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
