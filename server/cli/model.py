"""``fairjudge model``: start, stop and inspect the embedded local model server.

These print plain lines with click (not rich), so ``model status`` starts quickly."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

from server.cli.output import emit, json_option

if TYPE_CHECKING:
    from server.cli import Context
    from server.usecases.servers import EmbeddedServer, MeasuredSpeed


@click.group()
def model() -> None:
    """Manage the embedded local model server."""


def _server(ctx: Context) -> EmbeddedServer:
    from server.usecases.servers import embedded_server

    return embedded_server(ctx.settings())


@model.command("serve")
@json_option
@click.pass_obj
def model_serve(ctx: Context, as_json: bool) -> None:
    """Start the embedded model server (no-op when it already runs)."""
    status = _server(ctx).start()
    emit(
        asdict(status),
        as_json,
        lambda s: click.echo(
            f"embedded model {', '.join(s['models'])} answers at {s['url']} (pid {s['pid']})"
        ),
    )


@model.command("stop")
@click.pass_obj
def model_stop(ctx: Context) -> None:
    """Stop the embedded model server started from this state folder."""
    stopped = _server(ctx).stop()
    click.echo("stopped" if stopped else "no embedded model server was running")


@model.command("status")
@json_option
@click.pass_obj
def model_status(ctx: Context, as_json: bool) -> None:
    """Say which model is served, where, whether it answers, and how fast it has been on this
    machine (prompt and generation tokens per second, from the server's log)."""
    status = _server(ctx).status()

    def render(s: dict[str, Any]) -> None:
        state = "answers" if s["answers"] else "does not answer"
        click.echo(
            f"{s['url']} {state}; models: {', '.join(s['models']) or '-'}; "
            f"pid: {s['pid'] or '-'}; file: {s['model_file'] or 'not installed'}"
        )
        click.echo(speed_line(status.speed))

    emit(asdict(status), as_json, render)


def speed_line(speed: MeasuredSpeed) -> str:
    """e.g. 'speed: prompt 125 tokens/s, generation 61 tokens/s (last 40 requests on this
    machine)', or that nothing was measured yet."""
    if not speed.requests:
        return "speed: not measured yet (no request served since the log began)"

    def rate(value: float | None) -> str:
        return "-" if value is None else f"{value:,.0f} tokens/s"

    requests = "request" if speed.requests == 1 else f"{speed.requests} requests"
    return (
        f"speed: prompt {rate(speed.prompt_tokens_per_s)}, generation "
        f"{rate(speed.generation_tokens_per_s)} (last {requests} on this machine)"
    )
