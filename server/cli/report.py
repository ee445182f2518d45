"""``fairjudge report`` and ``demo``: a judge run's report, and the whole pipeline on the
embedded model. Both print the run's metrics table and where the HTML report is."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING

import click

from server.cli.agreement import campaign_option
from server.cli.output import (
    ROW_ID,
    err,
    json_option,
    out,
    print_lines,
    progress_bar,
    report_table,
    require_qualified_option,
    requires_qualified,
    writing,
)

if TYPE_CHECKING:
    from rich.console import Console

    from server.cli import Context
    from server.usecases import Report
    from server.usecases.demo import DemoHooks


def print_metrics(report: Report, console: Console | None = None) -> None:
    """The FairMonitor metrics table of a run with its legend, then its unscored judgments
    and tokens in words; fitted to the console's width (cells are never cut)."""
    from rich.text import Text

    from server.usecases import metrics_summary

    console = console or out()
    metrics, lines = metrics_summary(report)
    report_table(metrics, console=console, notes=True)
    for line in lines:
        console.print(Text(line), soft_wrap=False)


@click.command()
@click.argument("run_id", type=ROW_ID, metavar="JUDGE_RUN")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    required=True,
    help="Folder for report.html, report.json, metrics.csv, item_scores.csv.",
)
@campaign_option
@require_qualified_option
@json_option
@click.pass_obj
def report(
    ctx: Context, run_id: int, out_dir: str, campaigns: tuple[str, ...],
    require_qualified: bool | None, as_json: bool,
) -> None:  # fmt: skip
    """Write the HTML/JSON/CSV report of a judge run; it opens with the judge's standing per
    rubric (validated, not validated, failed validation, stale)."""
    from server.usecases import full_report, session
    from server.usecases.rendering import write_report
    from server.usecases.standing import require_in

    settings = ctx.settings()
    if requires_qualified(settings, require_qualified):
        require_in(ctx.engine(settings), run_id)
    with session(ctx.engine(settings)) as db:
        composed = full_report(db, run_id, settings=settings, campaigns=campaigns)
    with writing(out_dir):
        paths = write_report(composed, out_dir)
    if as_json:
        metrics = composed.to_json()["metrics_overall"]
        click.echo(
            json.dumps(
                {"paths": {k: str(v) for k, v in paths.items()}, "metrics": metrics}, indent=2
            )
        )
        return
    print_standing(composed)
    print_metrics(composed)
    out().print(f"report: {paths['html'].resolve()}")


def print_standing(report: Report) -> None:
    """The judge's standing per rubric, before any figure."""

    section = report.section("Judge standing")
    if section is not None:
        print_lines([f"{row[0]}: {row[2]}" for row in section.tables[0].rows])


@contextmanager
def _printing_hooks(console: Console) -> Iterator[DemoHooks]:
    """Demo hooks that print each line on ``console`` and show each stage's progress on
    stderr (a bar on a terminal, else plain lines); a bar ends when the next line or bar
    comes."""
    from rich.text import Text

    from server.usecases.demo import DemoHooks

    with ExitStack() as bars:

        def say(line: str) -> None:
            bars.close()
            console.print(Text(line), soft_wrap=True)

        def progress(label: str) -> Callable[[int, int], None] | None:
            bars.close()
            return bars.enter_context(progress_bar(label, False))

        yield DemoHooks(say=say, progress=progress)


@click.command()
@click.option(
    "--out", "out_dir", default="reports/demo", show_default=True, type=click.Path(file_okay=False)
)
@click.option(
    "--dataset-file",
    type=click.Path(dir_okay=False),
    show_default="datasets/fairmonitor_sample.jsonl in the repository",
    help="Item file to run.",
)
@click.option(
    "--full",
    is_flag=True,
    help="Run every item of the file. By default the demo runs the first few items of each "
    "stage (it says how many), so that it takes a few minutes on two cores.",
)
@click.option(
    "--limit", type=click.IntRange(min=1), help="Only the first N of those items (a quicker look)."
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="After the run print JSON (each step's seconds, the counts, the report's files) "
    "instead of the metrics table; the steps are then told on stderr.",
)
@click.pass_obj
def demo(
    ctx: Context,
    out_dir: str,
    dataset_file: str | None,
    full: bool,
    limit: int | None,
    as_json: bool,
) -> None:
    """The whole pipeline on the embedded model: serve, import, generate, judge, report, stop.

    Each step says when it starts and how long it took; progress with the time left goes to
    stderr."""
    from server import usecases
    from server.usecases.demo import seconds_text

    with _printing_hooks(err() if as_json else out()) as hooks:
        result = usecases.demo(
            ctx.settings(), out_dir, hooks, dataset_file=dataset_file, limit=limit, full=full
        )
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    from rich.text import Text

    out().print(Text(result.standing_line), soft_wrap=True)
    print_metrics(result.report)
    out().print(f"demo done in {seconds_text(result.seconds)}")
    out().print(f"report: {result.paths['html'].resolve()}")
