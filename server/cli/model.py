"""``fairjudge model``: start, stop and inspect the embedded local model server."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

from server.cli.output import emit, json_option, out

if TYPE_CHECKING:
    from judge.models.embedded import EmbeddedServer
    from server.cli import Context


@click.group()
def model() -> None:
    """Manage the embedded local model server."""


def _server(ctx: Context) -> EmbeddedServer:
    from judge.models.embedded import EmbeddedServer

    settings = ctx.settings()
    return EmbeddedServer(settings.embedded, settings.state_dir)


@model.command("serve")
@json_option
@click.pass_obj
def model_serve(ctx: Context, as_json: bool) -> None:
    """Start the embedded model server (no-op when it already runs)."""
    status = _server(ctx).start()
    emit(
        asdict(status),
        as_json,
        lambda s: out.print(
            f"embedded model {', '.join(s['models'])} answers at {s['url']} (pid {s['pid']})"
        ),
    )


@model.command("stop")
@click.pass_obj
def model_stop(ctx: Context) -> None:
    """Stop the embedded model server started from this state folder."""
    stopped = _server(ctx).stop()
    out.print("stopped" if stopped else "no embedded model server was running")


@model.command("status")
@json_option
@click.pass_obj
def model_status(ctx: Context, as_json: bool) -> None:
    """Say which model is served, where, and whether it answers."""
    status = _server(ctx).status()

    def render(s: dict[str, Any]) -> None:
        state = "answers" if s["answers"] else "does not answer"
        out.print(
            f"{s['url']} {state}; models: {', '.join(s['models']) or '-'}; "
            f"pid: {s['pid'] or '-'}; file: {s['model_file'] or 'not installed'}"
        )

    emit(asdict(status), as_json, render)
