"""``fairjudge dashboard``: the dashboard's kept figures."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    judge's checks), so that the first person to open them does not wait. A job's worker
    does this by itself when the job ends ([server] warm_figures); this is for runs whose
    rows came in otherwise (an import, a command run without a job)."""
    from server.usecases.figures import warm_run

    settings = ctx.settings()
    engine = ctx.engine(settings)
    data = {str(run_id): warm_run(engine, settings, run_id) for run_id in run_ids}

    def render(d: dict[str, dict[str, Any]]) -> None:
        for run_id, pages in d.items():
            took = ", ".join(
                f"{page} {'kept already' if s == 0 else f'{s:.1f} s'}" for page, s in pages.items()
            )
            out().print(f"judge run {run_id}: {took}", highlight=False)

    emit(data, as_json, render)
