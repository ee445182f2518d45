"""``fairjudge serve``: the web API on Flask's development server."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from server.cli import Context


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=5000, show_default=True, type=int)
@click.pass_obj
def serve(ctx: Context, host: str, port: int) -> None:
    """Run the FairJudge web API (development server)."""
    from server import create_app

    create_app({"SETTINGS": ctx.settings()}).run(host=host, port=port)
