"""``fairjudge keys``: the web API's keys (create, list, revoke)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

from server.cli.output import emit, err, json_option, out, table

if TYPE_CHECKING:
    from server.cli import Context


@click.group()
def keys() -> None:
    """API keys: admins manage keys and endpoints, members run jobs and read results."""


@keys.command("create")
@click.option("--name", required=True, help="Who or what uses the key (unique).")
@click.option(
    "--role",
    type=click.Choice(["admin", "member"]),
    default="member",
    show_default=True,
    help="admin: also manages keys and endpoints; member: runs jobs and reads results.",
)
@json_option
@click.pass_obj
def keys_create(ctx: Context, name: str, role: str, as_json: bool) -> None:
    """Create a key and print it once: only its hash is stored, so it cannot be shown again."""
    from server.auth import create_key

    info, raw = create_key(ctx.engine(), name, role)

    def render(_: Any) -> None:
        err().print(f"{info.role} key {info.name!r} created; store it now, it is not shown again:")
        out().print(raw, highlight=False)

    emit({"name": info.name, "role": info.role, "key": raw}, as_json, render)


@keys.command("list")
@json_option
@click.pass_obj
def keys_list(ctx: Context, as_json: bool) -> None:
    """List keys (name, role, the key's first characters, when used or revoked)."""
    from sqlmodel import Session

    from server.auth import list_keys

    with Session(ctx.engine()) as session:
        rows = [_row(asdict(k)) for k in list_keys(session)]
    emit(rows, as_json, lambda r: table("API keys", r))


@keys.command("revoke")
@click.argument("name")
@json_option
@click.pass_obj
def keys_revoke(ctx: Context, name: str, as_json: bool) -> None:
    """Revoke the key called NAME: requests with it are refused from now on."""
    from server.auth import revoke_key

    info = _row(asdict(revoke_key(ctx.engine(), name)))
    emit(info, as_json, lambda r: out().print(f"key {r['name']!r} revoked at {r['revoked_at']}"))


def _row(data: dict[str, Any]) -> dict[str, Any]:
    return {
        k: (v.isoformat(timespec="seconds") if hasattr(v, "isoformat") else v)
        for k, v in data.items()
    }
