"""A run's model calls sent through a provider's Batch API, their answers collected into the
call cache: durable at every step, for any stage (judge, generation and audit runs; see
docs/judging.md "The Batch API").

A stage hands over the calls its live path would make (``BatchCall``: the cache key and the
request body, ``batch_call``), ``send_batches`` gets them answered, and the stage then runs its
ordinary live pass: every answered call is a cache hit under the key a live call has, so the
same rows, parsing, repairs and unscored kinds follow. A call the batch did not answer is
given to the stage as a failure with its reason (``BatchAnswers`` raises it where the live
client would have made the call), never as a guess.

Each step is written to ``batchjob`` before it is taken:

1. ``intent``: the calls (their keys) and the unique name the input file will be uploaded as;
2. ``uploaded``: the input file's id;
3. ``submitted``: the batch's id;
4. ``collected``: the answers stored in the call cache and the calls that got none, with why,
   in one transaction.

Resuming, whatever moment a command was killed at (``kill -9`` included): the run's jobs that
are not collected are taken up first. An ``intent`` looks for its file at the provider by
name (an upload whose id was never written down) and uploads only when there is none; an
``uploaded`` job looks for a batch made from its file before creating one; a ``submitted``
job is polled and collected. Only calls that no job covers go into a new batch. So the calls
of a batch are sent once, and a rerun after a batch that expired or failed lines sends only
the calls that got no answer.

``judge.models.transport`` builds a stage's pass on this (the stand-in client and cache its
live pass runs with, and the command's result). How a command uses the Batch API (whether
it waits, how often it looks, whether failed calls go live) is one ``BatchOptions`` value
(``judge.models.batch_options``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import uuid4

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from judge.models.batch import BatchApi, BatchState, LineResult, chat_body, read_lines, request_line
from judge.models.batch_options import BatchOptions
from judge.models.cache import CacheRow, CallCacheView, call_key
from judge.models.client import CallFailed, Completion, ModelClient
from judge.progress import Progress
from judge.store.tables import BatchJob, CallCache, utcnow

OPEN = ("intent", "uploaded", "submitted")
"""Job states a later command takes up."""
MAX_CALLS = 50_000
"""Most requests in one batch (OpenAI's limit); more calls go in several batches."""
_IN_LIMIT = 5000


@dataclass(frozen=True)
class BatchCall:
    """One call for a batch: its cache key (the line's custom_id) and its request body."""

    key: str
    body: dict[str, Any]
    logprobs: bool = False


def batch_call(
    client: ModelClient,
    messages: list[dict[str, str]],
    *,
    sample_index: int,
    temperature: float,
    max_tokens: int,
    schema: dict[str, Any] | None = None,
    top_logprobs: int | None = None,
) -> BatchCall:
    """The batch form of the call ``cached_complete`` would make with these arguments: the
    same key, and the body the live client would send."""
    params: dict[str, Any] = {
        "sample_index": sample_index,
        "temperature": temperature,
        "max_tokens": max_tokens,
        "schema": schema,
        "top_logprobs": top_logprobs,
    }
    return BatchCall(
        call_key(client, messages, **params),
        chat_body(client, messages, **params),
        logprobs=top_logprobs is not None,
    )


@dataclass(frozen=True)
class BatchOwner:
    """Whose calls a batch holds: a run of some kind, and which of its calls (``purpose``:
    'first' for the calls themselves, 'repair' for a follow-up batch of repairs)."""

    run_kind: str
    run_id: int
    purpose: str = "first"


@dataclass(frozen=True)
class Failed:
    """Why a batch gave a call no answer; ``raw``: its output line, when it was unreadable."""

    reason: str
    raw: str | None = None


@dataclass(frozen=True)
class BatchReport:
    """One batch as this command left it."""

    job_id: int
    batch_id: str | None
    status: str
    calls: int
    answered: int
    failed: int
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job_id,
            "batch_id": self.batch_id,
            "status": self.status,
            "calls": self.calls,
            "answered": self.answered,
            "failed": self.failed,
            "detail": self.detail,
        }


@dataclass
class Collected:
    """What ``send_batches`` did: calls answered (now in the call cache), calls that got no
    answer and why, calls in batches still running (only when not waiting), the batches, and
    the tokens of the answers this command stored (what it paid at the batch price)."""

    answered: set[str] = field(default_factory=set)
    failed: dict[str, Failed] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    batches: list[BatchReport] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0


def send_batches(
    engine: Engine,
    api: BatchApi,
    owner: BatchOwner,
    calls: Sequence[BatchCall],
    *,
    options: BatchOptions = BatchOptions(),
    progress: Progress | None = None,
    max_calls: int = MAX_CALLS,
    sleep: Callable[[float], None] = time.sleep,
) -> Collected:
    """Get ``calls`` answered through the Batch API (calls already in the call cache are
    skipped), resuming ``owner``'s open batches first; store every answer in the call cache.
    ``progress`` hears (finished, total) calls from the batches' request counts while they
    run. Running batches are looked at every ``options.poll_s`` seconds (``sleep`` waits);
    without ``options.wait``, they are looked at once and left to a later call (their calls
    are ``pending``). ``options.retry_live`` is not read here: it is for the stage's live
    pass. Raises EndpointError when the provider refuses a step; what was recorded stays, so
    the same command resumes."""
    wanted = {c.key: c for c in calls}
    done = Collected()
    jobs = _open_jobs(engine, owner, api.config.model)
    covered: set[str] = set()
    for job in jobs:
        covered.update(job.keys)
    cached = _cached(engine, [k for k in wanted if k not in covered])
    rest = [c for k, c in wanted.items() if k not in covered and k not in cached]
    for start in range(0, len(rest), max_calls):
        jobs.append(_intent(engine, api, owner, rest[start : start + max_calls]))
    live: list[BatchJob] = []
    for job in jobs:
        job = _submit(engine, api, job, wanted)
        if job.state == "submitted":
            live.append(job)
        else:  # abandoned: nothing left to send
            done.batches.append(_report(job))
    _poll(engine, api, live, wanted, done, progress, options, sleep)
    return done


def _open_jobs(engine: Engine, owner: BatchOwner, model: str) -> list[BatchJob]:
    with Session(engine) as session:
        found = session.scalars(
            select(BatchJob)
            .where(
                col(BatchJob.run_kind) == owner.run_kind,
                col(BatchJob.run_id) == owner.run_id,
                col(BatchJob.purpose) == owner.purpose,
                col(BatchJob.model) == model,
                col(BatchJob.state).in_(OPEN),
            )
            .order_by(col(BatchJob.id))
        ).all()
        session.expunge_all()
        return list(found)


def _cached(engine: Engine, keys: Sequence[str]) -> set[str]:
    have: set[str] = set()
    with engine.connect() as conn:
        for start in range(0, len(keys), _IN_LIMIT):
            chunk = list(keys[start : start + _IN_LIMIT])
            have.update(
                conn.execute(
                    select(col(CallCache.key)).where(col(CallCache.key).in_(chunk))
                ).scalars()
            )
    return have


def _intent(
    engine: Engine, api: BatchApi, owner: BatchOwner, calls: Sequence[BatchCall]
) -> BatchJob:
    """Step 1: write down the calls of a new batch and the name its file will have."""
    name = f"fairjudge-{owner.run_kind}-{owner.run_id}-{owner.purpose}-{uuid4().hex[:16]}.jsonl"
    job = BatchJob(
        run_kind=owner.run_kind,
        run_id=owner.run_id,
        purpose=owner.purpose,
        endpoint_name=api.name,
        base_url=api.config.base_url,
        model=api.config.model,
        state="intent",
        input_name=name,
        keys=[c.key for c in calls],
        calls=len(calls),
    )
    with Session(engine, expire_on_commit=False) as session:
        session.add(job)
        session.commit()
    return job


def _set(engine: Engine, job: BatchJob, **values: Any) -> BatchJob:
    """Store ``values`` on the job's row (committed) and on ``job``."""
    with Session(engine) as session:
        session.execute(update(BatchJob).where(col(BatchJob.id) == job.id).values(**values))
        session.commit()
    for name, value in values.items():
        setattr(job, name, value)
    return job


def _submit(
    engine: Engine, api: BatchApi, job: BatchJob, wanted: Mapping[str, BatchCall]
) -> BatchJob:
    """Steps 2 and 3 from wherever the job stands: upload (unless the provider has the
    file already), then create (unless a batch was made from the file already)."""
    if job.state == "intent":
        file_id = api.find_file(job.input_name)
        if file_id is None:
            calls = [wanted[k] for k in job.keys if k in wanted]
            if not calls:  # answered meanwhile (another command, a live run): none to send
                return _set(engine, job, state="abandoned", detail="no call left to send")
            if len(calls) < len(job.keys):
                _set(engine, job, keys=[c.key for c in calls], calls=len(calls))
            content = "".join(request_line(c.key, c.body) + "\n" for c in calls).encode()
            file_id = api.upload(job.input_name, content)
        job = _set(engine, job, state="uploaded", input_file_id=file_id, uploaded_at=utcnow())
    if job.state == "uploaded":
        assert job.input_file_id is not None
        since = _epoch(job.uploaded_at) - 3600 if job.uploaded_at else None
        batch = api.find_batch(job.input_file_id, since=since)
        if batch is None:
            batch = api.create(job.input_file_id, {"fairjudge_job": job.input_name})
        job = _set(
            engine,
            job,
            state="submitted",
            batch_id=batch.id,
            batch_status=batch.status,
            submitted_at=utcnow(),
        )
    return job


def _epoch(when: datetime) -> float:
    return when.timestamp()


def _poll(
    engine: Engine,
    api: BatchApi,
    jobs: list[BatchJob],
    wanted: Mapping[str, BatchCall],
    done: Collected,
    progress: Progress | None,
    options: BatchOptions,
    sleep: Callable[[float], None],
) -> None:
    """Step 4: look at each batch until it ends, collecting each as it does."""
    total = sum(job.calls for job in jobs)
    finished: dict[int, int] = {}
    running = list(jobs)
    while running:
        still = []
        for job in running:
            assert job.batch_id is not None and job.id is not None
            state = api.retrieve(job.batch_id)
            counts = {"total": state.total, "completed": state.completed, "failed": state.failed}
            if (state.status, counts) != (job.batch_status, job.request_counts):
                _set(engine, job, batch_status=state.status, request_counts=counts)
            if state.done:
                _collect(engine, api, job, state, wanted, done)
                finished[job.id] = job.calls
            else:
                finished[job.id] = min(job.calls, state.completed + state.failed)
                still.append(job)
        if progress is not None:
            progress(sum(finished.values()), total)
        running = still
        if running and not options.wait:
            for job in running:
                done.pending.update(job.keys)
                done.batches.append(_report(job))
            return
        if running:
            sleep(options.poll_s)


def _collect(
    engine: Engine,
    api: BatchApi,
    job: BatchJob,
    state: BatchState,
    wanted: Mapping[str, BatchCall],
    done: Collected,
) -> None:
    """Read an ended batch's output and error files; store its answers in the call cache and
    mark the job collected, in one transaction. A call with no line, or a line that cannot be
    read, is failed with why (the raw line kept); nothing is guessed."""
    keys = list(job.keys)
    logprobs = {k: bool(wanted[k].logprobs) if k in wanted else False for k in keys}
    results: dict[str, LineResult] = {}
    stray = 0
    for file_id in (state.error_file_id, state.output_file_id):  # an answer beats an error
        if file_id:
            read = read_lines(api.content(file_id), logprobs)
            results.update(read.results)
            stray += len(read.stray)
    answers: dict[str, Completion] = {}
    failed: dict[str, Failed] = {}
    ended = f"batch {state.id} ended {state.status}"
    if state.errors:
        ended += f" ({'; '.join(state.errors)[:500]})"
    for key in keys:
        result = results.get(key)
        if result is not None and result.completion is not None:
            answers[key] = result.completion
        elif result is not None:
            failed[key] = Failed(f"batch {state.id}: {result.failure}", result.raw)
        else:
            failed[key] = Failed(f"{ended} with no line for this call")
    detail = f"{len(answers)} answered, {len(failed)} without an answer"
    if stray:
        detail += f"; {stray} output line(s) named no call of this batch"
    _store(engine, job, answers, failed, detail)
    done.answered.update(answers)
    done.failed.update(failed)
    done.prompt_tokens += sum(c.prompt_tokens for c in answers.values())
    done.completion_tokens += sum(c.completion_tokens for c in answers.values())
    done.batches.append(_report(job))


def _store(
    engine: Engine,
    job: BatchJob,
    answers: Mapping[str, Completion],
    failed: Mapping[str, Failed],
    detail: str,
) -> None:
    now = utcnow()
    with engine.begin() as conn:
        have: set[str] = set()
        keys = list(answers)
        for start in range(0, len(keys), _IN_LIMIT):
            chunk = keys[start : start + _IN_LIMIT]
            have.update(
                conn.execute(
                    select(col(CallCache.key)).where(col(CallCache.key).in_(chunk))
                ).scalars()
            )
        rows = [_cache_row(k, job.model, c, now) for k, c in answers.items() if k not in have]
        if rows:
            conn.execute(insert(CallCache), rows)
        values = {
            "state": "collected",
            "answered": len(answers),
            "failures": {k: f.reason for k, f in failed.items()} or None,
            "detail": detail,
            "collected_at": now,
        }
        conn.execute(update(BatchJob).where(col(BatchJob.id) == job.id).values(**values))
    for name, value in values.items():
        setattr(job, name, value)


def _cache_row(key: str, model: str, done: Completion, now: datetime) -> CacheRow:
    return {
        "key": key,
        "model": model,
        "text": done.text,
        "finish_reason": done.finish_reason,
        "prompt_tokens": done.prompt_tokens,
        "cached_prompt_tokens": done.cached_prompt_tokens,
        "completion_tokens": done.completion_tokens,
        "latency_s": done.latency_s,
        "created_at": now,
        "logprobs": done.logprobs,
    }


def _report(job: BatchJob) -> BatchReport:
    assert job.id is not None
    status = job.batch_status or job.state
    return BatchReport(
        job.id,
        job.batch_id,
        status,
        job.calls,
        job.answered,
        len(job.failures or {}),
        job.detail,
    )


class BatchAnswers(ModelClient):
    """Stands in for a stage's model client while it stores what its batches brought back.

    Calls the batches answered are in the call cache, so ``cached_complete`` never gets
    here for them. A call a batch failed raises ``CallFailed`` with the batch's reason, and
    any other call too, unless ``live(key)`` allows it to go to the real client (repairs by
    default; failed calls when asked to retry them live)."""

    def __init__(
        self,
        client: ModelClient,
        failed: Mapping[str, Failed],
        *,
        live: Callable[[str], bool] = lambda key: False,
    ) -> None:
        # Not ModelClient.__init__: no second HTTP client; every real call goes to ``client``.
        self.name = client.name
        self.config = client.config
        self._live = client
        self._failed = failed
        self._allowed = live

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        temperature: float,
        max_tokens: int,
        schema: dict[str, Any] | None = None,
        seed: int | None = None,
        top_logprobs: int | None = None,
    ) -> Completion:
        key = call_key(
            self._live, messages, sample_index=seed or 0, temperature=temperature,
            max_tokens=max_tokens, schema=schema, top_logprobs=top_logprobs,
        )  # fmt: skip
        if self._allowed(key):
            return self._live.complete(
                messages, temperature=temperature, max_tokens=max_tokens, schema=schema,
                seed=seed, top_logprobs=top_logprobs,
            )  # fmt: skip
        failed = self._failed.get(key)
        if failed is not None:
            raise CallFailed(failed.reason, attempts=0)
        raise CallFailed("not sent: no batch answered this call", attempts=0)


def preload(engine: Engine, cache: CallCacheView, keys: Sequence[str]) -> None:
    """Read the cached rows of ``keys`` into ``cache`` in a few queries, so that a pass over
    a batch's answers finds them in memory instead of one query each."""
    table = CallCache.__table__  # type: ignore[attr-defined]
    with engine.connect() as conn:
        for start in range(0, len(keys), _IN_LIMIT):
            chunk = list(keys[start : start + _IN_LIMIT])
            for row in conn.execute(select(table).where(table.c.key.in_(chunk))).mappings():
                cache.remember(dict(row))


def failed_raw(failed: Mapping[str, Failed], keys: Iterable[str]) -> str | None:
    """The first raw output line kept for any of ``keys`` (a call whose line was
    unreadable), to store with the result it fails."""
    for key in keys:
        found = failed.get(key)
        if found is not None and found.raw is not None:
            return found.raw
    return None
