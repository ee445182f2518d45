"""``checks counterfactual``: judge a counterfactual copy of a judge run's answers with
exactly the run's settings, then compare (``judge.trust.diagnostics.counterfactual``).

"Exactly" is checked, not assumed: the settings are read back from the judge run, and the
identity hash they give now (model, prompt wording, rubric definitions, sampling) must equal
the run's own. If a rubric or a prompt template changed since, the comparison would mix two
judges, so the audit is refused with the reason.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select as columns
from sqlalchemy.engine import Engine
from sqlmodel import col

from judge.config import JudgeConfig
from judge.costs import Budget
from judge.errors import InvalidInputError
from judge.grading import judging
from judge.grading.rubrics import RubricSet
from judge.models.client import ModelClient
from judge.progress import Progress
from judge.prompts import PromptBook
from judge.runs import UNUSABLE_SHARE, RunSummary
from judge.store.engine import session_scope
from judge.store.queries import get_judge_run
from judge.store.tables import Item, JudgeRun
from judge.trust.copies import Copy, build_copy, find_copy, make_copy
from judge.trust.swaps import Swap


@dataclass(frozen=True)
class CounterfactualRun:
    copy: Copy
    judge_run_id: int
    summary: RunSummary


def run_settings(jrun: JudgeRun) -> JudgeConfig:
    """The judge settings a judge run was made with."""
    return JudgeConfig.model_validate(
        {
            "endpoint": jrun.endpoint_name,
            "prompt_variant": jrun.prompt_variant,
            "temperature": jrun.temperature,
            "samples": jrun.samples,
            "aggregation": jrun.aggregation,
            "max_tokens": jrun.max_tokens,
        }
    )


def check_same_judge(
    jrun: JudgeRun, client: ModelClient, book: PromptBook, rubrics: RubricSet
) -> JudgeConfig:
    """The run's settings, once it is certain that judging with ``client``, ``book`` and
    ``rubrics`` now reproduces its judge; InvalidInputError saying what differs otherwise."""
    config = run_settings(jrun)
    if client.model != jrun.model:
        raise InvalidInputError(
            f"judge run {jrun.id} was judged by model {jrun.model!r}, but endpoint "
            f"{client.name!r} now names {client.model!r}; set the endpoint's model back, or "
            "audit a run of this model"
        )
    digest = judging.judge_config_hash(
        client, config, book.judge_version, rubrics, book.rubric_judge_version, jrun.swap_order
    )
    if digest != jrun.config_hash:
        raise InvalidInputError(
            f"judge run {jrun.id}'s judge can no longer be reproduced: its prompt templates "
            f"or rubrics ({jrun.rubric_set}) changed since it was made, so a counterfactual "
            "would compare two different judges; judge the answers again with the current "
            "prompts (`fairjudge judge`) and audit that run"
        )
    return config


def run_counterfactual(
    engine: Engine,
    client: ModelClient,
    book: PromptBook,
    rubrics: RubricSet,
    judge_run_id: int,
    kinds: Sequence[str],
    swaps: Sequence[Swap],
    *,
    limit: int | None = None,
    progress: Progress | None = None,
    budget: Budget | None = None,
    max_unusable: float = UNUSABLE_SHARE,
    swap_in: str = "both",
) -> CounterfactualRun:
    """Make (or find) the copy and judge it with the run's own settings; resumable like any
    judge run (a second call judges only what is missing). With a ``budget``
    (``--max-cost``) the copy's judge run stops cleanly, ``incomplete``, once the next call
    could pass it (``judging.judge``); more than ``max_unusable`` of its judgments unscored
    and it ends ``unusable``."""
    with session_scope(engine) as session:
        jrun = get_judge_run(session, judge_run_id)
        config = check_same_judge(jrun, client, book, rubrics)
        swap_order = jrun.swap_order
    copy = make_copy(engine, judge_run_id, kinds, swaps, limit=limit, swap_in=swap_in)
    # The comparison needs scipy.stats (over a second to import on 2 cores): import it on a
    # thread while the calls wait on the network, not after them.
    warm = threading.Thread(target=importlib.import_module, args=("scipy.stats",), daemon=True)
    warm.start()
    summary = judging.judge(
        engine, client, book, rubrics, config, copy.run_id, progress=progress,
        swap_order=swap_order, budget=budget, resume_command="checks counterfactual",
        max_unusable=max_unusable,
    )  # fmt: skip
    return CounterfactualRun(copy, summary.run_id, summary)


_IN_LIMIT = 5000
"""The most ids put in one SQL ``IN (...)`` (SQLite allows 32,766 bound values)."""


@dataclass(frozen=True)
class Planned:
    """What ``run_counterfactual`` would send (``checks counterfactual --dry-run``):
    the copy (its generation run's id, None when it is not made yet) and its judge run (None:
    not made yet), the items copied and skipped, the judgments to make, those without an
    answer to judge, the first calls the cache answers and the messages of the others."""

    copy_run_id: int | None
    judge_run_id: int | None
    items_copied: int
    items_skipped: int
    judgments: int
    missing_answers: int
    cached: int
    to_send: list[list[dict[str, str]]]
    max_tokens: int


def plan_counterfactual(
    engine: Engine,
    client: ModelClient,
    book: PromptBook,
    rubrics: RubricSet,
    judge_run_id: int,
    kinds: Sequence[str],
    swaps: Sequence[Swap],
    *,
    limit: int | None = None,
    swap_in: str = "both",
) -> Planned:
    """The calls ``run_counterfactual`` would make, with nothing sent or stored: the same
    checks first. A copy made already is planned as its judge run would be
    (``judging.plan_calls``); one not made yet is built in memory and every judge prompt it
    would get is rendered, each counted once per sample and order (none is cached: its
    texts are new)."""
    with session_scope(engine) as session:
        jrun = get_judge_run(session, judge_run_id)
        config = check_same_judge(jrun, client, book, rubrics)
        swap_order = jrun.swap_order
        found = find_copy(session, judge_run_id, kinds, swaps, limit, swap_in)
        if found is None:
            _, built = build_copy(session, judge_run_id, kinds, swaps, limit, swap_in)
        found_id = None if found is None else found.id
        derived = dict(found.derivation or {}) if found is not None else {}
    if found_id is not None:
        planned = judging.plan_calls(
            engine, client, book, rubrics, config, found_id, swap_order=swap_order
        )
        return Planned(
            found_id, planned.run_id, int(derived.get("items_copied", 0)),
            int(derived.get("items_skipped", 0)), planned.judgments, planned.missing_answers,
            planned.cached, planned.to_send, config.max_tokens,
        )  # fmt: skip
    answers: dict[int, dict[str, tuple[str | None, str, str | None]]] = {}
    asked = {
        r["item_id"]: r["extra"]["item_fields"] for r in built.rows if "item_fields" in r["extra"]
    }
    for row in built.rows:
        answers.setdefault(row["item_id"], {})[row["part"]] = (
            row["raw_text"],
            row["flag"],
            row["error"],
        )
    wanted = sorted(answers)
    items: dict[int, tuple[str, dict[str, Any]]] = {}
    with session_scope(engine) as session:
        for start in range(0, len(wanted), _IN_LIMIT):  # bounded IN lists
            chunk = wanted[start : start + _IN_LIMIT]
            query = columns(col(Item.id), col(Item.stage), col(Item.fields))
            for item_id, stage, fields in session.execute(query.where(col(Item.id).in_(chunk))):
                items[item_id] = (stage, asked.get(item_id, fields))
    judgments = missing = 0
    to_send: list[list[dict[str, str]]] = []
    for item_id in wanted:
        stage, fields = items[item_id]
        parts = answers[item_id]
        for name in rubrics.for_stage(stage):
            rubric = rubrics[name]
            times = config.samples * (2 if swap_order and rubric.swapped_order else 1)
            judgments += times
            # the judge's own rule for an answer it cannot judge (no call is made)
            if judging._missing_answer(rubric.parts, parts) is not None:
                missing += times
                continue
            texts = rubric.render_texts(fields, {p: row[0] or "" for p, row in parts.items()})
            # the swapped order has the same texts, so the same characters
            messages = book.judge_prompt(rubric, texts, variant=config.prompt_variant).messages
            to_send += [messages] * times
    return Planned(
        None, None, built.copied, built.skipped, judgments, missing, 0, to_send,
        config.max_tokens,
    )  # fmt: skip
