"""``fairjudge judge-pairs``: FairJudge's own judge compares two (or more) generation runs'
answers to the same items, pair by pair, in both orders; the verdicts are read by
``fairjudge judgments position`` like imported ones (docs/pairwise.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from server.cli.output import (
    ROW_ID,
    emit,
    estimate_lines,
    json_option,
    money,
    print_lines,
    progress_bar,
)

if TYPE_CHECKING:
    from server.cli import Context


def _print_plan(plan: dict[str, Any]) -> None:
    lines = [f"judge endpoint: {plan['endpoint']} ({plan['model']})"]
    for p in plan["pairs"]:
        run = p["pairwise_run_id"] or "new"
        lines.append(
            f"runs {p['runs'][0]} vs {p['runs'][1]} (pairwise run {run}, judge {p['judge']}): "
            f"{p['verdicts_to_get']:,} verdicts to get, {p['cached_calls']:,} answered by the "
            f"cache, {p['calls_to_send']:,} calls to send; {p['questions_missing_an_answer']:,} "
            "questions left out (an answer missing)"
        )
    print_lines([*lines, *estimate_lines(plan["estimate"])])


def _print_done(result: dict[str, Any]) -> None:
    lines = []
    for p in result["passes"]:
        outcome = ", ".join(f"{n:,} {k}" for k, n in sorted(p["flags"].items())) or "nothing new"
        c = p["cost"]
        cost = money(c["cost"]) if c["cost"] is not None else f"unknown ({c['note']})"
        lines.append(
            f"pairwise run {p['run_id']} (runs {p['runs'][0]} vs {p['runs'][1]}): "
            f"{p['tasks']:,} to do, {p['model_calls']:,} model calls, {p['cached']:,} from "
            f"cache; {outcome}; cost so far {cost} ({c['prompt_tokens']:,} prompt + "
            f"{c['completion_tokens']:,} completion tokens)"
        )
        if p["questions_missing_an_answer"]:
            shown = ", ".join(p["questions_missing_an_answer"][:10])
            lines.append(
                f"  {len(p['questions_missing_an_answer'])} question(s) left out, an answer "
                f"missing or empty: {shown}"
            )
    lines.append(
        f"judge {result['judge']}; its figures over every run it judged follow (again: "
        f"`fairjudge judgments position --judge {result['judge']}`)"
    )
    print_lines(lines)


@click.command("judge-pairs")
@click.argument("runs", nargs=-1, required=True, type=ROW_ID, metavar="GEN_RUN_A GEN_RUN_B...")
@click.option(
    "--criterion",
    default="overall",
    show_default=True,
    help="What the judge compares the answers on (prompts/judge_pair_criteria.toml: overall, "
    "fairness). Another criterion is another judge.",
)
@click.option(
    "--repeats",
    type=click.IntRange(1, 20),
    default=1,
    show_default=True,
    help="Judgments of each pair in each order (repetition stability needs 2 or more); more "
    "on a rerun adds the missing repetitions.",
)
@click.option(
    "--endpoint",
    help="Judge endpoint's name (default: [judge] endpoint); another endpoint is another judge.",
)
@click.option(
    "--max-cost",
    type=click.FloatRange(min=0),
    help="The most the pairs' runs may spend in all, at the judge endpoint's prices; kept "
    "with the runs (a rerun without it keeps the bound and counts what was spent); what "
    "finished is kept and a rerun goes on.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Only say how many calls, tokens and how much money the command would take; send "
    "and store nothing.",
)
@click.option(
    "--inconsistent",
    type=click.Choice(["tie", "apart"]),
    default="tie",
    show_default=True,
    help="In the figures printed after the run: an inconsistent pair counted as a tie, or kept "
    "apart (as `judgments position --inconsistent`).",
)
@json_option
@click.pass_obj
def judge_pairs(
    ctx: Context,
    runs: tuple[int, ...],
    criterion: str,
    repeats: int,
    endpoint: str | None,
    max_cost: float | None,
    dry_run: bool,
    inconsistent: str,
    as_json: bool,
) -> None:
    """Compare the answers of generation runs to the same items with the judge endpoint: for
    each pair of runs and each item, the judge sees both answers and says A, B or tie, in
    both orders (resumable, cached). Each pair of runs is one pairwise judge run; read the
    figures with `fairjudge judgments position`. Exits 3 when calls failed or --max-cost
    stopped it (a rerun goes on)."""
    from judge.errors import IncompleteError
    from server.cli.judgments import render_figures
    from server.cli.stages import blamed_on_options, request_and_settings
    from server.usecases import session
    from server.usecases.pairwise import (
        PositionOptions,
        judge_pairs_dry_run,
        pairwise_position_or_none,
    )
    from server.usecases.pairwise import judge_pairs as run
    from server.usecases.requests import JudgePairsRequest

    fields = {
        "runs": list(runs), "criterion": criterion, "repeats": repeats, "endpoint": endpoint,
        "max_cost": max_cost, "dry_run": dry_run,
    }  # fmt: skip
    settings, request = request_and_settings(ctx, JudgePairsRequest, fields)
    engine = ctx.engine(settings)
    if request.dry_run:
        with blamed_on_options(ctx, JudgePairsRequest, fields):
            plan = judge_pairs_dry_run(engine, settings, request)
        emit(plan, as_json, _print_plan)
        return
    with blamed_on_options(ctx, JudgePairsRequest, fields):
        with progress_bar("judging pairs", as_json) as bar:
            result = run(engine, settings, request, progress=bar)
    with session(engine) as s:
        options = PositionOptions.model_validate(
            {"judge": result["judge"], "inconsistent": inconsistent}
        )
        result["figures"] = pairwise_position_or_none(s, options)

    def render(r: dict[str, Any]) -> None:
        _print_done(r)
        if r["figures"] is not None:
            render_figures(r["figures"])

    emit(result, as_json, render)
    failed = sum(len(p["calls_failed"]) for p in result["passes"])
    if result["passes"][-1]["budget_stopped"]:
        bound = result["bound"]
        raise IncompleteError(
            f"--max-cost {bound['max_cost']:g} reached (the bound is kept with the pairs' runs; "
            f"spent {bound['spent']:.6f} in all): what finished is stored; run the same "
            "command again with a higher --max-cost to go on"
        )
    if failed:
        raise IncompleteError(
            f"{failed} call(s) failed for good and were not stored; run the same command again "
            "to retry them"
        )
