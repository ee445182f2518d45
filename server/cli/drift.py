"""``fairjudge drift``: a series of judge runs of one configuration on the same anchor items,
in release order, watched for drift against the baseline after every run."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from server.cli.output import ROW_ID, json_option, out, report_table

if TYPE_CHECKING:
    from server.cli import Context


@click.command()
@click.argument("run_ids", nargs=-1, required=True, type=ROW_ID, metavar="JUDGE_RUN JUDGE_RUN...")
@click.option(
    "--figure",
    "figures",
    multiple=True,
    metavar="NAME",
    help="A figure to watch, e.g. 'S2 TCS mean' (a rubric mean, in points) or 'S2 TCS>=4' "
    "(a stage share, in percent); repeat for several. Default: every rubric mean. An unknown "
    "name lists the ones the runs have.",
)
@click.option(
    "--baseline",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="How many of the first runs form the baseline (their mean, item by item).",
)
@click.option(
    "--alpha",
    type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="The largest chance of any false alarm over the whole series, however many runs "
    "follow (split equally over the figures).",
)
@json_option
@click.pass_obj
def drift(
    ctx: Context,
    run_ids: tuple[int, ...],
    figures: tuple[str, ...],
    baseline: int,
    alpha: float,
    as_json: bool,
) -> None:
    """Watch judge runs of one configuration on the same anchor items for drift, in release
    order: per run, the drift of each figure against the baseline (paired on the items), its
    anytime-valid interval, whether the alarm rang, and the first run at which it did.
    Looking after every run does not inflate false alarms. Runs of another configuration or
    dataset, or lacking an anchor item, are refused."""
    from rich.text import Text

    from server.usecases import session
    from server.usecases.drift import drift as watch
    from server.usecases.drift import drift_summary

    with session(ctx.engine()) as db:
        series = watch(db, run_ids, figures=figures, baseline=baseline, alpha=alpha)
    if as_json:
        click.echo(json.dumps(series.to_json(), indent=2, default=str))
        return
    tables, lines = drift_summary(series)
    console = out()
    for table in tables:
        report_table(table, console=console, notes=True)
    for line in lines:
        console.print(Text(line), soft_wrap=False)
