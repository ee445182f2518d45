"""Runs through a provider's Batch API (``--batch`` of ``fairjudge judge``, ``generate`` and
``audit SUITE run``): the same run as a live command, its calls sent as batches at the batch
price (docs/judging.md, "The Batch API"). A caller tunes a command with one ``BatchOptions``
value (``judge.models.batch_options``, taken from here by the interfaces)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from judge.errors import ConfigError, InvalidInputError
from judge.models.batch_options import BatchOptions
from judge.progress import Progress
from server.usecases.context import make_client
from server.usecases.requests import AuditRequest, GenerateRequest, JudgeRequest, apply_overrides
from server.usecases.rubrics import rubrics

# The stages and the model client (openai) are imported inside the function, as in
# server/usecases/runs.py, so commands that only read the store start fast.
if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings
    from judge.grading.batched import BatchJudgeResult
    from judge.models.batch_pass import BatchRunResult


def check_batch_endpoint(settings: Settings, endpoint: str) -> None:
    """Refuse, in one line naming the setting, an endpoint not marked as offering the Batch
    API."""
    if not settings.endpoint(endpoint).batch:
        raise ConfigError(
            f"endpoint {endpoint!r} is not set up for the Batch API: set `batch = true` under "
            f"[endpoints.{endpoint}] in the config (only for a provider that serves /v1/files "
            "and /v1/batches), or judge without --batch"
        )


def _check_request(max_cost: float | None, options: BatchOptions, command: str) -> None:
    if max_cost is not None:
        raise InvalidInputError(
            "--max-cost cannot be used with --batch (a batch's cost is known only when it "
            f"is done); estimate it with --dry-run --batch, or {command} live"
        )
    if options.poll_s <= 0:
        raise InvalidInputError(f"poll_s must be above 0, got {options.poll_s!r}")


def judge_batch(
    engine: Engine,
    settings: Settings,
    request: JudgeRequest | int,
    *,
    rubric_set: str | None = None,
    swap_order: bool = False,
    repairs: Literal["live", "batch"] = "live",
    options: BatchOptions = BatchOptions(),
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
    ``poll_s`` not above 0 is refused). ``progress`` hears (finished, total) calls of the
    running batches."""
    from judge.costs import Prices
    from judge.grading import batched
    from judge.models.batch import BatchApi
    from judge.prompts import PromptBook
    from judge.store.engine import session_scope
    from judge.store.queries import get_generation_run

    if isinstance(request, int):
        request = JudgeRequest.build(
            generation_run_id=request, rubric_set=rubric_set, swap_order=swap_order
        )
    _check_request(request.max_cost, options, "judge")
    settings = apply_overrides(settings, request)
    name = settings.judge.endpoint
    check_batch_endpoint(settings, name)
    with session_scope(engine) as session:
        get_generation_run(session, request.generation_run_id)  # missing: fails before a call
        chosen = rubrics(settings, session, rubric_set=request.rubric_set)
    endpoint = settings.endpoint(name)
    return batched.judge_batch(
        engine,
        make_client(settings, name),
        BatchApi(name, endpoint),
        PromptBook(settings.prompts_path()),
        chosen,
        settings.judge,
        request.generation_run_id,
        swap_order=bool(request.swap_order),
        repairs=repairs,
        options=options,
        prices=Prices.of(endpoint),
        progress=progress,
        on_run=on_run,
        max_unusable=settings.runs.max_unusable_share,
    )


def generate_batch(
    engine: Engine,
    settings: Settings,
    request: GenerateRequest | str,
    *,
    options: BatchOptions = BatchOptions(),
    progress: Progress | None = None,
    on_run: Callable[[int], None] | None = None,
) -> BatchRunResult:
    """Ask the model under test for a dataset's answers with the calls sent through its
    endpoint's Batch API (resumes the generation run with the same settings, and any batch
    an earlier command left running). ``request``: as for ``runs.generate`` (or only the
    dataset's name); ``max_cost`` is refused. ``options`` and ``progress``: as for
    ``judge_batch``."""
    from judge.answers import batched
    from judge.costs import Prices
    from judge.models.batch import BatchApi
    from judge.prompts import PromptBook
    from judge.store.engine import session_scope
    from judge.store.queries import get_dataset

    if isinstance(request, str):
        request = GenerateRequest.build(dataset=request)
    _check_request(request.max_cost, options, "generate")
    settings = apply_overrides(settings, request)
    cfg = settings.generation
    check_batch_endpoint(settings, cfg.endpoint)
    with session_scope(engine) as session:
        get_dataset(session, request.dataset)  # missing: fails before a call
    endpoint = settings.endpoint(cfg.endpoint)
    return batched.generate_batch(
        engine,
        make_client(settings, cfg.endpoint),
        BatchApi(cfg.endpoint, endpoint),
        PromptBook(settings.prompts_path()),
        request.dataset,
        temperature=cfg.temperature,
        max_tokens=cfg.max_tokens,
        limit=request.limit,
        accepted_only=request.accepted_only,
        include_drafts=request.include_drafts,
        new=request.new,
        options=options,
        prices=Prices.of(endpoint),
        progress=progress,
        on_run=on_run,
        max_unusable=settings.runs.max_unusable_share,
    )


def audit_batch(
    engine: Engine,
    settings: Settings,
    request: AuditRequest,
    *,
    options: BatchOptions = BatchOptions(),
    progress: Progress | None = None,
    on_run: Callable[[int], None] | None = None,
) -> BatchRunResult:
    """Send an audit suite's design to the model under test with the calls sent through its
    endpoint's Batch API (resumes the audit run with the same settings and any batch an
    earlier command left running); the award audit's follow-ups go in a second batch once
    the first answers are in. ``request``: as for ``audits.audit`` (an ``AuditRunRequest``
    may add input files and ``new``); ``max_cost`` is refused. ``options`` and
    ``progress``: as for ``judge_batch``."""
    from judge.audits import batched
    from judge.audits.suites import make_suite
    from judge.costs import Prices
    from judge.models.batch import BatchApi
    from server.usecases.audits import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, AuditRunRequest

    _check_request(request.max_cost, options, "audit")
    files: dict[str, str] = {}
    new = False
    if isinstance(request, AuditRunRequest):
        files, new = request.inputs.of(request.suite), request.new
    name = request.endpoint or settings.generation.endpoint
    check_batch_endpoint(settings, name)
    suite = make_suite(request.suite, **{**request.options, **files})
    endpoint = settings.endpoint(name)
    return batched.run_audit_batch(
        engine,
        make_client(settings, name),
        BatchApi(name, endpoint),
        suite,
        temperature=DEFAULT_TEMPERATURE if request.temperature is None else request.temperature,
        max_tokens=request.max_tokens or DEFAULT_MAX_TOKENS[suite.name],
        limit=request.limit,
        new=new,
        options=options,
        prices=Prices.of(endpoint),
        progress=progress,
        on_run=on_run,
        max_unusable=settings.runs.max_unusable_share,
    )


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
