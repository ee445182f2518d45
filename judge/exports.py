"""A judge run's rows as flat files, for analysis outside FairJudge: every judgment and every
answer it judged, as CSV and/or JSON Lines.

``judgments.*`` has one row per judgment (one judge sample for one item and rubric; in a run
judged in both orders, ``position`` says which order and ``repeat`` which sample of it), joined
with its item (key, stage, factor, scenario) and the texts and flags of the item's answers
(``answer`` for S1/S4, ``answer_A`` and ``answer_B`` for S2/S3, each with a ``_flag`` column:
the stored flag, with ``injection_suspected (signs)`` added, as in the item browser, when the
answer addresses the judge).
Each judgment row also carries ``judge_standing``: the judge run's standing on the row's
rubric (validated, not validated, failed validation or stale), given by the caller from the
qualification records (``server.usecases.standing``), so a figure computed from the file
alone still says whether its judge was validated.
``answers.*`` has one row per answer of the judged generation run. Nothing is summarised or
dropped: an unscored judgment keeps its kind, reason and raw replies.

CSV cells are written by the ``csv`` module, so newlines, commas and quotes in model output
round-trip; an absent value is an empty cell in CSV and ``null`` in JSON Lines, and ``params``
is a JSON object (a JSON string in CSV).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from sqlmodel import Session, col, select

from judge.errors import ConfigError
from judge.grading.injection import answer_flag
from judge.store.queries import get_judge_run, responses_by_item, sample_slot
from judge.store.tables import Item, Judgment, Response
from judge.vocab import STAGE_PARTS

FORMATS = ("csv", "jsonl")
NOT_VALIDATED = "not validated"
"""A rubric's standing when the caller's mapping has none (``server.usecases.qualify``'s word)."""
# Every answer part any stage has, in a fixed order, so the columns do not depend on the run.
PARTS = tuple(dict.fromkeys(p for parts in STAGE_PARTS.values() for p in parts))


def answer_column(part: str) -> str:
    """The judgments column holding an answer part's text: 'answer' (S1, S4), 'answer_A'...

    >>> [answer_column(p) for p in PARTS]
    ['answer', 'answer_A', 'answer_B']
    """
    return "answer" if part == "answer" else f"answer_{part}"


ITEM_COLUMNS = ["item_key", "stage", "factor", "scenario"]
JUDGMENT_COLUMNS = [
    "judgment_id",
    "judge_run",
    "generation_run",
    *ITEM_COLUMNS,
    "rubric",
    "judge_standing",
    "sample_index",
    "position",
    "repeat",
    "status",
    "score",
    "unscored_kind",
    "reason",
    "explanation",
    "raw_output",
    "repair_output",
    "template_version",
    "prompt_hash",
    "rubric_version",
    "rubric_hash",
    "model",
    "params",
    "prompt_tokens",
    "cached_prompt_tokens",
    "completion_tokens",
    "latency_s",
    "calls",
    "cache_key",
    "created_at",
    *(f"{answer_column(part)}{suffix}" for part in PARTS for suffix in ("", "_flag")),
]
ANSWER_COLUMNS = [
    "response_id",
    "generation_run",
    *ITEM_COLUMNS,
    "part",
    "prompt",
    "answer",
    "flag",
    "error",
    "finish_reason",
    "prompt_tokens",
    "cached_prompt_tokens",
    "completion_tokens",
    "latency_s",
    "cache_key",
    "created_at",
]


@dataclass(frozen=True)
class ExportResult:
    """What ``export_judge_run`` wrote: row counts and the files, by name."""

    judge_run: int
    generation_run: int
    judgments: int
    answers: int
    files: dict[str, Path] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "judge_run": self.judge_run,
            "generation_run": self.generation_run,
            "judgments": self.judgments,
            "answers": self.answers,
            "files": {name: str(path) for name, path in self.files.items()},
        }


def parse_formats(text: str | Sequence[str]) -> tuple[str, ...]:
    """'csv,jsonl' (or a list) as known formats, in the given order, each once.

    >>> parse_formats("jsonl, csv")
    ('jsonl', 'csv')
    >>> parse_formats("xml")
    Traceback (most recent call last):
    ...
    judge.errors.ConfigError: format 'xml' is not one of csv, jsonl
    """
    names = text.split(",") if isinstance(text, str) else list(text)
    formats = [n.strip().lower() for n in names if n.strip()]
    if not formats:
        raise ConfigError(f"formats: give at least one of {', '.join(FORMATS)}")
    for name in formats:
        if name not in FORMATS:
            raise ConfigError(f"format {name!r} is not one of {', '.join(FORMATS)}")
    return tuple(dict.fromkeys(formats))


def _item_fields(item: Item) -> dict[str, Any]:
    return {
        "item_key": item.key,
        "stage": item.stage,
        "factor": item.factor,
        "scenario": item.scenario,
    }


def judgment_rows(
    session: Session, judge_run_id: int, standing: Mapping[str, str]
) -> Iterator[dict[str, Any]]:
    """One dict per judgment of the run (keys: ``JUDGMENT_COLUMNS``), by item, rubric, sample;
    ``standing``: rubric -> the run's standing on it ("not validated" for a rubric absent)."""
    run = get_judge_run(session, judge_run_id)
    answers = responses_by_item(session, run.generation_run_id)
    query = (
        select(Judgment, Item)
        .join(Item)
        .where(Judgment.judge_run_id == judge_run_id)
        .order_by(col(Item.id), col(Judgment.rubric), col(Judgment.sample_index))
    )
    for j, item in session.exec(query):
        assert item.id is not None
        parts = answers.get(item.id, {})
        texts: dict[str, Any] = {}
        for part in PARTS:
            response = parts.get(part)
            texts[answer_column(part)] = response.raw_text if response else None
            texts[f"{answer_column(part)}_flag"] = (
                answer_flag(response.flag, response.raw_text) if response else None
            )
        yield {
            "judgment_id": j.id,
            "judge_run": judge_run_id,
            "generation_run": run.generation_run_id,
            **_item_fields(item),
            "rubric": j.rubric,
            "judge_standing": standing.get(j.rubric, NOT_VALIDATED),
            "sample_index": j.sample_index,
            # a run judged in both orders stores a pair's swapped samples after its given
            # ones (indices n..2n-1): position names the order, repeat the sample within it
            "position": j.position,
            "repeat": sample_slot(j.sample_index, j.position, run.samples).repeat,
            "status": j.status,
            "score": j.score,
            "unscored_kind": j.unscored_kind,
            "reason": j.reason,
            "explanation": j.explanation,
            "raw_output": j.raw_output,
            "repair_output": j.repair_output,
            "template_version": j.template_version,
            "prompt_hash": j.prompt_hash,
            "rubric_version": j.rubric_version,
            "rubric_hash": j.rubric_hash,
            "model": j.model,
            "params": j.params,
            "prompt_tokens": j.prompt_tokens,
            "cached_prompt_tokens": j.cached_prompt_tokens,
            "completion_tokens": j.completion_tokens,
            "latency_s": j.latency_s,
            "calls": j.calls,
            "cache_key": j.cache_key,
            "created_at": j.created_at.isoformat(),
            **texts,
        }


def answer_rows(session: Session, generation_run_id: int) -> Iterator[dict[str, Any]]:
    """One dict per answer of the generation run (keys: ``ANSWER_COLUMNS``), by item, part."""
    query = (
        select(Response, Item)
        .join(Item)
        .where(Response.run_id == generation_run_id)
        .order_by(col(Item.id), col(Response.part))
    )
    for r, item in session.exec(query):
        yield {
            "response_id": r.id,
            "generation_run": generation_run_id,
            **_item_fields(item),
            "part": r.part,
            "prompt": r.prompt,
            "answer": r.raw_text,
            "flag": answer_flag(r.flag, r.raw_text),
            "error": r.error,
            "finish_reason": r.finish_reason,
            "prompt_tokens": r.prompt_tokens,
            "cached_prompt_tokens": r.cached_prompt_tokens,
            "completion_tokens": r.completion_tokens,
            "latency_s": r.latency_s,
            "cache_key": r.cache_key,
            "created_at": r.created_at.isoformat(),
        }


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return value


class _Writers:
    """Writes each row to every requested format of one table (e.g. judgments.csv/.jsonl)."""

    def __init__(
        self, stack: ExitStack, folder: Path, name: str, columns: list[str], formats: Sequence[str]
    ) -> None:
        self.paths: dict[str, Path] = {}
        self._csv: csv.DictWriter[str] | None = None
        self._jsonl: IO[str] | None = None
        if "csv" in formats:
            path = folder / f"{name}.csv"
            handle = stack.enter_context(path.open("w", newline="", encoding="utf-8"))
            self._csv = csv.DictWriter(handle, fieldnames=columns)
            self._csv.writeheader()
            self.paths[path.name] = path
        if "jsonl" in formats:
            path = folder / f"{name}.jsonl"
            self._jsonl = stack.enter_context(path.open("w", encoding="utf-8"))
            self.paths[path.name] = path

    def write(self, row: dict[str, Any]) -> None:
        if self._csv is not None:
            self._csv.writerow({k: _csv_cell(v) for k, v in row.items()})
        if self._jsonl is not None:
            self._jsonl.write(json.dumps(row, ensure_ascii=False) + "\n")


def export_judge_run(
    session: Session,
    judge_run_id: int,
    out_dir: str | Path,
    *,
    standing: Mapping[str, str],
    formats: str | Sequence[str] = FORMATS,
) -> ExportResult:
    """Write ``judgments`` and ``answers`` of a judge run into ``out_dir`` in each format;
    ``standing``: rubric -> the run's standing on it (the ``judge_standing`` column)."""
    chosen = parse_formats(formats)
    run = get_judge_run(session, judge_run_id)
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    counts = {"judgments": 0, "answers": 0}
    files: dict[str, Path] = {}
    with ExitStack() as stack:
        judgments = _Writers(stack, folder, "judgments", JUDGMENT_COLUMNS, chosen)
        for row in judgment_rows(session, judge_run_id, standing):
            judgments.write(row)
            counts["judgments"] += 1
        answers = _Writers(stack, folder, "answers", ANSWER_COLUMNS, chosen)
        for row in answer_rows(session, run.generation_run_id):
            answers.write(row)
            counts["answers"] += 1
        files = {**judgments.paths, **answers.paths}
    return ExportResult(
        judge_run_id, run.generation_run_id, counts["judgments"], counts["answers"], files
    )
