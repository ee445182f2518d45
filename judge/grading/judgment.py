"""One judgment: its judge call (cached), one repair request for an unreadable reply, the
score's probabilities when the aggregation reads them, and the row stored for it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from judge.errors import InvalidInputError
from judge.grading.logprobs import ScoreDistribution, score_distribution
from judge.grading.parsing import Grade, Scored, Unscored, UnscoredKind, parse_grade
from judge.grading.rubrics import Rubric, grade_schema
from judge.models.cache import CallCacheView, CallGate, CallOutcome, cached_complete
from judge.models.client import CallFailed, Completion, ModelClient
from judge.prompts import PromptBook, RenderedPrompt
from judge.runs import Row
from judge.store.tables import JudgeRun, utcnow
from judge.vocab import Scale


@dataclass(frozen=True)
class JudgeTask:
    """One judgment to make: an item, a rubric and a sample, with the texts the rubric
    compares (in the order judged) or why they are missing."""

    item_id: int
    rubric: Rubric
    sample_index: int
    texts: list[tuple[str, str]] | None  # None: an answer is missing
    missing: str | None
    position: str | None = None  # in a run judged in both orders: "given" or "swapped"


def judge_one(
    task: JudgeTask,
    client: ModelClient,
    cache: CallCacheView,
    book: PromptBook,
    jrun: JudgeRun,
    gate: CallGate | None = None,
    prompt: RenderedPrompt | None = None,
) -> tuple[Row | None, list[CallOutcome]]:
    """One judgment's row and the calls behind it; no row when the gate (a cost budget)
    refused a call it needed (paid calls made before still reach the cache). ``prompt``: the
    task's judge prompt when the caller rendered it already (a batch run renders each once)."""
    base: dict[str, Any] = {
        "judge_run_id": jrun.id,
        "item_id": task.item_id,
        "rubric": task.rubric.name,
        "sample_index": task.sample_index,
        "position": task.position,
        "score_probs": None,
        "expected_score": None,
        "template_version": book.template_version(task.rubric),
        "rubric_version": task.rubric.version,
        "rubric_hash": task.rubric.definition_hash,
        "model": client.model,
        "params": {
            "temperature": jrun.temperature,
            "max_tokens": jrun.max_tokens,
            "prompt_variant": jrun.prompt_variant,
        },
    }
    if task.texts is None:
        missing = Unscored(UnscoredKind.MISSING_ANSWER, task.missing or "answer missing")
        return _row(base, missing, [], prompt_hash="", cache_key=""), []
    if prompt is None:
        prompt = book.judge_prompt(task.rubric, task.texts, variant=jrun.prompt_variant)
    call = call_params(task, jrun)
    first = cached_complete(client, cache, prompt.messages, gate=gate, **call)
    if first.refused:
        return None, []
    keys = {"prompt_hash": prompt.prompt_hash, "cache_key": first.key}
    if first.failure is not None:
        failed = Unscored(UnscoredKind.CALL_FAILED, f"call failed: {first.failure.reason}")
        return _row(base, failed, [first], **keys), [first]
    assert first.completion is not None
    judged = [text for _, text in task.texts]
    scale = task.rubric.scale
    grade: Grade = parse_grade(first.completion.text, quoted=judged, scale=scale)
    outcomes = [first]
    repair_raw = None
    scored_by = first.completion
    if isinstance(grade, Unscored):
        why, repair_messages = repair_request(prompt.messages, first.completion, grade, book, task)
        second = cached_complete(client, cache, repair_messages, gate=gate, **call)
        if second.refused:
            return None, outcomes
        outcomes.append(second)
        if second.failure is not None:
            grade = Unscored(
                UnscoredKind.CALL_FAILED,
                f"call failed during repair: {second.failure.reason}",
                first.completion.text,
                grade.explanation,
            )
        else:
            assert second.completion is not None
            repair_raw = second.completion.text
            repaired = parse_grade(repair_raw, quoted=judged, scale=scale)
            if isinstance(repaired, Scored):
                grade = repaired
                scored_by = second.completion
            else:
                grade = Unscored(
                    UnscoredKind.UNPARSABLE,
                    f"unparsable after one repair: first reply: {why}; "
                    f"repair reply: {repaired.reason}",
                    first.completion.text,
                    grade.explanation,
                )
    row = _row(base, grade, outcomes, **keys)
    row["raw_output"] = first.completion.text
    row["repair_output"] = repair_raw
    if jrun.aggregation == LOGPROB and isinstance(grade, Scored):
        # From the reply that gave the score (the repair's, after a repair).
        found = score_distribution(scored_by.logprobs, scored_by.text, scale=scale, quoted=judged)
        if isinstance(found, ScoreDistribution):
            row["score_probs"] = {str(k): p for k, p in found.probs.items()}
            row["expected_score"] = found.expected
        else:
            row["params"] = {**row["params"], "logprob_missing": found.reason}
    return row, outcomes


def repair_request(
    messages: list[dict[str, str]],
    first: Completion,
    grade: Unscored,
    book: PromptBook,
    task: JudgeTask,
) -> tuple[str, list[dict[str, str]]]:
    """Why a first reply is being repaired, and the messages of its repair call: the judge
    prompt, the reply, and the request to fix it (one place, so that a repair sent later in
    a batch, ``judge.grading.batch_calls``, is the same call with the same cache key)."""
    why = grade.reason
    if first.finish_reason == "length":
        why += " (the reply was cut off at max_tokens)"
    return why, messages + [
        {"role": "assistant", "content": first.text or ""},
        {"role": "user", "content": book.repair_message(why, task.rubric)},
    ]


def call_params(task: JudgeTask, jrun: JudgeRun) -> dict[str, Any]:
    """The parameters of a task's judge call (besides its messages)."""
    call: dict[str, Any] = {
        # Both orders of a pair share the sample's seed, so only the order differs.
        "sample_index": task.sample_index % jrun.samples,
        "temperature": jrun.temperature,
        "max_tokens": jrun.max_tokens,
        "schema": grade_schema(task.rubric.scale),
    }
    if jrun.aggregation == LOGPROB:
        call["top_logprobs"] = top_logprobs(task.rubric.scale)
    return call


LOGPROB = "logprob"
"""The aggregation that also reads each score level's probability from the score token."""


def top_logprobs(scale: Scale) -> int:
    """Alternatives asked for per token: every level of the scale, at least 5, at most 20
    (OpenAI's limit)."""
    return max(5, min(20, len(scale.labels)))


def check_logprobs(client: ModelClient) -> None:
    """Refuse, with one small call and no retries, an endpoint that returns no
    log-probabilities: ``--aggregation logprob`` never falls back to sampled scores alone."""
    probe = ModelClient(
        client.name,
        client.config.model_copy(update={"max_retries": 0}),
        limiter=client.limiter,  # the probe keeps the endpoint's quota too
    )
    why = "its reply carried none"
    try:
        done = probe.complete(
            [
                {"role": "system", "content": "You grade texts."},
                {"role": "user", "content": 'Reply with exactly {"score": 3}'},
            ],
            temperature=0.0,
            max_tokens=2,
            top_logprobs=5,
        )
        if done.logprobs:
            return
    except CallFailed as exc:
        why = f"it refused the request ({exc.reason})"
    raise InvalidInputError(
        f"endpoint {client.name!r} returns no token log-probabilities ({why}), so "
        "--aggregation logprob cannot read score probabilities; use mean or majority, or an "
        "endpoint that returns logprobs (for the embedded model set `logits_all = true` "
        "under [embedded] and restart it with `fairjudge model stop` / `model serve`)"
    )


def _row(
    base: dict[str, Any],
    grade: Grade,
    outcomes: list[CallOutcome],
    *,
    prompt_hash: str,
    cache_key: str,
) -> Row:
    """The ``Judgment`` row of one grade, every column given (it is written with a Core
    insert, which applies no model defaults)."""
    done = [o.completion for o in outcomes if o.completion]
    row: Row = {
        **base,
        "prompt_hash": prompt_hash,
        "cache_key": cache_key,
        "calls": len(outcomes),
        "prompt_tokens": sum(c.prompt_tokens for c in done),
        "cached_prompt_tokens": sum(c.cached_prompt_tokens for c in done),
        "completion_tokens": sum(c.completion_tokens for c in done),
        "latency_s": sum(c.latency_s for c in done),
        "explanation": grade.explanation,
        "raw_output": None,
        "repair_output": None,
        "created_at": utcnow(),
    }
    if isinstance(grade, Scored):
        row.update(status="scored", score=grade.score, unscored_kind=None, reason=None)
    else:
        row.update(
            status="unscored", score=None, unscored_kind=grade.kind.value, reason=grade.reason
        )
    return row
