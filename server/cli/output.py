"""How the CLI prints: the rich consoles, JSON or a readable rendering, tables, progress bars,
and the options several commands share."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console

if TYPE_CHECKING:
    from judge.reports.sections import Table as ReportTable

# Piped output gets a wide fixed width so tables are not cut to 80 columns.
out = Console(width=None if sys.stdout.isatty() else 160, soft_wrap=True)
err = Console(stderr=True)

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
bootstrap_option = click.option(
    "--bootstrap",
    "n_bootstrap",
    type=click.IntRange(min=0),
    default=1000,
    show_default=True,
    help="Bootstrap resamples for the 95 % CIs (0 = none).",
)
seed_option = click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap."
)
human_option = click.option(
    "--human-score",
    "human_score",
    type=click.Choice(["mean", "median"]),
    default="mean",
    show_default=True,
    help="How an item's human score combines its raters.",
)


def emit(data: Any, as_json: bool, render: Callable[[Any], None]) -> None:
    """``data`` as indented JSON with ``--json``, else through ``render``."""
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
    else:
        render(data)


def table(title: str, rows: Sequence[dict[str, Any]]) -> None:
    """A titled table of dicts (their keys are the columns), or 'TITLE: none'."""
    from rich.table import Table
    from rich.text import Text

    if not rows:
        out.print(f"{title}: none")
        return
    t = Table(title=title)
    for key in rows[0]:
        t.add_column(str(key))
    for row in rows:
        t.add_row(*(Text("" if v is None else str(v)) for v in row.values()))
    out.print(t)


def grid(title: str, head: Sequence[str], body: Sequence[Sequence[str]]) -> None:
    """A titled table of preformatted cells (cells are printed literally, not as markup)."""
    from rich.table import Table
    from rich.text import Text

    t = Table(title=title)
    for h in head:
        t.add_column(h)
    for line in body:
        t.add_row(*(Text(cell) for cell in line))
    out.print(t)


def report_table(t: ReportTable) -> None:
    """A table of a report section, as the CLI shows it (title, columns, rows; no notes)."""
    grid(t.title, t.columns, t.rows)


@contextmanager
def progress_bar(label: str, quiet: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on stderr; yields its update function, or None when ``quiet``."""
    if quiet:
        yield None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    with Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=False,
    ) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update
