"""``fairjudge sweep``: the same answers judged under every temperature x prompt variant, then
their agreement with the humans as FairMonitor's Table 3 (when ratings exist)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

import click

from server.cli.output import (
    ROW_ID,
    bootstrap_option,
    emit,
    err,
    human_option,
    json_option,
    out,
    progress_bar,
    report_table,
    seed_option,
)
from server.cli.stages import blamed_on_options, request_and_settings

if TYPE_CHECKING:
    from server.cli import Context
    from server.usecases.sweeps import SweepConfig


def _floats(ctx: click.Context, param: click.Parameter, value: str) -> list[float]:
    try:
        return [float(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of numbers") from None


def _names(ctx: click.Context, param: click.Parameter, value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


@contextmanager
def _bars(quiet: bool) -> Iterator[Callable[[SweepConfig], Callable[[int, int], None] | None]]:
    """One progress bar per configuration; a bar ends when the next one starts."""
    with ExitStack() as bars:

        def progress_for(config: SweepConfig) -> Callable[[int, int], None] | None:
            bars.close()
            return bars.enter_context(progress_bar(f"judging {config.label}", quiet))

        yield progress_for


@click.command()
@click.argument("run_id", type=ROW_ID, metavar="GENERATION_RUN")
@click.option(
    "--temperatures",
    default="0.1,0.5,1.0",
    show_default=True,
    callback=_floats,
    help="Judge temperatures, comma-separated.",
)
@click.option(
    "--prompt-variants",
    "variants",
    default="plain,cot",
    show_default=True,
    callback=_names,
    help="Prompt variants, comma-separated (plain, cot).",
)
@click.option("--samples", type=int, help="Judge calls per item and rubric.")
@click.option("--endpoint", help="Judge endpoint (default: [judge] endpoint).")
@click.option(
    "--coefficient",
    type=click.Choice(["spearman", "pearson", "kendall", "kappa_quadratic"]),
    default="spearman",
    show_default=True,
    help="Agreement coefficient of the table.",
)
@bootstrap_option
@seed_option
@human_option
@json_option
@click.pass_obj
def sweep(
    ctx: Context,
    run_id: int,
    temperatures: list[float],
    variants: list[str],
    samples: int | None,
    endpoint: str | None,
    coefficient: str,
    n_bootstrap: int,
    seed: int,
    human_score: str,
    as_json: bool,
) -> None:
    """Judge GENERATION_RUN under every temperature x prompt variant (resumable, cached), then
    show agreement with the human ratings per rubric and configuration (FairMonitor Table 3)."""
    from rich.text import Text

    from judge.stats.coefficient import BootstrapOptions
    from server.usecases import session
    from server.usecases.requests import SweepRequest
    from server.usecases.sweeps import (
        has_ratings,
        layout,
        ratings_hint,
        run_sweep,
        sweep_reliability,
    )

    fields = {
        "generation_run_id": run_id, "temperatures": temperatures, "prompt_variants": variants,
        "samples": samples, "endpoint": endpoint,
    }  # fmt: skip
    # each configuration's judge request applies the overrides (server.usecases.sweeps)
    settings, request = request_and_settings(ctx, SweepRequest, fields)
    engine = ctx.engine(settings)
    with blamed_on_options(ctx, SweepRequest, fields), _bars(as_json) as progress_for:
        result = run_sweep(engine, settings, request, progress_for=progress_for)
    data: dict[str, Any] = result.to_dict()
    table = None
    with session(engine) as db:
        if has_ratings(db, run_id):
            options = BootstrapOptions(n_bootstrap=n_bootstrap, seed=seed)
            reliability = sweep_reliability(db, result, options=options, human=human_score)
            table = layout(reliability, result, coefficient)
            data["agreement"] = reliability.to_dict()
            data["table"] = {"title": table.title, "columns": table.columns, "rows": table.rows}
        else:
            data["agreement"] = None
            data["hint"] = ratings_hint(run_id)

    def render(_: object) -> None:
        for run in result.runs:
            out().print(Text(run.line()))
        if table is None:
            out().print(Text(ratings_hint(run_id)))
            return
        report_table(table)
        for note in table.notes:
            out().print(Text(note))

    emit(data, as_json, render)
    if as_json and table is None:
        err().print(Text(ratings_hint(run_id)))
