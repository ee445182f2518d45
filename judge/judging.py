"""Scoring stored answers with the FairMonitor rubrics.

Per item, rubric and sample: render the prompt, call the judge (cached), read the grade. An
unreadable reply gets one repair request; if that fails too, the judgment is stored as
*unscored* with the reason and both raw replies. A judge run is identified by its generation
run and a hash of its settings, so asking again resumes it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from judge.calls import CallCacheView, CallOutcome, RunSummary, cached_complete, store_results
from judge.client import GRADE_SCHEMA, ModelClient
from judge.config import JudgeConfig
from judge.errors import NotFoundError
from judge.generation import responses_by_item, run_items
from judge.parsing import parse_grade
from judge.prompts import STAGE_PARTS, STAGE_RUBRICS, PromptBook, judge_texts, sha256
from judge.store import session_scope
from judge.tables import GenerationRun, JudgeRun, Judgment, Response, utcnow

Progress = Callable[[int, int], None]
CALL_FAILED = "call failed"


def judge_config_hash(client: ModelClient, config: JudgeConfig, template_version: str) -> str:
    body = {
        "model": client.model,
        "variant": config.prompt_variant,
        "temperature": config.temperature,
        "samples": config.samples,
        "aggregation": config.aggregation,
        "max_tokens": config.max_tokens,
        "template": template_version,
    }
    return sha256(json.dumps(body, sort_keys=True))[:16]


def get_or_create_judge_run(
    session: Session,
    generation_run_id: int,
    client: ModelClient,
    config: JudgeConfig,
    book: PromptBook,
) -> JudgeRun:
    if session.get(GenerationRun, generation_run_id) is None:
        raise NotFoundError(f"no generation run {generation_run_id}; see `fairjudge runs`")
    digest = judge_config_hash(client, config, book.judge_version)
    existing = session.exec(
        select(JudgeRun).where(
            JudgeRun.generation_run_id == generation_run_id, JudgeRun.config_hash == digest
        )
    ).first()
    if existing is not None:
        return existing
    run = JudgeRun(
        generation_run_id=generation_run_id,
        endpoint_name=client.name,
        base_url=client.config.base_url,
        model=client.model,
        prompt_variant=config.prompt_variant,
        temperature=config.temperature,
        samples=config.samples,
        aggregation=config.aggregation,
        max_tokens=config.max_tokens,
        config_hash=digest,
    )
    session.add(run)
    session.flush()
    return run


@dataclass(frozen=True)
class _Task:
    item_id: int
    rubric: str
    sample_index: int
    texts: list[tuple[str, str]] | None  # None: an answer is missing
    missing: str | None


def _missing_answer(stage: str, parts: dict[str, Response]) -> str | None:
    for part in STAGE_PARTS[stage]:
        row = parts.get(part)
        if row is None:
            return f"answer part {part} was never generated"
        if row.flag in ("empty", "error"):
            return f"answer part {part} is {row.flag}" + (f": {row.error}" if row.error else "")
    return None


def run_judging(
    engine: Engine,
    judge_run_id: int,
    client: ModelClient,
    book: PromptBook,
    *,
    progress: Progress | None = None,
) -> RunSummary:
    """Make every missing judgment of the run (failed calls are tried again)."""
    with session_scope(engine) as session:
        jrun = session.get(JudgeRun, judge_run_id)
        assert jrun is not None
        answers = responses_by_item(session, jrun.generation_run_id)
        have = {
            (j.item_id, j.rubric, j.sample_index): j
            for j in session.exec(select(Judgment).where(Judgment.judge_run_id == judge_run_id))
        }
        tasks: list[_Task] = []
        for item in run_items(session, jrun.generation_run_id):
            assert item.id is not None
            parts = answers.get(item.id, {})
            missing = _missing_answer(item.stage, parts)
            texts = None
            if missing is None:
                plain = {p: r.raw_text or "" for p, r in parts.items()}
            for rubric in STAGE_RUBRICS[item.stage]:
                if missing is None:
                    texts = judge_texts(item.stage, rubric, item.fields, plain)
                for sample in range(jrun.samples):
                    old = have.get((item.id, rubric, sample))
                    if old is not None:
                        if (old.reason or "").startswith(CALL_FAILED) or (
                            old.reason or ""
                        ).startswith("answer part"):
                            session.delete(old)
                        else:
                            continue
                    tasks.append(_Task(item.id, rubric, sample, texts, missing))
        jrun.status = "running"
    settings = {
        "temperature": jrun.temperature,
        "max_tokens": jrun.max_tokens,
        "prompt_variant": jrun.prompt_variant,
    }
    cache = CallCacheView(engine, client.model)

    def work(task: _Task) -> tuple[Judgment, list[CallOutcome]]:
        return _judge_one(task, client, cache, book, jrun, settings)

    summary = store_results(
        engine,
        judge_run_id,
        tasks,
        work,
        concurrency=client.config.concurrency,
        label=lambda row: row.status,
        progress=progress,
    )
    with session_scope(engine) as session:
        stored = session.get(JudgeRun, judge_run_id)
        assert stored is not None
        stored.status = "finished"
        stored.finished_at = utcnow()
    return summary


def _judge_one(
    task: _Task,
    client: ModelClient,
    cache: CallCacheView,
    book: PromptBook,
    jrun: JudgeRun,
    settings: dict[str, Any],
) -> tuple[Judgment, list[CallOutcome]]:
    base: dict[str, Any] = {
        "judge_run_id": jrun.id,
        "item_id": task.item_id,
        "rubric": task.rubric,
        "sample_index": task.sample_index,
        "template_version": book.judge_version,
        "model": client.model,
        "params": settings,
    }
    if task.texts is None:
        return Judgment(
            **base, status="unscored", reason=task.missing, prompt_hash="", cache_key="", calls=0
        ), []
    prompt = book.judge_prompt(task.rubric, task.texts, variant=jrun.prompt_variant)
    base["prompt_hash"] = prompt.prompt_hash
    call: dict[str, Any] = {
        "sample_index": task.sample_index,
        "temperature": jrun.temperature,
        "max_tokens": jrun.max_tokens,
        "schema": GRADE_SCHEMA,
    }
    first = cached_complete(client, cache, prompt.messages, **call)
    base["cache_key"] = first.key
    if first.failure is not None:
        return Judgment(
            **base, status="unscored", calls=1, reason=f"{CALL_FAILED}: {first.failure.reason}"
        ), [first]
    assert first.completion is not None
    grade = parse_grade(first.completion.text)
    outcomes = [first]
    repair_raw = None
    if not grade.ok:
        why = grade.reason or "unreadable"
        if first.completion.finish_reason == "length":
            why += " (the reply was cut off at max_tokens)"
        repair_messages = prompt.messages + [
            {"role": "assistant", "content": first.completion.text or ""},
            {"role": "user", "content": book.repair_message(why)},
        ]
        second = cached_complete(client, cache, repair_messages, **call)
        outcomes.append(second)
        if second.failure is not None:
            grade_reason = f"{CALL_FAILED} during repair: {second.failure.reason}"
        else:
            assert second.completion is not None
            repair_raw = second.completion.text
            repaired = parse_grade(repair_raw)
            if repaired.ok:
                grade = repaired
            grade_reason = (
                f"unparsable after one repair: first reply: {why}; repair reply: {repaired.reason}"
            )
    tokens: dict[str, Any] = {
        "prompt_tokens": sum(o.completion.prompt_tokens for o in outcomes if o.completion),
        "completion_tokens": sum(o.completion.completion_tokens for o in outcomes if o.completion),
        "latency_s": sum(o.completion.latency_s for o in outcomes if o.completion),
    }
    row = Judgment(
        **base,
        **tokens,
        calls=len(outcomes),
        raw_output=first.completion.text,
        repair_output=repair_raw,
        status="scored" if grade.ok else "unscored",
        score=grade.score,
        explanation=grade.explanation,
        reason=None if grade.ok else grade_reason,
    )
    return row, outcomes
