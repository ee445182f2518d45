"""``fairjudge generate``, ``judge`` and ``runs``: the model under test's answers, the judge's
scores, and the list of both kinds of run. Both runs resume when asked again."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

from server.cli.output import emit, err, json_option, out, progress_bar, table

if TYPE_CHECKING:
    from server.cli import Context


@click.command()
@click.argument("dataset_name", metavar="DATASET")
@click.option("--endpoint", help="Endpoint under test (default: [generation] endpoint).")
@click.option("--temperature", type=float)
@click.option("--max-tokens", type=int)
@click.option("--limit", type=int, help="Only the first N items.")
@click.option("--new", is_flag=True, help="Start a new run even if one with these settings exists.")
@json_option
@click.pass_obj
def generate(
    ctx: Context,
    dataset_name: str,
    endpoint: str | None,
    temperature: float | None,
    max_tokens: int | None,
    limit: int | None,
    new: bool,
    as_json: bool,
) -> None:
    """Send DATASET's items to the model under test and store the answers (resumable)."""
    from server import services

    settings = ctx.settings(
        **{
            "generation.endpoint": endpoint,
            "generation.temperature": temperature,
            "generation.max_tokens": max_tokens,
        }
    )
    with progress_bar("generating", as_json) as bar:
        summary = services.generate(
            ctx.engine(settings), settings, dataset_name, limit=limit, new=new, progress=bar
        )
    emit(
        asdict(summary),
        as_json,
        lambda _: out.print(services.summary_line("generation", summary)),
    )


@click.command("judge")
@click.argument("run_id", type=int, metavar="GENERATION_RUN")
@click.option("--endpoint", help="Judge endpoint (default: [judge] endpoint).")
@click.option("--prompt-variant", type=click.Choice(["plain", "cot"]))
@click.option("--temperature", type=float)
@click.option("--samples", type=int, help="Judge calls per item and rubric.")
@click.option("--aggregation", type=click.Choice(["mean", "majority"]))
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
    as_json: bool,
) -> None:
    """Score a generation run's answers with the FairMonitor rubrics (resumable)."""
    from judge.store.engine import session_scope
    from judge.store.queries import get_judge_run
    from server import services

    settings = ctx.settings(
        **{
            "judge.endpoint": endpoint,
            "judge.prompt_variant": prompt_variant,
            "judge.temperature": temperature,
            "judge.samples": samples,
            "judge.aggregation": aggregation,
        }
    )
    engine = ctx.engine(settings)
    with progress_bar("judging", as_json) as bar:
        summary = services.judge(engine, settings, run_id, progress=bar)
    emit(asdict(summary), as_json, lambda _: out.print(services.summary_line("judge", summary)))
    with session_scope(engine) as session:
        jrun = get_judge_run(session, summary.run_id)
        status, detail = jrun.status, jrun.status_detail
    if status == "incomplete":
        from rich.text import Text

        # On stderr with --json, so that stdout stays one JSON document.
        line = Text(f"judge run {summary.run_id} is incomplete: {detail}")
        (err if as_json else out).print(line, soft_wrap=True)


@click.command()
@json_option
@click.pass_obj
def runs(ctx: Context, as_json: bool) -> None:
    """List generation runs and judge runs."""
    from judge.store.engine import session_scope
    from judge.store.queries import list_runs

    with session_scope(ctx.engine()) as session:
        data = asdict(list_runs(session))

    def render(d: dict[str, Any]) -> None:
        table("generation runs", d["generation_runs"])
        table("judge runs", d["judge_runs"])

    emit(data, as_json, render)
