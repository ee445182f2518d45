"""``fairjudge generate``, ``judge`` and ``runs``: the model under test's answers, the judge's
scores, and the list of both kinds of run. Both runs resume when asked again.

A run left with answers or judgments missing (calls that failed for good) makes ``generate``
and ``judge`` fail with ``IncompleteError`` (exit code 3) after printing their summary, unless
``--allow-failures`` is given; then the run's status line is printed and the exit code is 0.

The request says how it runs (``dry_run``; ``transport``: ``--batch`` and its tuning);
``--queue`` (shared with ``audit SUITE run``) hands it to the job queue instead."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

from judge.errors import ConfigError, IncompleteError, InvalidInputError
from judge.vocab import RunStatus
from server.cli.output import (
    ROW_ID,
    cost_line,
    dry_run_option,
    emit,
    err,
    estimate_lines,
    json_option,
    max_cost_option,
    out,
    print_lines,
    progress_bar,
    table,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings
    from server.cli import Context
    from server.usecases.requests import Request
    from server.usecases.transport import Transport

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R", bound="Request")

allow_failures_option = click.option(
    "--allow-failures",
    is_flag=True,
    help="Exit 0 even if answers or judgments are missing (the run's status line is printed).",
)


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


def _run_stage(
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


@click.command()
@click.argument("dataset_name", metavar="DATASET")
@click.option("--endpoint", help="Endpoint under test (default: [generation] endpoint).")
@click.option("--temperature", type=float)
@click.option("--max-tokens", type=int)
@click.option("--limit", type=click.IntRange(min=1), help="Only the first N items.")
@click.option(
    "--accepted-only",
    is_flag=True,
    help="Only items an expert review accepted (see `campaign review`).",
)
@click.option(
    "--include-drafts",
    is_flag=True,
    help="Also ask generated items still waiting for review (drafts; by default they are "
    "left out). Rejected items are never asked.",
)
@click.option("--new", is_flag=True, help="Start a new run even if one with these settings exists.")
@max_cost_option
@dry_run_option
@batch_options()
@allow_failures_option
@json_option
@click.pass_obj
def generate(
    ctx: Context,
    dataset_name: str,
    endpoint: str | None,
    temperature: float | None,
    max_tokens: int | None,
    limit: int | None,
    accepted_only: bool,
    include_drafts: bool,
    new: bool,
    max_cost: float | None,
    dry_run: bool,
    allow_failures: bool,
    as_json: bool,
    **batching: Any,
) -> None:
    """Send DATASET's items to the model under test and store the answers (resumable).
    Drafts and rejected items are left out (see docs/datasets.md); the run's status line
    says how many. --batch sends them through the Batch API; --queue queues them as a
    job."""
    fields = {
        "dataset": dataset_name, "endpoint": endpoint, "temperature": temperature,
        "max_tokens": max_tokens, "limit": limit, "accepted_only": accepted_only,
        "include_drafts": include_drafts, "new": new, "max_cost": max_cost, "dry_run": dry_run,
        "transport": chosen_transport(batching),
    }  # fmt: skip
    _run_stage(ctx, GENERATE, fields, batching, allow_failures, as_json)


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
    cost = run_cost(engine, settings, stage.run_kind, summary.run_id)
    emit(
        {**asdict(summary), "cost": cost},
        as_json,
        lambda _: print_lines([summary_line(stage.run_kind, summary), cost_line(cost)]),
    )
    if stage.note_finished:
        _note_finished(engine, summary.run_id, as_json)
    _check_complete(engine, stage.run_kind, summary.run_id, allow_failures, as_json)


def _batch(
    stage: Stage,
    engine: Engine,
    settings: Settings,
    request: Any,
    allow_failures: bool,
    as_json: bool,
) -> None:
    calls = stage.calls()
    with progress_bar("batch", as_json) as bar:
        result = calls.batch(engine, settings, request, progress=bar)
    emit(result.to_json(), as_json, lambda _: print_lines(calls.batch_lines(result, status=False)))
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


@click.command("judge")
@click.argument("run_id", type=ROW_ID, metavar="GENERATION_RUN")
@click.option("--endpoint", help="Judge endpoint (default: [judge] endpoint).")
@click.option("--prompt-variant", type=click.Choice(["plain", "cot"]))
@click.option("--temperature", type=float)
@click.option("--samples", type=int, help="Judge calls per item and rubric.")
@click.option(
    "--aggregation",
    type=click.Choice(["mean", "majority", "logprob"]),
    help="How samples combine; logprob also stores each score level's probability and the "
    "expected score (the endpoint must return log-probabilities).",
)
@click.option(
    "--rubrics",
    "rubric_set",
    metavar="NAME[,NAME...]",
    help="Rubrics to apply: registered (see `rubrics add`) or built-in names, comma-separated "
    "(default: fairmonitor, the built-in set). Another set is another judge run.",
)
@click.option(
    "--swap-order",
    is_flag=True,
    help="Judge every pair (TCS, PCS, ETCS, SBAS) in both orders, to measure order bias; "
    "item scores then combine both orders. Another judge run.",
)
@max_cost_option
@dry_run_option
@batch_options(repairs=True)
@allow_failures_option
@json_option
@click.pass_obj
def judge(
    ctx: Context,
    run_id: int,
    endpoint: str | None,
    prompt_variant: str | None,
    temperature: float | None,
    samples: int | None,
    aggregation: str | None,
    rubric_set: str | None,
    swap_order: bool,
    max_cost: float | None,
    dry_run: bool,
    allow_failures: bool,
    as_json: bool,
    **batching: Any,
) -> None:
    """Score a generation run's answers with the FairMonitor rubrics, or with --rubrics
    (resumable). --batch sends the judge calls through the Batch API; --queue queues the
    request as a job."""
    fields = {
        "generation_run_id": run_id, "endpoint": endpoint, "prompt_variant": prompt_variant,
        "temperature": temperature, "samples": samples, "aggregation": aggregation,
        "rubric_set": rubric_set, "swap_order": swap_order or None, "max_cost": max_cost,
        "dry_run": dry_run, "transport": chosen_transport(batching, judge=True),
    }  # fmt: skip
    _run_stage(ctx, JUDGE, fields, batching, allow_failures, as_json)


def _print_plan(plan: dict[str, Any], *, batch: bool = False) -> None:
    repairs = "repairs of unreadable replies come on top"
    if batch:
        repairs += ": live by default, in a second batch with --batch-repairs batch"
    print_lines(
        [
            f"judge run: {plan['judge_run_id'] or 'new'} ({plan['endpoint']}, {plan['model']})",
            f"judgments to make: {plan['judgments_to_make']:,} ({plan['missing_answers']:,} "
            f"without an answer, {plan['cached_calls']:,} answered by the cache)",
            f"calls to send: {plan['calls_to_send']:,} ({repairs})",
            *estimate_lines(plan["estimate"], batch=batch),
        ]
    )


def _print_answers_plan(plan: dict[str, Any], *, batch: bool = False) -> None:
    print_lines(
        [
            f"generation run: {plan['generation_run_id'] or 'new'} ({plan['endpoint']}, "
            f"{plan['model']}) on dataset {plan['dataset']}",
            f"answers to ask: {plan['answers_to_ask']:,} ({plan['cached_calls']:,} answered by "
            "the cache)",
            f"calls to send: {plan['calls_to_send']:,}",
            *estimate_lines(plan["estimate"], batch=batch),
            *([f"note: {plan['left_out']}"] if plan["left_out"] else []),
        ]
    )


def _check_complete(
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


def _generate_request() -> type[Request]:
    from server.usecases.requests import GenerateRequest

    return GenerateRequest


def _judge_request() -> type[Request]:
    from server.usecases.requests import JudgeRequest

    return JudgeRequest


def _generate_calls() -> StageCalls:
    from server.usecases.batch import generate_batch, run_batch_summary_lines
    from server.usecases.runs import generate, generate_dry_run

    return StageCalls(generate_dry_run, generate, generate_batch, run_batch_summary_lines)


def _judge_calls() -> StageCalls:
    from server.usecases.batch import batch_summary_lines, judge_batch
    from server.usecases.runs import judge, judge_dry_run

    return StageCalls(judge_dry_run, judge, judge_batch, batch_summary_lines)


GENERATE = Stage(
    "generate", "generation", "generating", _generate_request, _generate_calls,
    lambda settings: settings.generation.endpoint,
    lambda plan, batch: _print_answers_plan(plan, batch=batch), note_finished=True,
)  # fmt: skip
JUDGE = Stage(
    "judge", "judge", "judging", _judge_request, _judge_calls,
    lambda settings: settings.judge.endpoint,
    lambda plan, batch: _print_plan(plan, batch=batch),
)  # fmt: skip


@click.command()
@json_option
@click.pass_obj
def runs(ctx: Context, as_json: bool) -> None:
    """List generation runs and judge runs."""
    from server.usecases import list_runs, session

    with session(ctx.engine()) as db:
        data = asdict(list_runs(db))

    def render(d: dict[str, Any]) -> None:
        table("generation runs", d["generation_runs"])
        table("judge runs", d["judge_runs"])

    emit(data, as_json, render)
