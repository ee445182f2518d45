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
    from judge.store.engine import upgrade

    done = upgrade(ctx.settings().database_url)
    data = {"before": done.before, "after": done.after, "changed": done.changed}

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
    from judge.store.engine import head_revision, masked, revision_at

    url = ctx.settings().database_url
    revision = revision_at(url)
    head = head_revision()
    data = {
        "database": masked(url),
        "revision": revision,
        "head": head,
        "up_to_date": revision == head,
    }

    def render(d: dict[str, object]) -> None:
        state = "up to date" if d["up_to_date"] else "behind: run `fairjudge db upgrade`"
        out().print(
            f"{d['database']}: revision {d['revision'] or 'none'} ({state}; newest {d['head']})"
        )

    emit(data, as_json, render)
