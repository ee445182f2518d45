"""One path for every stage that calls a model under a request (``generate``, ``judge`` and
``audit SUITE run``): the request is built from the options (a bad value blamed on its
option), then run as it says (``dry_run``; ``transport``: live or the Batch API) or queued
(``--queue``: where it runs is the command's choice, not the request's). A ``Stage`` says
what differs: the request and job kind, the use cases, how a plan is printed and what is
shown after a pass. The --batch options and their checks live here too."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

from judge.errors import ConfigError, IncompleteError, InvalidInputError
from judge.vocab import RunStatus
from server.cli.output import cost_line, emit, err, out, print_lines, progress_bar

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings
    from server.cli import Context
    from server.usecases.requests import Request
    from server.usecases.transport import Transport

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R", bound="Request")


def batch_options(*, repairs: bool = False) -> Callable[[F], F]:
    """The options of a run that may go through the Batch API (``--batch`` and what tunes
    it), and ``--queue``; ``repairs``: also ``--batch-repairs`` (judging only)."""
    options = [
        click.option(
            "--batch",
            is_flag=True,
            help="Send the calls through the endpoint's Batch API (`batch = true` in its "
            "config), at the batch price. The command waits for the batch (the provider has "
            "24 h to answer); interrupted and run again, it takes up the same batch "
            '(docs/judging.md, "The Batch API").',
        ),
        *(
            [
                click.option(
                    "--batch-repairs",
                    type=click.Choice(["live", "batch"]),
                    help="With --batch: an unreadable reply's repair call goes live at once "
                    "(live, the default) or in a second batch (batch: no live price, two "
                    "waits).",
                )
            ]
            if repairs
            else []
        ),
        click.option(
            "--retry-live",
            is_flag=True,
            help="With --batch: send the calls a batch did not answer live in the same "
            "command (else they are listed, and the next --batch command sends them in a new "
            "batch).",
        ),
        click.option(
            "--no-wait",
            is_flag=True,
            help="With --batch: submit the batch (or look at one running) and return; run "
            "the same command again to collect it. Exits 0 while batches run.",
        ),
        click.option(
            "--poll-every",
            type=click.FloatRange(min=0, min_open=True),
            metavar="SECONDS",
            help="With --batch: seconds between two looks at a running batch (default 30).",
        ),
        click.option(
            "--queue",
            is_flag=True,
            help="Queue the same request as a job instead of running it here: the Celery "
            "workers run it when [workers] broker_url is set, else the server's own worker "
            "(`fairjudge serve`); with --batch always the server's own worker, which waits for "
            "the batches without holding a slot. Prints the job's id; follow it with "
            "`fairjudge jobs show ID`.",
        ),
    ]

    def decorate(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def check_batch_use(options: dict[str, Any], *, dry_run: bool, max_cost: float | None) -> None:
    """Refuse, as usage errors, options that contradict each other: the --batch tuning
    options without --batch, --max-cost with --batch, --queue with --dry-run. --queue with
    --batch queues a job whose calls go through the Batch API (the server's own worker runs
    it and waits for its batches off the slots, as a job from the API or the dashboard)."""
    if options.get("queue") and dry_run:
        raise click.UsageError(
            "--queue cannot be used with --dry-run: a job always runs; drop --dry-run, or "
            "run it here without --queue"
        )
    if options.get("batch"):
        if max_cost is not None:
            raise click.UsageError(
                "--max-cost cannot be used with --batch: a batch's cost is known only once it "
                "is done. Estimate it first with --dry-run --batch, or run live with --max-cost"
            )
        return
    tuning = {
        "--batch-repairs": options.get("batch_repairs") is not None,
        "--retry-live": bool(options.get("retry_live")),
        "--no-wait": bool(options.get("no_wait")),
        "--poll-every": options.get("poll_every") is not None,
    }
    given = [name for name, set_ in tuning.items() if set_]
    if given:
        raise click.UsageError(f"{', '.join(given)} only apply with --batch")


def chosen_transport(options: dict[str, Any], *, judge: bool = False) -> Transport | None:
    """The request's ``transport`` that --batch and its tuning options ask for
    (``--retry-live``, ``--no-wait``, ``--poll-every``; ``judge``: ``--batch-repairs`` too);
    None without --batch (live). An option not given keeps its default."""
    from server.usecases.transport import JudgeTransport, Transport

    if not options.get("batch"):
        return None
    fields: dict[str, Any] = {
        "mode": "batch",
        "retry_live": bool(options.get("retry_live")),
        "wait": not options.get("no_wait"),
    }
    if options.get("poll_every") is not None:
        fields["poll_s"] = options["poll_every"]
    if judge and options.get("batch_repairs"):
        fields["repairs"] = options["batch_repairs"]
    return (JudgeTransport if judge else Transport).model_validate(fields)


def is_batch(request: Any) -> bool:
    """Whether the request's calls go through the Batch API."""
    transport = getattr(request, "transport", None)
    return transport is not None and transport.batch


def queue_request(
    ctx: Context, settings: Settings, kind: str, request: Request, as_json: bool
) -> None:
    """Queue ``request`` as a job of ``kind`` (the parameters ``POST /api/v1/jobs`` would
    store: ``request.to_params()``) and say how to follow it. A field a job may not carry
    (``--new``, input files) is a usage error, never dropped unsaid."""
    from server.jobs.queue import submit, uses_celery

    problems = request.job_problems()
    if problems:
        raise click.UsageError("--queue cannot carry " + "; ".join(problems))
    job = submit(
        ctx.engine(settings), kind, request.to_params(), created_by="cli", settings=settings
    )
    # a job through the Batch API runs on the server's worker (Celery is refused by submit)
    runs_on = "celery" if uses_celery(settings) and not is_batch(request) else "server"
    where = (
        "the Celery workers ([workers] broker_url) run it"
        if runs_on == "celery"
        else "the server's worker runs it (`fairjudge serve`)"
    )

    def render(_: Any) -> None:
        err().print(
            f"job {job.id} queued ({kind}); {where}; follow it with `fairjudge jobs show {job.id}`",
            highlight=False,
        )
        out().print(str(job.id), highlight=False)

    data = {"id": job.id, "kind": kind, "status": job.status, "params": job.params}
    emit({**data, "runs_on": runs_on}, as_json, render)


def check_batch_run(
    kind: str,
    run_id: int,
    status: str,
    detail: str | None,
    *,
    waiting_only: bool,
    allow_failures: bool,
    as_json: bool,
) -> None:
    """After a --batch command: a run left incomplete only because batches still run
    (``waiting_only``: --no-wait) gets its status line as a note; otherwise as
    ``_check_complete``: IncompleteError (exit 3) unless --allow-failures."""
    from rich.text import Text

    if status not in (RunStatus.INCOMPLETE, RunStatus.UNUSABLE):
        return
    console = err() if as_json else out()
    if waiting_only:
        console.print(Text(f"note: {kind} run {run_id}: {detail}"), soft_wrap=True)
        return
    line = f"{kind} run {run_id} is {status}: {detail}"
    if not allow_failures:
        raise IncompleteError(f"{line} (--allow-failures exits 0 anyway)")
    console.print(Text(line), soft_wrap=True)


@dataclass(frozen=True)
class StageCalls:
    """A stage's use cases, imported when the command runs (not when the CLI loads)."""

    dry_run: Callable[..., dict[str, Any]]
    live: Callable[..., Any]
    batch: Callable[..., Any]
    batch_lines: Callable[..., list[str]]


@dataclass(frozen=True)
class Stage:
    """What ``generate`` and ``judge`` do differently on their one path (``_run_stage``): the
    request and job kind, the run kind and its default endpoint, the use cases, and how a
    dry run's plan is printed."""

    job: str
    run_kind: str
    verb: str
    request: Callable[[], type[Request]]
    calls: Callable[[], StageCalls]
    default_endpoint: Callable[[Settings], str]
    print_plan: Callable[[dict[str, Any], bool], None]
    note_finished: bool = False
    show: Callable[[int, dict[str, Any], bool], None] | None = None
    """What to print after a pass instead of its summary (an audit's figures): given the run
    id, the pass's account under its key (``pass``, or ``batch``) and ``as_json``."""


def run_stage(
    ctx: Context,
    stage: Stage,
    fields: dict[str, Any],
    batching: dict[str, Any],
    allow_failures: bool,
    as_json: bool,
) -> None:
    """Build the stage's request and run it as it says (``dry_run``, ``transport``), or queue
    it (``--queue``: where it runs is the command's choice, not the request's)."""
    check_batch_use(batching, dry_run=fields["dry_run"], max_cost=fields["max_cost"])
    kind = stage.request()
    settings, request = request_and_settings(ctx, kind, fields)
    dry_run: bool = getattr(request, "dry_run", False)
    mode = "dry_run" if dry_run else "batch" if is_batch(request) else "live"
    with blamed_on_options(ctx, kind, fields):
        if batching["queue"]:
            queue_request(ctx, settings, stage.job, request, as_json)
        else:
            run = {"dry_run": _dry_run, "batch": _batch, "live": _live}[mode]
            run(stage, ctx.engine(settings), settings, request, allow_failures, as_json)


def request_and_settings(ctx: Context, kind: type[R], fields: dict[str, Any]) -> tuple[Settings, R]:
    """The config as its file gives it, and the request the options ask for. The request's
    settings overrides are applied once, where it runs (``apply_overrides``, by the use case
    or the job), never here; a bad value is still blamed on its option (see
    ``blamed_on_options``)."""
    settings = ctx.settings()
    with blamed_on_options(ctx, kind, fields):
        request = kind.build(**fields)
    return settings, request


@contextmanager
def blamed_on_options(ctx: Context, kind: type[Request], fields: dict[str, Any]) -> Iterator[None]:
    """Where bad input stops a command, the config is loaded with the options' overrides:
    if they are at fault, that raises the message that names the option and its value
    (``--temperature 5: must be <= 2``, ``--endpoint nope: ... is not defined``); otherwise
    the first error stands. Nothing is loaded twice when the input is good."""
    try:
        yield
    except (InvalidInputError, ConfigError):
        ctx.settings(**kind.overrides_of(fields))
        raise


def _dry_run(
    stage: Stage,
    engine: Engine,
    settings: Settings,
    request: Any,
    allow_failures: bool,
    as_json: bool,
) -> None:
    from server.usecases.batch import check_batch_endpoint

    batch = is_batch(request)
    if batch:  # refused now, as the run would be
        check_batch_endpoint(settings, request.endpoint or stage.default_endpoint(settings))
    plan = _applies(stage.calls().dry_run(engine, settings, request), batch)
    emit(plan, as_json, lambda p: stage.print_plan(p, batch))


def _live(
    stage: Stage,
    engine: Engine,
    settings: Settings,
    request: Any,
    allow_failures: bool,
    as_json: bool,
) -> None:
    from server.usecases.runs import run_cost, summary_line

    with progress_bar(stage.verb, as_json) as bar:
        summary = stage.calls().live(engine, settings, request, progress=bar)
    if stage.show is not None:
        stage.show(summary.run_id, {"pass": summary.to_dict()}, as_json)
        check_complete(engine, stage.run_kind, summary.run_id, allow_failures, as_json)
        return
    cost = run_cost(engine, settings, stage.run_kind, summary.run_id)
    emit(
        {**asdict(summary), "cost": cost},
        as_json,
        lambda _: print_lines([summary_line(stage.run_kind, summary), cost_line(cost)]),
    )
    if stage.note_finished:
        _note_finished(engine, summary.run_id, as_json)
    check_complete(engine, stage.run_kind, summary.run_id, allow_failures, as_json)


def _batch(
    stage: Stage,
    engine: Engine,
    settings: Settings,
    request: Any,
    allow_failures: bool,
    as_json: bool,
) -> None:
    calls = stage.calls()
    with progress_bar(f"{stage.verb} batch" if stage.show else "batch", as_json) as bar:
        result = calls.batch(engine, settings, request, progress=bar)
    lines = calls.batch_lines(result, status=False)
    if stage.show is not None:  # the batch's lines for people on stderr: stdout is the figures
        if not as_json:
            for line in lines:
                err().print(line, markup=False, highlight=False, soft_wrap=True)
        stage.show(result.run_id, {"batch": result.to_json()}, as_json)
    else:
        emit(result.to_json(), as_json, lambda _: print_lines(lines))
    if stage.note_finished:
        _note_finished(engine, result.run_id, as_json)
    check_batch_run(
        stage.run_kind, result.run_id, result.status, result.status_detail,
        waiting_only=bool(result.pending) and not result.missing,
        allow_failures=allow_failures, as_json=as_json,
    )  # fmt: skip


def _applies(plan: dict[str, Any], batch: bool) -> dict[str, Any]:
    """A dry run's plan, saying which price the command would pay when it is --batch."""
    return {**plan, "applies": "batch"} if batch else plan


def _note_finished(engine: Engine, run_id: int, as_json: bool) -> None:
    """Print a finished generation run's status line (the items it left out), if any."""
    from rich.text import Text

    from server.usecases import run_status

    status, detail = run_status(engine, "generation", run_id)
    if status == RunStatus.FINISHED and detail:
        (err() if as_json else out()).print(Text(f"note: {detail}"), soft_wrap=True)


def check_complete(
    engine: Engine, kind: str, run_id: int, allow_failures: bool, as_json: bool
) -> None:
    """Raise ``IncompleteError`` (exit 3) for a run left incomplete or unusable (mostly
    unscored or failed: ``[runs] max_unusable_share``), or with ``allow_failures`` print
    its status line (on stderr with --json, so that stdout stays one JSON document)."""
    from rich.text import Text

    from server.usecases import run_status

    status, detail = run_status(engine, kind, run_id)
    if status not in (RunStatus.INCOMPLETE, RunStatus.UNUSABLE):
        return
    line = f"{kind} run {run_id} is {status}: {detail}"
    if not allow_failures:
        raise IncompleteError(f"{line} (--allow-failures exits 0 anyway)")
    (err() if as_json else out()).print(Text(line), soft_wrap=True)
