"""``fairjudge agreement``: judge reliability against the stored human ratings, and
``agreement compute`` for ratings and judge scores kept in the user's own CSV files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from server.cli.output import (
    bootstrap_option,
    emit,
    human_option,
    json_option,
    out,
    report_table,
    seed_option,
    table,
    writing,
)
from server.cli.ratings import scale_option

campaign_option = click.option(
    "--campaign",
    "campaigns",
    multiple=True,
    metavar="NAME",
    help="Use only this campaign's ratings (repeatable; import:BATCH for an imported batch). "
    "Default: every campaign and batch, the newest winning per rater, item and rubric.",
)

if TYPE_CHECKING:
    from annotation.reliability import RunReliability
    from judge.vocab import Scale
    from server.cli import Context


def print_reliability(result: RunReliability) -> None:
    """FairMonitor's Table 3 for three coefficients, the humans' agreement among themselves
    (alphas, Fleiss' kappa, pairwise kappa), then one reading per rubric x judge."""
    from rich.text import Text

    from annotation.sections import human_tables, readings, reliability_tables

    suffix = f" (run {result.generation_run})"
    for t in [*reliability_tables(result), *human_tables(result, suffix)]:
        report_table(t)
    for line in readings(result):
        out().print(Text(line))


def write_agreement(result: RunReliability, out_dir: str) -> list[Path]:
    """agreement.json and one scatter + confusion PNG per rubric x judge run with data."""
    from annotation.sections import agreement_plot
    from judge.reports.render import figure_png

    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / "agreement.json"]
    paths[0].write_text(json.dumps(result.to_dict(), indent=2, default=str), encoding="utf-8")
    for rubric, entry in result.rubrics.items():
        for judge in entry.judges:
            plot = agreement_plot(rubric, judge)
            if plot is None:
                continue
            png = folder / f"agreement_{rubric}_judge{judge.judge_run}.png"
            png.write_bytes(figure_png(plot))
            paths.append(png)
    return paths


@click.group(invoke_without_command=True)
@click.option("--run", "run_id", type=int, help="Generation run whose judges to validate.")
@bootstrap_option
@seed_option
@human_option
@click.option(
    "--target-half-width",
    type=float,
    default=0.1,
    show_default=True,
    help="Half the CI's width (upper minus lower bound, over 2) to aim for when estimating "
    "how many items to rate.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Also write agreement.json and plots here.",
)
@campaign_option
@json_option
@click.pass_context
def agreement(
    click_ctx: click.Context,
    run_id: int | None,
    n_bootstrap: int,
    seed: int,
    human_score: str,
    target_half_width: float,
    out_dir: str | None,
    campaigns: tuple[str, ...],
    as_json: bool,
) -> None:
    """Judge reliability: every judge run of a generation run against the human ratings.

    Without --campaign every campaign and import batch of the run counts; where several
    rated the same item and rubric by the same person, the newest campaign's rating is used.
    The output names the campaigns it used."""
    if click_ctx.invoked_subcommand is not None:
        return
    if run_id is None:
        raise click.UsageError("give --run GENERATION_RUN, or use `agreement compute`")
    from annotation.reliability import run_reliability
    from judge.stats.coefficient import BootstrapOptions
    from judge.store.engine import session_scope

    ctx: Context = click_ctx.obj
    with session_scope(ctx.engine()) as session:
        result = run_reliability(
            session,
            run_id,
            options=BootstrapOptions(n_bootstrap=n_bootstrap, seed=seed),
            human=human_score,
            target_half_width=target_half_width,
            campaigns=campaigns,
        )
    data = result.to_dict()
    if out_dir:
        with writing(out_dir):
            data["files"] = [str(p) for p in write_agreement(result, out_dir)]
    emit(data, as_json, lambda _: print_reliability(result))


@agreement.command("compute")
@click.option(
    "--human",
    "human_csv",
    type=click.Path(dir_okay=False),
    required=True,
    help="Long-format CSV: item_id,rater,score (other columns allowed).",
)
@click.option(
    "--judge",
    "judge_csv",
    type=click.Path(dir_okay=False),
    help="CSV: item_id,score (several rows per item = samples, averaged).",
)
@click.option("--group-by", help="Column of HUMAN.csv to compute grouped correlations by.")
@scale_option
@bootstrap_option
@seed_option
@human_option
@json_option
def agreement_compute(
    human_csv: str,
    judge_csv: str | None,
    group_by: str | None,
    scale: Scale,
    n_bootstrap: int,
    seed: int,
    human_score: str,
    as_json: bool,
) -> None:
    """Agreement for your own files: human vs human, and judge vs human with --judge.

    Human and judge scores lie on one rating scale: --scale, 1-5 unless given.
    """
    from annotation.files import compute
    from annotation.sections import files_table
    from judge.stats.coefficient import BootstrapOptions

    result = compute(
        human_csv,
        judge_csv,
        group_by=group_by,
        options=BootstrapOptions(n_bootstrap=n_bootstrap, seed=seed),
        human=human_score,
        scale=scale,
    )

    def render(_: object) -> None:
        t = files_table(result)
        table(t.title, [dict(zip(t.columns, row, strict=True)) for row in t.rows])

    emit(result.to_dict(), as_json, render)
