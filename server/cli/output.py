"""How the CLI prints: the rich consoles, JSON or a readable rendering, tables, progress bars,
and the options several commands share."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from judge.errors import InvalidInputError, OutputError

if TYPE_CHECKING:
    from rich.console import Console

    from server.usecases import Table as ReportTable


class RowId(click.ParamType):
    """A run's id on the command line: a whole number no larger than any store can hold
    (``MAX_ID``). A larger one is an error of the user's input, exit 1 and one line, not a
    database overflow."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from server.usecases.requests import MAX_ID

        try:
            number = int(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a valid integer.", param, ctx)
        if number > MAX_ID:
            what = param.human_readable_name if param is not None else "the id"
            raise InvalidInputError(
                f"{what} {number} is larger than any id a run can have ({MAX_ID:,})"
            )
        return number


ROW_ID = RowId()
"""The type of every argument and option that names a run by its id."""


# The consoles are made on first use: importing rich takes longer than the rest of the CLI,
# and `--help` or a command that prints a plain line does not need it.
@cache
def out() -> Console:
    """The console for results (stdout). Piped output gets a wide fixed width so tables are
    not cut to 80 columns."""
    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else 160, soft_wrap=True)


@cache
def err() -> Console:
    """The console for progress, warnings and errors (stderr)."""
    from rich.console import Console

    # soft_wrap: a message is one line whatever the width (rich wraps at 80 columns when
    # stderr is not a terminal, which split warnings that scripts grep for).
    return Console(stderr=True, soft_wrap=True)


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


@contextmanager
def writing(path: str | Path) -> Iterator[None]:
    """Files written inside this block that cannot be (no such folder, no permission, a full
    disk) become one FairJudgeError naming ``path`` and the reason, not a traceback."""

    try:
        yield
    except OSError as exc:
        where = exc.filename or path
        reason = exc.strerror or str(exc)
        raise OutputError(
            f"cannot write {where}: {reason}; choose another path or fix its permissions"
        ) from exc


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
        out().print(f"{title}: none")
        return
    t = Table(title=title)
    for key in rows[0]:
        t.add_column(str(key), overflow="fold")  # fold, never cut: cells tell rows apart
    for row in rows:
        t.add_row(*(Text("" if v is None else str(v)) for v in row.values()))
    out().print(t)


def grid(title: str, head: Sequence[str], body: Sequence[Sequence[str]]) -> None:
    """A titled table of preformatted cells (cells are printed literally, not as markup)."""
    from rich.table import Table
    from rich.text import Text

    t = Table(title=title)
    for h in head:
        t.add_column(h, overflow="fold")
    for line in body:
        t.add_row(*(Text(cell) for cell in line))
    out().print(t)


def report_table(t: ReportTable, *, console: Console | None = None, notes: bool = False) -> None:
    """A table of a report section as the CLI shows it, fitted to the console's width.

    Cells are never cut: when the columns do not fit side by side, they are printed in
    panels that each repeat the table's key columns (the factor, the rubric); when not even
    one column fits beside the keys, the table is laid out long (each row's keys on a line,
    then one line per value). With ``notes`` the table's notes follow it as a legend,
    wrapped to the width.
    """
    from rich.text import Text

    console = console or out()
    for panel in fit_table(t, console.width):
        console.print(panel)
    if notes:
        for note in t.notes:
            console.print(Text(note), soft_wrap=False)


# A rich table's frame: one space of padding each side of a cell and a border between cells.
_CELL_FRAME = 3


def _column_width(header: str, cells: Sequence[str], *, wrap_header: bool) -> int:
    """Room a column needs: its widest cell, or its header (its longest word when headers
    may wrap)."""
    from rich.cells import cell_len

    words = header.split() if wrap_header else [header]
    return max([*(cell_len(w) for w in words), 0, *(cell_len(c) for c in cells)])


def fit_table(t: ReportTable, width: int) -> list[Any]:
    """``t`` as rich tables that each fit in ``width`` columns (see ``report_table``)."""
    keys = max(0, min(t.key_columns, len(t.columns) - 1))
    cells = [[row[i] if i < len(row) else "" for row in t.rows] for i in range(len(t.columns))]
    widths = [_column_width(h, cells[i], wrap_header=False) for i, h in enumerate(t.columns)]
    if 1 + sum(w + _CELL_FRAME for w in widths) > width:
        # Too wide with headers on one line: let headers wrap, then split into panels.
        widths = [_column_width(h, cells[i], wrap_header=True) for i, h in enumerate(t.columns)]
    key_room = 1 + sum(w + _CELL_FRAME for w in widths[:keys])
    panels: list[list[int]] = []
    room = width - key_room
    for i in range(keys, len(t.columns)):
        need = widths[i] + _CELL_FRAME
        if need > width - key_room:
            return [_long_table(t, keys, width)]
        if not panels or need > room:
            panels.append([])
            room = width - key_room
        panels[-1].append(i)
        room -= need
    if len(panels) <= 1:
        return [_rich_table(t.title, t, list(range(len(t.columns))), widths)]
    return [
        _rich_table(f"{t.title} ({n}/{len(panels)})", t, list(range(keys)) + panel, widths)
        for n, panel in enumerate(panels, start=1)
    ]


def _rich_table(title: str, t: ReportTable, columns: list[int], widths: list[int]) -> Any:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title)
    for i in columns:
        table.add_column(t.columns[i], width=widths[i], overflow="fold")
    # A key named only on the first row of its group: a line closes each group.
    grouped = any(row and not row[0] for row in t.rows)
    for n, row in enumerate(t.rows):
        last = n + 1 == len(t.rows)
        table.add_row(
            *(Text(row[i] if i < len(row) else "") for i in columns),
            end_section=grouped and not last and bool(t.rows[n + 1][0]),
        )
    return table


def _long_table(t: ReportTable, keys: int, width: int) -> Any:
    """One block per row: its key cells on a line, then one indented line per value
    ('column: cell'), wrapped to the width rather than cut."""
    from rich.text import Text

    text = Text(f"{t.title}\n", style="italic")
    for row in t.rows:
        key = " · ".join(f"{t.columns[i]} {row[i]}" for i in range(keys) if i < len(row) and row[i])
        if key:
            text.append(f"{key}\n", style="bold")
        for i in range(keys, len(t.columns)):
            cell = row[i] if i < len(row) else ""
            if cell:
                text.append(f"  {t.columns[i]}: {cell}\n")
    text.rstrip()
    return text


PLAIN_PROGRESS_EVERY_S = 5.0
"""Seconds between two plain progress lines (stderr not a terminal: a log file, CI, a pipe)."""
BAR_UPDATE_EVERY_S = 0.1
"""Seconds between two updates of the progress bar on a terminal (it redraws 10 times a
second anyway)."""


def rate_text(per_second: float) -> str:
    """A rate of results: '52.1/s', or below one a second the time each takes: '3.1 s each'."""
    return f"{per_second:,.1f}/s" if per_second >= 1 else f"{1 / per_second:.1f} s each"


def progress_line(label: str, done: int, total: int, elapsed: float, *, stored: int = 0) -> str:
    """One line of progress for people, e.g. 'judging: 540/2,000 (27 %), 52.1/s, about 28 s
    left', or at the end 'judging: 2,000/2,000 (100 %), 52.6/s, done in 38 s'. ``done`` and
    ``total`` count this pass's work; ``stored``: what the store already held, said after."""
    from server.usecases.demo import seconds_text

    share = 100 * done / total if total else 100.0
    rate = done / elapsed if elapsed > 0 else 0.0
    line = f"{label}: {done:,}/{total:,} ({share:.0f} %)"
    if rate > 0:
        line += f", {rate_text(rate)}"
    if done >= total:
        line = f"{line}, done in {seconds_text(elapsed)}"
    elif rate > 0:
        line = f"{line}, about {seconds_text((total - done) / rate)} left"
    return line + (f"; {stored:,} already stored" if stored else "")


def nothing_to_do_line(label: str, stored: int, total: int) -> str:
    """The line of a pass with no call to make, e.g. 'judging: nothing to do: 108 of 108
    already stored' (not '108/108 (100 %)': nothing was done)."""
    if not total:
        return f"{label}: nothing to do"
    return f"{label}: nothing to do: {stored:,} of {total:,} already stored"


def short_line(label: str, done: int, total: int, elapsed: float, *, stored: int = 0) -> str:
    """The last line of a pass that ended short of its total (a cost bound stopped it, or
    batches are still running), in counts only, e.g. 'judging: ended with 7 of 3,000 done in
    2.1 s' (never a share: 2,999 of 3,000 is not 100 %)."""
    from server.usecases.demo import seconds_text

    line = f"{label}: ended with {done:,} of {total:,} done in {seconds_text(elapsed)}"
    return line + (f"; {stored:,} already stored" if stored else "")


class PlainProgress:
    """Progress as plain lines: at most one every ``every`` seconds, and one at the end.

    The callback runs once per result, up to hundreds of times a second, so between lines it
    only reads the clock and compares; formatting and writing happen when a line is due.
    Lines count the work of this pass: what the store held when it began (``begin``) is
    said beside, not counted as done.
    """

    def __init__(
        self,
        label: str,
        write: Callable[[str], None],
        *,
        every: float = PLAIN_PROGRESS_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.write = write
        self.every = every
        self.clock = clock
        self.started = clock()
        self._due = self.started + every
        self._ended_at: int | None = None
        """The total whose end was said: said once, but again if more work is added later
        (``dataset plan`` adds a round of calls for what replies left short)."""
        self.stored = 0
        """Tasks the store held when the pass began (``begin``)."""
        self.last: tuple[int, int] | None = None
        """The pass's last (done, total), of this pass's work."""

    def begin(self, stored: int, total: int) -> None:
        """The pass begins with ``stored`` of ``total`` already stored."""
        self.stored = stored
        if stored >= total:
            self._ended_at = total - stored
            self.write(nothing_to_do_line(self.label, stored, total))

    def __call__(self, done: int, total: int) -> None:
        done, total = done - self.stored, total - self.stored
        self.last = (done, total)
        now = self.clock()
        finished = done >= total
        if finished and total == self._ended_at:
            return
        if now < self._due and not finished:
            return
        self._due = now + self.every
        if finished:
            self._ended_at = total
        line = progress_line(self.label, done, total, now - self.started, stored=self.stored)
        self.write(line)

    def end(self) -> None:
        """The pass returned: a pass that ended short of its total says where, once."""
        if self.last is not None and self.last[0] < self.last[1]:
            elapsed = self.clock() - self.started
            self.write(short_line(self.label, *self.last, elapsed, stored=self.stored))


def _plain_write(line: str) -> None:
    err().print(line, markup=False, highlight=False, soft_wrap=True)


@contextmanager
def progress_bar(label: str, quiet: bool) -> Iterator[Callable[[int, int], None] | None]:
    """Progress on stderr; yields its update function ``(done, total)``, or None when
    ``quiet``. On a terminal a bar (count, rate, time left), updated at most every
    ``BAR_UPDATE_EVERY_S``; elsewhere plain lines (``PlainProgress``), so a log or CI shows
    how far a long command is and how long is left."""
    if quiet:
        yield None
        return
    if not err().is_terminal:
        plain = PlainProgress(label, _plain_write)
        yield plain
        plain.end()  # not on an exception: its own line says why the pass stopped
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
        TextColumn("{task.fields[rate]}"),
        TimeRemainingColumn(),
        console=err(),
        transient=False,
    ) as bar:
        shown = _Bar(bar, label)
        yield shown
        shown.end()


class _Bar:
    """The terminal bar's callback: this pass's work, at most every ``BAR_UPDATE_EVERY_S``;
    a pass with nothing to do says so on a line of its own instead of a full bar."""

    def __init__(self, bar: Any, label: str) -> None:
        self.bar, self.label = bar, label
        self.task = bar.add_task(label, total=None, rate="")
        self.started, self.due, self.stored = time.monotonic(), 0.0, 0
        self.last: tuple[int, int] | None = None

    def begin(self, stored: int, total: int) -> None:
        self.stored = stored
        if stored >= total:
            line = nothing_to_do_line(self.label, stored, total)
            self.bar.console.print(line, markup=False, highlight=False)
            self.bar.update(self.task, visible=False)

    def __call__(self, done: int, total: int) -> None:
        done, total = done - self.stored, total - self.stored
        self.last = (done, total)
        now = time.monotonic()
        if now < self.due and done < total:
            return
        self.due = now + BAR_UPDATE_EVERY_S
        rate = done / (now - self.started) if now > self.started else 0.0
        self.bar.update(
            self.task, completed=done, total=total, rate=rate_text(rate) if rate else ""
        )

    def end(self) -> None:
        """A pass that ended short of its total says where on a line of its own."""
        if self.last is None or self.last[0] >= self.last[1]:
            return
        done, total = self.last
        self.bar.update(self.task, completed=done, total=total)
        line = short_line(self.label, done, total, time.monotonic() - self.started,
                          stored=self.stored)  # fmt: skip
        self.bar.console.print(line, markup=False, highlight=False)


# -- costs -----------------------------------------------------------------------------------

max_cost_option = click.option(
    "--max-cost",
    type=click.FloatRange(min=0),
    help="The most the run may spend in all, at the endpoint's prices (set "
    "input_price_per_mtok and output_price_per_mtok); what finished is kept. The bound is kept "
    "with the run: a rerun does not spend it again; give a higher --max-cost to go on.",
)
dry_run_option = click.option(
    "--dry-run",
    is_flag=True,
    help="Only say how many calls, tokens and how much money (live and at the batch price) "
    "the run would take; send and store nothing.",
)


def money(value: float | None) -> str:
    """A cost for people: four decimals, or 'unknown' (a missing price is never 0).

    >>> money(0.01234), money(None)
    ('0.0123', 'unknown')
    """
    return "unknown" if value is None else f"{value:.4f}"


def cost_line(cost: dict[str, Any]) -> str:
    """One line on what a run's tokens cost, live and at the batch price, e.g. 'cost: 0.0120
    (40 prompt + 20 completion tokens); at the batch price 0.0060'; the prompt tokens the
    prompt cache served are said beside the prompt tokens when there are any."""
    cached = cost.get("cached_prompt_tokens") or 0
    tokens = f"{cost['prompt_tokens']:,} prompt"
    tokens += f" ({cached:,} from the prompt cache)" if cached else ""
    tokens += f" + {cost['completion_tokens']:,} completion tokens"
    if cost.get("cost") is None:
        return f"cost: unknown ({tokens}): {cost.get('note') or 'the endpoint has no prices'}"
    return f"cost: {money(cost['cost'])} ({tokens}); at the batch price {money(cost['cost_batch'])}"


def estimate_lines(e: dict[str, Any], *, batch: bool = False) -> list[str]:
    """The token and cost lines of a dry run's estimate (``judge.costs.Estimate``): prompt and
    completion tokens, the cost live and at the batch price, and how each figure was got.
    ``batch``: the command would run with ``--batch``, so the batch price is what applies:
    it comes first and each cost line says which one the command would pay."""
    typical = e["completion_tokens_typical"]
    live = e["cost_typical"] if typical is not None else e["cost_min"]
    batch_cost = e["cost_typical_batch"] if typical is not None else e["cost_min_batch"]
    which = "" if typical is not None or e["cost_min"] is None else " (prompts alone)"
    completion = f"at most {e['completion_tokens_max']:,}"
    if typical is not None:
        completion += f", typically {typical:,}"
    lines = [f"prompt tokens: about {e['prompt_tokens']:,}; completion tokens: {completion}"]
    if e["cost_max"] is None:
        lines.append("cost: unknown (no prices for this endpoint)")
    elif batch:
        lines.append(
            f"cost at the batch price (what --batch pays): {money(batch_cost)}{which}, at most "
            f"{money(e['cost_max_batch'])}"
        )
        lines.append(
            f"cost live (without --batch; not this command): {money(live)}{which}, at most "
            f"{money(e['cost_max'])}"
        )
    else:
        lines.append(f"cost: {money(live)}{which}, at most {money(e['cost_max'])}")
        lines.append(
            f"cost at the batch price: {money(batch_cost)}{which}, at most "
            f"{money(e['cost_max_batch'])}"
        )
    if e.get("cost_max_cached") is not None and e.get("cached_prompt_tokens"):
        cached = e["cost_typical_cached"] if typical is not None else e["cost_min_cached"]
        lines.append(
            f"cost live if the prompt cache serves the {e['cached_prompt_tokens']:,} prompt "
            f"tokens it could: {money(cached)}{which}, at most {money(e['cost_max_cached'])}"
        )
    lines.append(e["note"])  # says which figures were measured and which assumed
    return lines


def print_lines(lines: Sequence[str]) -> None:
    """Lines as they are (no markup, no highlighting, never wrapped mid-line)."""
    from rich.text import Text

    for line in lines:
        out().print(Text(line), soft_wrap=True)


require_qualified_option = click.option(
    "--require-qualified/--allow-unqualified",
    "require_qualified",
    default=None,
    help="Refuse (exit 4, one line naming the rubric) unless the judge is validated for "
    "every rubric used (`fairjudge checks qualify`); default: [qualify] "
    "require_qualified (off).",
)


def requires_qualified(ctx_settings: Any, flag: bool | None) -> bool:
    """The option's value, or the config's default when it was not given."""
    return bool(ctx_settings.qualify.require_qualified) if flag is None else flag
