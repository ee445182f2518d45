"""``fairjudge generate``, ``judge`` and ``runs``: the model under test's answers, the judge's
scores, and the list of both kinds of run. Both runs resume when asked again.

A run left with answers or judgments missing (calls that failed for good) makes ``generate``
and ``judge`` fail with ``IncompleteError`` (exit code 3) after printing their summary, unless
``--allow-failures`` is given; then the run's status line is printed and the exit code is 0.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

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

    from server.cli import Context

allow_failures_option = click.option(
    "--allow-failures",
    is_flag=True,
    help="Exit 0 even if answers or judgments are missing (the run's status line is printed).",
)


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
) -> None:
    """Send DATASET's items to the model under test and store the answers (resumable).
    Drafts and rejected items are left out (see docs/datasets.md); the run's status line
    says how many."""
    from server import usecases
    from server.usecases.requests import GenerateRequest
    from server.usecases.runs import generate_dry_run, run_cost

    fields = {
        "dataset": dataset_name, "endpoint": endpoint, "temperature": temperature,
        "max_tokens": max_tokens, "limit": limit, "accepted_only": accepted_only,
        "include_drafts": include_drafts, "new": new, "max_cost": max_cost, "dry_run": dry_run,
    }  # fmt: skip
    # The config is loaded with the overrides first, so a bad value is blamed on its option.
    settings = ctx.settings(**GenerateRequest.overrides_of(fields))
    request = GenerateRequest.build(**fields)
    engine = ctx.engine(settings)
    if request.dry_run:
        emit(generate_dry_run(engine, settings, request), as_json, _print_answers_plan)
        return
    with progress_bar("generating", as_json) as bar:
        summary = usecases.generate(engine, settings, request, progress=bar)
    cost = run_cost(engine, settings, "generation", summary.run_id)
    emit(
        {**asdict(summary), "cost": cost},
        as_json,
        lambda _: print_lines([usecases.summary_line("generation", summary), cost_line(cost)]),
    )
    _note_finished(engine, summary.run_id, as_json)
    _check_complete(engine, "generation", summary.run_id, allow_failures, as_json)


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
) -> None:
    """Score a generation run's answers with the FairMonitor rubrics, or with --rubrics
    (resumable)."""
    from server import usecases
    from server.usecases.requests import JudgeRequest
    from server.usecases.runs import run_cost

    fields = {
        "generation_run_id": run_id, "endpoint": endpoint, "prompt_variant": prompt_variant,
        "temperature": temperature, "samples": samples, "aggregation": aggregation,
        "rubric_set": rubric_set, "swap_order": swap_order, "max_cost": max_cost,
        "dry_run": dry_run,
    }  # fmt: skip
    # The config is loaded with the overrides first, so a bad value is blamed on its option.
    settings = ctx.settings(**JudgeRequest.overrides_of(fields))
    request = JudgeRequest.build(**fields)
    engine = ctx.engine(settings)
    if request.dry_run:
        emit(usecases.judge_dry_run(engine, settings, request), as_json, _print_plan)
        return
    with progress_bar("judging", as_json) as bar:
        summary = usecases.judge(engine, settings, request, progress=bar)
    cost = run_cost(engine, settings, "judge", summary.run_id)
    emit(
        {**asdict(summary), "cost": cost},
        as_json,
        lambda _: print_lines([usecases.summary_line("judge", summary), cost_line(cost)]),
    )
    _check_complete(engine, "judge", summary.run_id, allow_failures, as_json)


def _print_plan(plan: dict[str, Any]) -> None:
    print_lines(
        [
            f"judge run: {plan['judge_run_id'] or 'new'} ({plan['endpoint']}, {plan['model']})",
            f"judgments to make: {plan['judgments_to_make']:,} ({plan['missing_answers']:,} "
            f"without an answer, {plan['cached_calls']:,} answered by the cache)",
            f"calls to send: {plan['calls_to_send']:,} (repairs of unreadable replies come on top)",
            *estimate_lines(plan["estimate"]),
        ]
    )


def _print_answers_plan(plan: dict[str, Any]) -> None:
    print_lines(
        [
            f"generation run: {plan['generation_run_id'] or 'new'} ({plan['endpoint']}, "
            f"{plan['model']}) on dataset {plan['dataset']}",
            f"answers to ask: {plan['answers_to_ask']:,} ({plan['cached_calls']:,} answered by "
            "the cache)",
            f"calls to send: {plan['calls_to_send']:,}",
            *estimate_lines(plan["estimate"]),
            *([f"note: {plan['left_out']}"] if plan["left_out"] else []),
        ]
    )


def _check_complete(
    engine: Engine, kind: str, run_id: int, allow_failures: bool, as_json: bool
) -> None:
    """Raise ``IncompleteError`` for a run left incomplete, or with ``allow_failures`` print
    its status line (on stderr with --json, so that stdout stays one JSON document)."""
    from rich.text import Text

    from judge.errors import IncompleteError
    from server.usecases import run_status

    status, detail = run_status(engine, kind, run_id)
    if status != RunStatus.INCOMPLETE:
        return
    line = f"{kind} run {run_id} is incomplete: {detail}"
    if not allow_failures:
        raise IncompleteError(f"{line} (--allow-failures exits 0 anyway)")
    (err() if as_json else out()).print(Text(line), soft_wrap=True)


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
