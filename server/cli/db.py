"""``fairjudge db``: the store's schema (Alembic migrations)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from server.cli.output import emit, json_option, out

if TYPE_CHECKING:
    from server.cli import Context


@click.group()
def db() -> None:
    """The database schema: see where it stands, bring it up to date."""


@db.command("upgrade")
@json_option
@click.pass_obj
def db_upgrade(ctx: Context, as_json: bool) -> None:
    """Apply every migration the database lacks (safe to run again; the server needs this
    after an update, other commands do it themselves)."""
    from server.usecases.store import upgrade_store

    data = upgrade_store(ctx.settings().database_url)

    def render(d: dict[str, object]) -> None:
        if d["changed"]:
            out().print(f"database upgraded from revision {d['before'] or 'none'} to {d['after']}")
        else:
            out().print(f"database already at the newest revision ({d['after']})")

    emit(data, as_json, render)


@db.command("current")
@json_option
@click.pass_obj
def db_current(ctx: Context, as_json: bool) -> None:
    """Show the database's schema revision and the newest this FairJudge knows."""
    from server.usecases.store import store_revision

    data = store_revision(ctx.settings().database_url)

    def render(d: dict[str, object]) -> None:
        state = "up to date" if d["up_to_date"] else "behind: run `fairjudge db upgrade`"
        out().print(
            f"{d['database']}: revision {d['revision'] or 'none'} ({state}; newest {d['head']})"
        )

    emit(data, as_json, render)
