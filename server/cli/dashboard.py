"""``fairjudge dashboard``: the dashboard's kept figures."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from server.cli.output import ROW_ID, emit, json_option, out

if TYPE_CHECKING:
    from server.cli import Context


@click.group()
def dashboard() -> None:
    """The dashboard's figures, kept in the store between page loads."""


@dashboard.command("warm")
@click.argument("run_ids", nargs=-1, required=True, type=ROW_ID, metavar="JUDGE_RUN...")
@json_option
@click.pass_obj
def warm(ctx: Context, run_ids: tuple[int, ...], as_json: bool) -> None:
    """Compute and keep the dashboard pages of these judge runs (report, agreement, the
    judge's checks) and what the API serves of them (report.json and .html, agreement), so
    that the first person to open them does not wait. A job worker does this by itself, off
    its job slots, when a job ends and when a run's rows change otherwise ([server]
    warm_figures); this is for when no worker runs."""
    from server.usecases.figures import warm_run

    settings = ctx.settings()
    engine = ctx.engine(settings)
    data = {str(run_id): warm_run(engine, settings, run_id) for run_id in run_ids}

    def render(d: dict[str, dict[str, float | None]]) -> None:
        for run_id, pages in d.items():
            took = ", ".join(f"{page} {_took(s)}" for page, s in pages.items())
            out().print(f"judge run {run_id}: {took}", highlight=False)

    emit(data, as_json, render)


def _took(seconds: float | None) -> str:
    if seconds is None:
        return "nothing to keep (its answer is an error, e.g. no ratings)"
    return "kept already" if seconds == 0 else f"{seconds:.1f} s"
