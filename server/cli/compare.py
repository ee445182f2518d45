"""``fairjudge compare``: several judge runs side by side (models, or judge configurations),
FairMonitor's Table 5 with intervals and unscored counts, optionally written as a report."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from server.cli.output import ROW_ID, json_option, out, report_table

if TYPE_CHECKING:
    from rich.console import Console

    from server.cli import Context
    from server.usecases import Report


def print_comparison(report: Report, console: Console | None = None) -> None:
    """Every table of the comparison fitted to the console's width, then the legend and the
    unscored judgments of each run."""
    from rich.text import Text

    from server.usecases import comparison_summary

    console = console or out()
    tables, lines = comparison_summary(report)
    for table in tables:
        report_table(table, console=console)
    for line in lines:
        console.print(Text(line), soft_wrap=False)


@click.command()
@click.argument("run_ids", nargs=-1, required=True, type=ROW_ID, metavar="JUDGE_RUN JUDGE_RUN...")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Also write report.html, report.json, metrics.csv and item_scores.csv here.",
)
@click.option(
    "--paired",
    is_flag=True,
    help="Two runs judged on the same items: also the paired differences B - A per cell "
    "(bootstrap interval, exact McNemar or sign-flip test, Holm, flips, equivalence); runs of "
    "different items are refused.",
)
@click.option(
    "--margin",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="With --paired: the equivalence margin in percentage points (default 5).",
)
@click.option(
    "--assume-random",
    is_flag=True,
    help="With --paired: treat imported ratings (or several campaigns') as a simple random "
    "sample of the pairs, for the differences corrected by people's ratings.",
)
@json_option
@click.pass_obj
def compare(
    ctx: Context,
    run_ids: tuple[int, ...],
    out_dir: str | None,
    paired: bool,
    margin: float | None,
    assume_random: bool,
    as_json: bool,
) -> None:
    """Compare judge runs side by side: stage metrics per factor with 95 % intervals and
    unscored counts, one column per model (or judge configuration); with --paired, two runs
    of the same items item by item (and, where people rated both runs' answers, the
    differences corrected by their ratings)."""
    from server.usecases import compare_report, session
    from server.usecases.rendering import write_report

    with session(ctx.engine()) as db:
        report = compare_report(
            db, run_ids, paired=paired, margin=margin, assume_random=assume_random
        )
    paths = write_report(report, out_dir) if out_dir else {}
    if as_json:
        data = report.to_json()
        if paths:
            data["paths"] = {k: str(v) for k, v in paths.items()}
        click.echo(json.dumps(data, indent=2, default=str))
        return
    print_comparison(report)
    if paths:
        out().print(f"report: {paths['html'].resolve()}")
