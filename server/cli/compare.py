"""``fairjudge compare``: several judge runs side by side (models, or judge configurations),
FairMonitor's Table 5 with intervals and unscored counts, optionally written as a report."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from server.cli.output import json_option, out, report_table

if TYPE_CHECKING:
    from rich.console import Console

    from judge.reports.sections import Report
    from server.cli import Context


def print_comparison(report: Report, console: Console | None = None) -> None:
    """Every table of the comparison fitted to the console's width, then the legend and the
    unscored judgments of each run."""
    from rich.text import Text

    from judge.reports.compare import COMPARE_TITLE

    console = console or out()
    section = report.section(COMPARE_TITLE)
    assert section is not None, "a comparison always has its section"
    for table in section.tables:
        report_table(table, console=console)
    legend = section.tables[-1].notes  # the by-factor table's: what a cell says
    for line in [*legend, *section.notes]:
        console.print(Text(line), soft_wrap=False)


@click.command()
@click.argument("run_ids", nargs=-1, required=True, type=int, metavar="JUDGE_RUN JUDGE_RUN...")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Also write report.html, report.json, metrics.csv and item_scores.csv here.",
)
@json_option
@click.pass_obj
def compare(ctx: Context, run_ids: tuple[int, ...], out_dir: str | None, as_json: bool) -> None:
    """Compare judge runs side by side: stage metrics per factor with 95 % intervals and
    unscored counts, one column per model (or judge configuration)."""
    from judge.reports.render import write_report
    from judge.store.engine import session_scope
    from server.usecases import compare_report

    with session_scope(ctx.engine()) as session:
        report = compare_report(session, run_ids)
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
