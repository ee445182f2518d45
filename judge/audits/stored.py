"""An audit run's stored answers, and what it still has to ask: its main tasks not answered
yet, the follow-up draws its answers call for (shared draws kept in step with the wanted
ones), and failed answers forgotten so that a rerun tries them again."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from itertools import islice
from typing import Any

from sqlalchemy import String, cast
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from judge.audits.base import (
    DRAW,
    ERROR,
    FOLLOWUP,
    MAIN,
    AuditTask,
    StoredAnswer,
    Suite,
    number_draws,
)
from judge.models.cache import CallKeys
from judge.models.client import ModelClient
from judge.store.engine import session_scope
from judge.store.lifecycle import start_run
from judge.store.tables import AuditAnswer, AuditLabel, AuditRun


def main_tasks(
    engine: Engine,
    run_id: int,
    suite: Suite,
    client: ModelClient,
    *,
    temperature: float,
    max_tokens: int,
    limit: int | None,
) -> list[AuditTask]:
    """For the holder of the run's lease: mark the run running, forget its failed calls
    (they are asked again), and return the design's first-turn prompts still to ask, in the
    design's order; a repeat that a shared call answered (a run stored before every repeat
    was its own draw) is asked again as its own draw."""

    keys = CallKeys(client, temperature=temperature, max_tokens=max_tokens)

    def expected(task: AuditTask) -> str:
        return keys(task.messages, task.sample_index)

    with session_scope(engine) as session:
        start_run(session, AuditRun, run_id)
        done = forget_failures(session, run_id)
    todo, copies = main_todo(suite, done, limit)
    if copies:
        with session_scope(engine) as session:
            wanted_keys = {key: expected(task) for key, (_, task) in copies.items()}
            todo += [copies[key] for key in forget_shared_draws(session, run_id, wanted_keys)]
    return [task for _, task in sorted(todo, key=lambda pair: pair[0])]


def followup_tasks(engine: Engine, run_id: int, suite: Suite) -> list[AuditTask]:
    """The second-turn prompts the run's stored first answers call for and that are not
    stored yet (none for a suite without a second turn)."""
    with Session(engine) as session:
        answers = stored_answers(session, run_id, turn=MAIN, with_prompt=True)
        done = answered_keys(session, run_id)
    follow = followup_draws(suite, suite.followups(answers))
    return [t for t in follow if (t.key, FOLLOWUP) not in done]


def main_todo(
    suite: Suite, done: set[tuple[str, str]], limit: int | None, *, numbered: bool = True
) -> tuple[list[tuple[int, AuditTask]], dict[str, tuple[int, AuditTask]]]:
    """The design's first-turn prompts not answered yet (``done``: the (key, turn) stored),
    with their places in the design; and the answered repeats whose answer may have come
    from a shared call (``forget_shared_draws`` decides), by key. Not ``numbered``: the
    repeats keep the design's sample index (only the cache key differs; a dry run with no
    run and no cached call needs none)."""
    design = number_draws(suite.tasks()) if numbered else suite.tasks()
    todo: list[tuple[int, AuditTask]] = []
    copies: dict[str, tuple[int, AuditTask]] = {}
    with collector_paused():
        for position, task in enumerate(design if limit is None else islice(design, limit)):
            if (task.key, MAIN) not in done:
                todo.append((position, task))
            elif DRAW in task.meta:  # answered before: by its own call, or a shared one?
                copies[task.key] = (position, task)
    return todo, copies


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a design's tasks are gathered (and on
    again after, if it was on). Each task is a few new containers that all stay alive, so
    the collector would walk the growing list again and again: gathering the names design's
    168,000 tasks took 2.06 s with it and 0.28 s without (docs/audits.md). The tasks hold no
    cycles, so nothing is left for the collector that it would have freed."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def followup_draws(suite: Suite, tasks: Iterable[AuditTask]) -> list[AuditTask]:
    """Second-turn prompts, each with its first prompt's sample index (a repeated first
    prompt is a draw of its own, and so is the "why?" after it), then numbered like the
    design in case two still share messages and index."""
    follow = list(tasks)
    if not follow:
        return follow
    draws = {t.key: t.sample_index for t in number_draws(suite.tasks()) if DRAW in t.meta}
    inherited = [
        replace(t, sample_index=draws[t.key], meta={**t.meta, DRAW: draws[t.key]})
        if t.sample_index == 0 and t.key in draws
        else t
        for t in follow
    ]
    return list(number_draws(inherited))


def forget_shared_draws(session: Session, run_id: int, wanted: dict[str, str]) -> list[str]:
    """Delete the stored answers (both turns) of repeated prompts that did not come from the
    call they now have (``wanted``: prompt key -> its call's cache key), and return those
    keys: a run stored before every repeat was its own draw answered them all with one call,
    so they are asked again. Other answers, answers to repeats from their own call, and copies
    whose follow-up has a class stored (``auditlabel``) stay."""
    stale = shared_draws(session, run_id, wanted)
    for start in range(0, len(stale), 500):
        for row in session.exec(
            select(AuditAnswer).where(
                AuditAnswer.run_id == run_id, col(AuditAnswer.key).in_(stale[start : start + 500])
            )
        ):
            session.delete(row)
    session.flush()
    return stale


def shared_draws(session: Session, run_id: int, wanted: dict[str, str]) -> list[str]:
    """The keys ``forget_shared_draws`` deletes and asks again, read only (a dry run)."""
    stale: list[str] = []
    keys = list(wanted)
    for start in range(0, len(keys), 500):  # bounded IN lists
        chunk = keys[start : start + 500]
        rows = session.exec(
            select(AuditAnswer.key, AuditAnswer.cache_key).where(
                AuditAnswer.run_id == run_id,
                AuditAnswer.turn == MAIN,
                col(AuditAnswer.key).in_(chunk),
            )
        )
        stale += [key for key, stored in rows if stored != wanted[key]]
    # A copy whose follow-up was already classified (by the judge or a person) is kept as it
    # is: its labels point at that answer, and people's work is not thrown away unasked.
    labelled: set[str] = set()
    for start in range(0, len(stale), 500):
        labelled.update(
            session.exec(
                select(AuditAnswer.key)
                .join(AuditLabel, col(AuditLabel.answer_id) == col(AuditAnswer.id))
                .where(
                    AuditAnswer.run_id == run_id,
                    col(AuditAnswer.key).in_(stale[start : start + 500]),
                )
            )
        )
    return [key for key in stale if key not in labelled]


def answered_keys(
    session: Session, run_id: int, *, answered_only: bool = False
) -> set[tuple[str, str]]:
    """The (key, turn) of the run's stored answers (``answered_only``: leaving out failed
    calls, which a run deletes and sends again)."""
    query = select(AuditAnswer.key, AuditAnswer.turn).where(AuditAnswer.run_id == run_id)
    if answered_only:
        query = query.where(AuditAnswer.status != ERROR)
    return {(key, turn) for key, turn in session.exec(query)}


def forget_failures(session: Session, run_id: int) -> set[tuple[str, str]]:
    """Delete the run's failed calls (they are sent again) and return what is left."""
    for row in session.exec(
        select(AuditAnswer).where(AuditAnswer.run_id == run_id, AuditAnswer.status == ERROR)
    ):
        session.delete(row)
    session.flush()
    return answered_keys(session, run_id)


def stored_answers(
    session: Session, run_id: int, *, turn: str | None = None, with_prompt: bool = False
) -> list[StoredAnswer]:
    """The run's answers in the order they were stored (one turn, or both); their prompt
    text only ``with_prompt`` (a second turn needs it, an analysis does not).

    Read as plain columns, not ORM objects, and with one ``meta`` object per distinct value
    (the repeats of a prompt share theirs): 168,000 name-audit answers would otherwise hold
    168,000 copies of 1,680 dictionaries (docs/audits.md has the figures).
    """
    columns = [
        col(AuditAnswer.id),
        col(AuditAnswer.key),
        col(AuditAnswer.turn),
        cast(col(AuditAnswer.meta), String),
        col(AuditAnswer.status),
        col(AuditAnswer.value),
        col(AuditAnswer.raw_text),
        col(AuditAnswer.cache_key),
    ]
    if with_prompt:
        columns.append(col(AuditAnswer.prompt))
    query = sa_select(*columns).where(col(AuditAnswer.run_id) == run_id)
    if turn is not None:
        query = query.where(col(AuditAnswer.turn) == turn)
    metas: dict[str | None, dict[str, Any]] = {}
    out = []
    for row in session.execute(query.order_by(col(AuditAnswer.id))):
        meta = metas.get(row[3])
        if meta is None:
            meta = metas[row[3]] = json.loads(row[3]) if row[3] else {}
        prompt = row[8] if with_prompt else None
        out.append(
            StoredAnswer(row[0], row[1], row[2], meta, row[4], row[5], row[6], prompt, row[7])
        )
    return out
