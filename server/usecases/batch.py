"""Runs through a provider's Batch API (``--batch`` of ``fairjudge judge``, ``generate`` and
``audit SUITE run``, or a request whose ``transport`` is ``batch``): the same run as a live
command, by the same runner, its calls sent as batches at the batch price (docs/judging.md,
"The Batch API"). A caller tunes a command with the request's ``transport``
(``server.usecases.transport``) or, as before, one ``BatchOptions`` value
(``judge.models.batch_options``, taken from here by the interfaces)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from judge.errors import InvalidInputError
from judge.models.batch_options import BatchOptions
from judge.progress import Progress
from server.usecases.audit_requests import AuditRequest
from server.usecases.context import make_client
from server.usecases.requests import GenerateRequest, JudgeRequest, Request, apply_overrides
from server.usecases.runs import generate_with, judge_with, run_status, typed
from server.usecases.transport import (
    JudgeTransport,
    Transport,
    call_transport,
    check_batch_endpoint,
)

__all__ = [
    "BatchOptions",
    "audit_batch",
    "batch_summary_lines",
    "check_batch_endpoint",
    "check_job_transport",
    "generate_batch",
    "judge_batch",
    "run_batch_summary_lines",
    "with_transport",
]

# The stages and the model client (openai) are imported inside the function, as in
# server/usecases/runs.py, so commands that only read the store start fast.
if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings
    from judge.grading.batch_calls import BatchJudgeResult
    from judge.models.transport import BatchRunResult, BatchTransport

R = TypeVar("R", bound=Request)


def with_transport(
    request: R, options: BatchOptions | None, repairs: Literal["live", "batch"] | None = None
) -> R:
    """``request`` sent through the Batch API: its own ``transport`` when that is batch, else
    one made of ``options`` (and ``repairs``, for a judge request); refused with a
    ``max_cost`` (a batch's cost is known only once it is done) or a ``poll_s`` not above 0,
    before anything is sent."""
    kind = JudgeTransport if isinstance(request, JudgeRequest) else Transport
    given = getattr(request, "transport", None)
    if given is None or not given.batch or options is not None or repairs is not None:
        chosen = options or BatchOptions()
        if chosen.poll_s <= 0:
            raise InvalidInputError(f"poll_s must be above 0, got {chosen.poll_s!r}")
        fields = {"mode": "batch", "retry_live": chosen.retry_live, "wait": chosen.wait,
                  "poll_s": chosen.poll_s}  # fmt: skip
        if kind is JudgeTransport:
            fields["repairs"] = repairs or "live"
        given = kind.model_validate(fields)
    return type(request).build(**{**dict(request), "transport": given})


def check_job_transport(settings: Settings, kind: str, params: dict[str, Any]) -> None:
    """Refuse, before it is queued, a job through the Batch API that could not run so: on
    the Celery workers (a job that waits for its batches off the slots runs on the server's
    own worker), or on an endpoint not set up for it (``check_batch_endpoint``)."""
    from server.usecases.jobs import job_request

    transport = params.get("transport")
    if not (isinstance(transport, dict) and transport.get("mode") == "batch"):
        return
    if settings.workers.broker_url:
        raise InvalidInputError(
            "transport: a job through the Batch API runs on the server's own worker, not on "
            "the Celery workers ([workers] broker_url); run it with `fairjudge judge --batch` "
            "(or generate, audit SUITE run), or queue it live"
        )
    request = job_request(kind, params)
    chosen = apply_overrides(settings, request)
    endpoint = getattr(request, "endpoint", None)
    if kind == "judge":
        endpoint = chosen.judge.endpoint
    elif kind == "generate":
        endpoint = chosen.generation.endpoint
    check_batch_endpoint(settings, endpoint or settings.generation.endpoint)


def _account(transport: object) -> BatchTransport:
    from judge.models.transport import BatchTransport

    assert isinstance(transport, BatchTransport)
    return transport


def judge_batch(
    engine: Engine,
    settings: Settings,
    request: JudgeRequest,
    *,
    repairs: Literal["live", "batch"] | None = None,
    options: BatchOptions | None = None,
    progress: Progress | None = None,
    on_run: Callable[[int], None] | None = None,
) -> BatchJudgeResult:
    """Judge a generation run's answers with the judge calls sent through the judge
    endpoint's Batch API (resumes the judge run with the same settings, and any batch an
    earlier command left running). ``request``: as for ``runs.judge`` (``max_cost`` is
    refused: a batch's cost is known only once it is done). ``repairs``: unreadable replies
    get their repair call "live" (the default) or in a follow-up "batch". ``options``: how
    the Batch API is used (``BatchOptions``: whether calls a batch did not answer go live in
    the same command, whether to wait for the batches, how often to look at them; a
    ``poll_s`` not above 0 is refused); both default to the request's ``transport``.
    ``progress`` hears (finished, total) calls of the running batches."""
    from judge.costs import Prices
    from judge.grading.batch_calls import judge_result

    typed(request, JudgeRequest)
    request = with_transport(request, options, repairs)
    summary, settings, transport = judge_with(
        engine, settings, request, progress=progress, on_run=on_run
    )
    status, detail = run_status(engine, "judge", summary.run_id)
    prices = Prices.of(settings.endpoint(settings.judge.endpoint))
    return judge_result(
        engine, summary, _account(transport), prices=prices, status=status, status_detail=detail
    )


def generate_batch(
    engine: Engine,
    settings: Settings,
    request: GenerateRequest,
    *,
    options: BatchOptions | None = None,
    progress: Progress | None = None,
    on_run: Callable[[int], None] | None = None,
) -> BatchRunResult:
    """Ask the model under test for a dataset's answers with the calls sent through its
    endpoint's Batch API (resumes the generation run with the same settings, and any batch
    an earlier command left running). ``request``: as for ``runs.generate``; ``max_cost``
    is refused. ``options`` and ``progress``: as for
    ``judge_batch``."""
    from judge.answers.collect import KIND, failed_answers
    from judge.costs import Prices

    typed(request, GenerateRequest)
    request = with_transport(request, options)
    summary, settings, transport = generate_with(
        engine, settings, request, progress=progress, on_run=on_run
    )
    status, detail = run_status(engine, "generation", summary.run_id)
    return _account(transport).result(
        KIND, summary, missing=failed_answers(engine, summary.run_id),
        prices=Prices.of(settings.endpoint(settings.generation.endpoint)), status=status,
        detail=detail,
    )  # fmt: skip


def audit_batch(
    engine: Engine,
    settings: Settings,
    request: AuditRequest,
    *,
    options: BatchOptions | None = None,
    progress: Progress | None = None,
    on_run: Callable[[int], None] | None = None,
) -> BatchRunResult:
    """Send an audit suite's design to the model under test with the calls sent through its
    endpoint's Batch API (resumes the audit run with the same settings and any batch an
    earlier command left running); the award audit's follow-ups go in a second batch once
    the first answers are in. ``request``: as for ``audits.audit`` (an ``AuditRunRequest``
    may add input files and ``new``); ``max_cost`` is refused. ``options`` and
    ``progress``: as for ``judge_batch``."""
    from judge.audits import runner
    from judge.audits.suites import make_suite
    from judge.costs import Prices
    from judge.runs import RunSummary
    from server.usecases.audits import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, design_inputs

    request = with_transport(request, options)
    files, new = design_inputs(settings, request)
    name = request.endpoint or settings.generation.endpoint
    transport = _account(call_transport(settings, name, request.transport))
    suite = make_suite(request.suite, **{**request.options, **files})
    done = runner.run_audit(
        engine,
        make_client(settings, name),
        suite,
        temperature=DEFAULT_TEMPERATURE if request.temperature is None else request.temperature,
        max_tokens=request.max_tokens or DEFAULT_MAX_TOKENS[suite.name],
        limit=request.limit,
        new=new,
        progress=progress,
        on_run=on_run,
        max_unusable=settings.runs.max_unusable_share,
        transport=transport,
    )
    turns = [done.main, *([done.followup] if done.followup is not None else [])]
    flags: dict[str, int] = {}
    for turn in turns:
        for flag, n in turn.flags.items():
            flags[flag] = flags.get(flag, 0) + n
    summary = RunSummary(done.run_id, sum(t.tasks for t in turns), 0, 0, 0, flags)
    status, detail = _audit_status(engine, done.run_id)
    return transport.result(
        runner.KIND, summary, missing=runner.failed_calls(engine, done.run_id),
        prices=Prices.of(settings.endpoint(name)), status=status, detail=detail,
    )  # fmt: skip


def _audit_status(engine: Engine, run_id: int) -> tuple[str, str | None]:
    from judge.audits.runner import get_run
    from judge.store.engine import session_scope

    with session_scope(engine) as session:
        run = get_run(session, run_id)
        return str(run.status), run.status_detail


def batch_summary_lines(
    result: BatchJudgeResult, *, shown: int = 10, status: bool = True
) -> list[str]:
    """Lines for people about a ``--batch`` judge command: the batches, the judgments, the
    calls left without an answer (the first ``shown``), the cost, and (``status``) the
    run's status line."""
    missing = [f"{m.item} {m.rubric} sample {m.sample_index}: {m.reason}" for m in result.missing]
    return _summary_lines(
        result, "judge", result.summary.tasks, result.summary.flags, missing,
        shown=shown, status=status,
    )  # fmt: skip


def run_batch_summary_lines(
    result: BatchRunResult, *, shown: int = 10, status: bool = True
) -> list[str]:
    """Lines for people about a ``--batch`` generation or audit command: the batches, the
    rows stored, the calls left without an answer (the first ``shown``), the cost, and
    (``status``) the run's status line."""
    missing = [f"{m.text()}: {m.reason}" for m in result.missing]
    return _summary_lines(
        result, result.kind, result.tasks, result.flags, missing, shown=shown, status=status
    )


def _summary_lines(
    result: BatchJudgeResult | BatchRunResult,
    kind: str,
    tasks: int,
    flags: dict[str, int],
    missing: list[str],
    *,
    shown: int,
    status: bool,
) -> list[str]:
    """The lines both commands print: ``missing`` says each call left without an answer."""
    lines = [
        f"batch {b.batch_id or '(not created)'}: {b.status}, {b.calls:,} calls, "
        f"{b.answered:,} answered, {b.failed:,} without an answer"
        for b in result.batches
    ]
    stored = ", ".join(f"{n:,} {flag}" for flag, n in sorted(flags.items()))
    lines.append(
        f"{kind} run {result.run_id}: {tasks:,} to do; {stored or 'nothing new'}; "
        f"{result.live_calls:,} live calls"
    )
    lines.extend(f"  no answer: {text}" for text in missing[:shown])
    if len(missing) > shown:
        lines.append(f"  ... and {len(missing) - shown:,} more")
    if result.cost is not None:
        lines.append(f"cost: {result.cost:.6f} ({result.cost_note()})")
    if status and result.status_detail:
        lines.append(f"run {result.status}: {result.status_detail}")
    return lines
