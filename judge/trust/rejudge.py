"""``judge-audit counterfactual``: judge a counterfactual copy of a judge run's answers with
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

from sqlalchemy.engine import Engine

from judge.config import JudgeConfig
from judge.errors import InvalidInputError
from judge.grading import judging
from judge.grading.rubrics import RubricSet
from judge.models.client import ModelClient
from judge.progress import Progress
from judge.prompts import PromptBook
from judge.runs import RunSummary
from judge.store.engine import session_scope
from judge.store.queries import get_judge_run
from judge.store.tables import JudgeRun
from judge.trust.copies import Copy, make_copy
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
) -> CounterfactualRun:
    """Make (or find) the copy and judge it with the run's own settings; resumable like any
    judge run (a second call judges only what is missing)."""
    with session_scope(engine) as session:
        jrun = get_judge_run(session, judge_run_id)
        config = check_same_judge(jrun, client, book, rubrics)
        swap_order = jrun.swap_order
    copy = make_copy(engine, judge_run_id, kinds, swaps, limit=limit)
    # The comparison needs scipy.stats (over a second to import on 2 cores): import it on a
    # thread while the calls wait on the network, not after them.
    warm = threading.Thread(target=importlib.import_module, args=("scipy.stats",), daemon=True)
    warm.start()
    summary = judging.judge(
        engine, client, book, rubrics, config, copy.run_id, progress=progress,
        swap_order=swap_order,
    )  # fmt: skip
    return CounterfactualRun(copy, summary.run_id, summary)
