"""``fairjudge generate``, ``judge`` and ``runs``: the model under test's answers, the judge's
scores, and the list of both kinds of run. Both runs resume when asked again.

A run left with answers or judgments missing (calls that failed for good) makes ``generate``
and ``judge`` fail with ``IncompleteError`` (exit code 3) after printing their summary, unless
``--allow-failures`` is given; then the run's status line is printed and the exit code is 0.

The request says how it runs (``dry_run``; ``transport``: ``--batch`` and its tuning);
``--queue`` (shared with ``audit SUITE run``) hands it to the job queue instead."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

from server.cli.output import (
    ROW_ID,
    dry_run_option,
    emit,
    estimate_lines,
    json_option,
    max_cost_option,
    print_lines,
    table,
)
from server.cli.stages import Stage, StageCalls, batch_options, chosen_transport, run_stage

if TYPE_CHECKING:
    from server.cli import Context
    from server.usecases.requests import Request

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
    run_stage(ctx, GENERATE, fields, batching, allow_failures, as_json)


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
    run_stage(ctx, JUDGE, fields, batching, allow_failures, as_json)


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
