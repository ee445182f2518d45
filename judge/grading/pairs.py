"""Pairwise judge runs (``fairjudge judge-pairs``): FairJudge's own judge shown the answers of
two generation runs to the same item, side by side, saying which is better by a criterion
(``prompts/judge_pair_criteria.toml``), or a tie, in both orders and ``repeats`` times.

The verdicts go to the pairwise tables that imported judgments use
(``judge.store.pairwise_tables``): one ``PairwiseImport`` per pairwise judge run (format
``judge-pairs``; its ``sha256`` is the run's identity hash), so ``judgments position``, the
API and the page read them unchanged. The judge's label names its model, criterion and a hash
of its settings and server, so the runs of one judge over several pairs of generation runs
(A-B, A-C, B-C) are one judge to the figures (Bradley-Terry over three models or more); a
model's label names its generation run.

This is an adapter over the judge runner's pieces, not a second runner: calls go through the
call cache (``cached_complete``), results are stored as they arrive by ``store_results``
under the run's lease (``run_lease``), and ``--max-cost`` is a ``BudgetGate``. ``judging.judge``
itself could not take the task without surgery: its plan, rows and statuses are a judge run's
(one generation run, ``Judgment`` rows on a 1..N scale). Why these differ from ``judge``:

* only live calls (no Batch API transport);
* no repair request: an unreadable reply is stored as ``unreadable`` with its raw text;
* a call that failed for good is not stored, so a rerun tries it again.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, update
from sqlalchemy import select as columns
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from judge.budgets import Budget, BudgetGate
from judge.config import JudgeConfig
from judge.errors import InvalidInputError
from judge.grading.pair_verdicts import PAIR_SCHEMA, parse_pair_verdict
from judge.hashing import sha256
from judge.models.cache import CallCacheView, CallOutcome, cached_complete, call_key
from judge.models.client import ModelClient
from judge.prices import Prices
from judge.progress import Progress
from judge.prompts import PromptBook
from judge.runs import NOT_MADE, Row, RunSummary, run_lease, store_results
from judge.store.engine import session_scope
from judge.store.pairwise_tables import PairwiseImport, PairwiseVerdict
from judge.store.queries import get_generation_run
from judge.store.tables import CallCache, GenerationRun, Item, Response
from judge.vocab import STAGE_PARTS

FORMAT = "judge-pairs"
"""``PairwiseImport.format`` of a pairwise judge run (an import's is shi2024, csv or jsonl)."""

LEASE_KIND = "pairwise"
"""``RunLease.kind`` of a pairwise judge run."""


@dataclass(frozen=True)
class PairCriterion:
    """What the judge compares two answers on: a section of judge_pair_criteria.toml."""

    name: str
    title: str
    criterion: str


def pair_criterion(book: PromptBook, name: str) -> PairCriterion:
    """The criterion ``name``; InvalidInputError naming the known ones otherwise."""
    found = book.pair_criteria.get(name)
    known = sorted(k for k, v in book.pair_criteria.items() if isinstance(v, dict))
    if not isinstance(found, dict):
        raise InvalidInputError(
            f"no pairwise criterion {name!r}; known: {', '.join(known)} "
            "(prompts/judge_pair_criteria.toml)"
        )
    return PairCriterion(name, str(found.get("title", name)), str(found.get("criterion", "")))


@dataclass(frozen=True)
class PairTask:
    """One verdict to get: a question of two runs' answers, shown in one order, once."""

    question: str
    category: str
    repetition: int
    first: str  # the model label shown as ANSWER A
    second: str
    messages: list[dict[str, str]]


@dataclass(frozen=True)
class PairPlan:
    """A pairwise judge run's identity and what it holds when done: every task (done or
    not), the questions left out because an answer is missing, and the run if it exists."""

    judge: str
    digest: str
    source: str
    run_id: int | None
    tasks: list[PairTask]
    missing: list[str]
    done: set[tuple[str, str, str, int]]

    @property
    def todo(self) -> list[PairTask]:
        return [t for t in self.tasks if _key(t) not in self.done]


def _key(t: PairTask) -> tuple[str, str, str, int]:
    return (t.question, t.first, t.second, t.repetition)


def model_label(run: GenerationRun) -> str:
    """How a generation run is named as a model in pairwise figures."""
    return f"{run.model} (run {run.id})"


def judge_label(
    client: ModelClient, config: JudgeConfig, crit: PairCriterion, book: PromptBook
) -> str:
    """The judge's label: its model and criterion, and a hash of everything else that decides
    its verdicts (server, temperature, reply length, the criterion's text, the templates)."""
    settings = {
        "base_url": client.config.base_url,
        "model": client.model,
        "temperature": config.temperature,
        "max_tokens": config.max_tokens,
        "criterion": [crit.name, crit.title, crit.criterion],
        "templates": book.pair_version,
    }
    digest = sha256(json.dumps(settings, sort_keys=True))
    # No brackets: a label is printed in tables whose markup would read "[...]" as a style.
    return f"{client.model}/{crit.name}/{digest[:8]}"


def _answers(session: Session, run_id: int) -> dict[tuple[int, str], str | None]:
    """(item, part) -> the answer's text, None when it is empty or failed."""
    query = columns(
        col(Response.item_id), col(Response.part), col(Response.raw_text), col(Response.flag)
    ).where(col(Response.run_id) == run_id)
    return {
        (item, part): (None if flag in ("empty", "error") or not (raw or "").strip() else raw)
        for item, part, raw, flag in session.execute(query)
    }


def plan_pairs(
    session: Session,
    client: ModelClient,
    book: PromptBook,
    config: JudgeConfig,
    run_a: int,
    run_b: int,
    *,
    criterion: str,
    repeats: int,
) -> PairPlan:
    """Every verdict the pairwise judge run of these two generation runs holds when done,
    and which it holds already; nothing is written."""
    if run_a == run_b:
        raise InvalidInputError(
            f"judge-pairs needs two different generation runs, got {run_a} twice"
        )
    if repeats < 1:
        raise InvalidInputError(f"--repeats must be at least 1, got {repeats}")
    gen_a, gen_b = sorted((get_generation_run(session, run_a), get_generation_run(session, run_b)),
                          key=lambda r: r.id or 0)  # fmt: skip
    if gen_a.dataset_id != gen_b.dataset_id:
        raise InvalidInputError(
            f"generation runs {gen_a.id} and {gen_b.id} answer different datasets; pairwise "
            "judging compares two runs' answers to the same items"
        )
    crit = pair_criterion(book, criterion)
    judge = judge_label(client, config, crit, book)
    label_a, label_b = model_label(gen_a), model_label(gen_b)
    digest = sha256(json.dumps([judge, gen_a.id, gen_b.id]))
    source = f"judge-pairs: generation runs {gen_a.id} and {gen_b.id}, judge {judge}"
    found = session.exec(
        select(PairwiseImport).where(
            PairwiseImport.format == FORMAT, PairwiseImport.sha256 == digest
        )
    ).first()
    done: set[tuple[str, str, str, int]] = set()
    if found is not None:
        v = PairwiseVerdict
        query = columns(col(v.question), col(v.model_first), col(v.model_second), col(v.repetition))
        done = {tuple(r) for r in session.execute(query.where(col(v.import_id) == found.id))}  # type: ignore[misc]
    answers_a, answers_b = _answers(session, gen_a.id or 0), _answers(session, gen_b.id or 0)
    wanted = {item for item, _ in answers_a} | {item for item, _ in answers_b}
    items = session.exec(select(Item).where(col(Item.id).in_(wanted)).order_by(col(Item.key))).all()
    tasks: list[PairTask] = []
    missing: list[str] = []
    for item in items:
        parts = STAGE_PARTS.get(item.stage, ("answer",))
        for part in parts:
            question = item.key if len(parts) == 1 else f"{item.key}/{part}"
            a, b = answers_a.get((item.id or 0, part)), answers_b.get((item.id or 0, part))
            if a is None or b is None:
                missing.append(question)
                continue
            asked = book.generation_prompt(item.stage, part, item.fields).messages[0]["content"]
            # each order rendered once: its repetitions differ only by their seed
            orders = [
                (first, second, book.pair_prompt(crit, asked, x, y).messages)
                for first, second, x, y in ((label_a, label_b, a, b), (label_b, label_a, b, a))
            ]
            for rep in range(1, repeats + 1):
                for first, second, messages in orders:
                    tasks.append(PairTask(question, item.stage, rep, first, second, messages))
    return PairPlan(
        judge, digest, source, None if found is None else found.id, tasks, missing, done
    )


def _call_params(task: PairTask, config: JudgeConfig) -> dict[str, Any]:
    # Both orders of a repetition share its seed, so only the order differs.
    return {
        "sample_index": task.repetition - 1,
        "temperature": config.temperature,
        "max_tokens": config.max_tokens,
        "schema": PAIR_SCHEMA,
    }


@dataclass
class PairRunSummary:
    """One pass over a pairwise judge run: the runner's summary (flags: verdicts by kind),
    the judge's label, questions left out, and calls that failed for good (not stored)."""

    judge: str
    summary: RunSummary
    missing: list[str]
    failed: list[str] = field(default_factory=list)
    budget_stopped: bool = False


def judge_pairs(
    engine: Engine,
    client: ModelClient,
    book: PromptBook,
    config: JudgeConfig,
    run_a: int,
    run_b: int,
    *,
    criterion: str = "overall",
    repeats: int = 1,
    budget: Budget | None = None,
    progress: Progress | None = None,
    threads: int | None = None,
) -> PairRunSummary:
    """Create (or resume) the pairwise judge run of two generation runs and get every verdict
    it still lacks, both orders of each question, ``repeats`` times. A second process on the
    same run gets ``RunBusyError`` before any call."""
    with session_scope(engine) as session:
        plan = plan_pairs(session, client, book, config, run_a, run_b,
                          criterion=criterion, repeats=repeats)  # fmt: skip
        if plan.run_id is None:
            row = PairwiseImport(source=plan.source, format=FORMAT, sha256=plan.digest, records=0)
            session.add(row)
            session.flush()
            assert row.id is not None
            run_id = row.id
        else:
            run_id = plan.run_id
    cache = CallCacheView(engine, client.model)
    gate = BudgetGate(budget) if budget is not None else None
    failed: list[str] = []
    lock = threading.Lock()

    def work(task: PairTask) -> tuple[Row | None, list[CallOutcome]]:
        out = cached_complete(client, cache, task.messages, gate=gate, **_call_params(task, config))
        if out.refused:
            return None, []
        if out.failure is not None or out.completion is None:
            with lock:
                failed.append(f"{task.question}: {out.failure.reason if out.failure else '?'}")
            return None, [out]
        reading = parse_pair_verdict(out.completion.text)
        row: Row = {
            "import_id": run_id, "judge": plan.judge, "question": task.question,
            "model_first": task.first, "model_second": task.second,
            "repetition": task.repetition, "verdict": reading.verdict,
            "category": task.category, "raw": out.completion.text,
        }  # fmt: skip
        return row, [out]

    with run_lease(engine, LEASE_KIND, run_id):
        summary = store_results(
            engine, PairwiseVerdict.__table__, run_id, plan.todo, work,  # type: ignore[attr-defined]
            concurrency=threads or client.config.concurrency, label="verdict",
            progress=progress, run_column="import_id",
        )  # fmt: skip
        _count_records(engine, run_id)
    flags = dict(summary.flags)
    if failed and NOT_MADE in flags:
        flags[NOT_MADE] -= len(failed)
        flags["call_failed"] = len(failed)
        if not flags[NOT_MADE]:
            del flags[NOT_MADE]
    summary = RunSummary(summary.run_id, summary.tasks, summary.model_calls, summary.cached,
                         summary.http_attempts, flags)  # fmt: skip
    stopped = budget is not None and budget.exhausted
    return PairRunSummary(plan.judge, summary, plan.missing, failed, stopped)


def _count_records(engine: Engine, run_id: int) -> None:
    """The run's ``records``: the verdicts it holds now."""
    with session_scope(engine) as session:
        n = session.exec(
            select(func.count())
            .select_from(PairwiseVerdict)
            .where(PairwiseVerdict.import_id == run_id)
        ).one()
        session.execute(
            update(PairwiseImport).where(col(PairwiseImport.id) == run_id).values(records=n)
        )


@dataclass(frozen=True)
class PairCost:
    """The tokens of a pairwise judge run's stored verdicts, read from the call cache."""

    calls: int
    prompt_tokens: int
    cached_prompt_tokens: int
    completion_tokens: int


def pairs_cost(
    session: Session, client: ModelClient, config: JudgeConfig, plan: PairPlan
) -> PairCost:
    """What the stored verdicts' calls took: the cache rows of their keys (the verdict rows
    carry no tokens; the keys are the plan's, so the same calls)."""
    keys = [
        call_key(client, t.messages, **_call_params(t, config))
        for t in plan.tasks
        if _key(t) in plan.done
    ]
    totals = [0, 0, 0]
    for start in range(0, len(keys), 5000):
        chunk = keys[start : start + 5000]
        query = columns(
            func.coalesce(func.sum(CallCache.prompt_tokens), 0),
            func.coalesce(func.sum(CallCache.cached_prompt_tokens), 0),
            func.coalesce(func.sum(CallCache.completion_tokens), 0),
        ).where(col(CallCache.key).in_(chunk))
        for i, value in enumerate(session.execute(query).one()):
            totals[i] += int(value)
    return PairCost(len(keys), *totals)


def cached_share(
    engine: Engine, client: ModelClient, config: JudgeConfig, tasks: list[PairTask]
) -> tuple[int, list[list[dict[str, str]]]]:
    """How many of ``tasks`` the call cache answers, and the messages of the others."""
    cache = CallCacheView(engine, client.model)
    hits = 0
    to_send = []
    for t in tasks:
        if cache.has(call_key(client, t.messages, **_call_params(t, config))):
            hits += 1
        else:
            to_send.append(t.messages)
    return hits, to_send


def pairs_budget(
    session: Session,
    client: ModelClient,
    config: JudgeConfig,
    plans: list[PairPlan],
    max_cost: float | None,
    prices: Prices | None,
    endpoint: str,
) -> Budget | None:
    """The budget of a ``judge-pairs`` call over ``plans`` (one per pair of runs): the bound
    given now, else the one kept with their runs (the smallest, if they differ), less what
    their stored verdicts' calls cost already, so that rerunning the same command does not
    spend the bound again (as ``judge`` keeps its bound with its run). None: no bound. A
    bound without prices is a ConfigError before any call."""
    ids = [plan.run_id for plan in plans if plan.run_id is not None]
    kept = [
        bound
        for bound in session.exec(
            select(PairwiseImport.max_cost).where(col(PairwiseImport.id).in_(ids))
        )
        if bound is not None
    ] if ids else []  # fmt: skip
    limit = max_cost if max_cost is not None else min(kept, default=None)
    if limit is None:
        return None
    if prices is None:
        return Budget(limit, prices, endpoint=endpoint)  # raises, naming what to set
    costs = [pairs_cost(session, client, config, plan) for plan in plans if plan.done]
    spent = sum(
        prices.cost(c.prompt_tokens, c.completion_tokens, cached=c.cached_prompt_tokens)
        for c in costs
    )
    return Budget(limit, prices, endpoint=endpoint, spent_before=spent)


def keep_bound(engine: Engine, run_id: int, max_cost: float) -> None:
    """Keep ``max_cost`` with a pairwise judge run (``pairs_budget`` reads it back)."""
    with session_scope(engine) as session:
        session.execute(
            update(PairwiseImport).where(col(PairwiseImport.id) == run_id).values(max_cost=max_cost)
        )
