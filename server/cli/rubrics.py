"""``fairjudge rubrics``: register, list and show user-defined rubrics (``judge --rubrics``
applies them)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from server.cli.output import emit, json_option, out, table

if TYPE_CHECKING:
    from server.cli import Context


@click.group()
def rubrics() -> None:
    """Register, list and show your own rubrics (FILE in the shape of prompts/rubrics.toml)."""


@rubrics.command("add")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@json_option
@click.pass_obj
def rubrics_add(ctx: Context, file: Path, as_json: bool) -> None:
    """Check FILE and store its rubrics, all or none. An unchanged rubric adds nothing; a
    changed one becomes its name's next version."""
    from server.usecases import register_rubric

    stored = [r.to_dict() for r in register_rubric(ctx.engine(), file)]

    def render(rows: list[dict[str, Any]]) -> None:
        for r in rows:
            what = "stored as version" if r["created"] else "unchanged: already version"
            out().print(
                f"rubric {r['name']}: {what} {r['version']} (sha256 {r['text_hash'][:12]})",
                highlight=False,
            )

    emit(stored, as_json, render)


@rubrics.command("list")
@json_option
@click.pass_obj
def rubrics_list(ctx: Context, as_json: bool) -> None:
    """List registered rubrics (the latest version of each)."""
    from server.usecases import list_rubrics, session

    with session(ctx.engine()) as db:
        rows = [r.to_dict() for r in list_rubrics(db)]

    def render(data: list[dict[str, Any]]) -> None:
        table(
            "registered rubrics",
            [
                {
                    "name": d["name"],
                    "version": d["version"],
                    "title": d["definition"]["title"],
                    "levels": len(d["definition"]["levels"]),
                    "applies to": ", ".join(d["definition"]["applies_to"]),
                    "sha256": d["text_hash"][:12],
                }
                for d in data
            ],
        )
        out().print("built-in: the FairMonitor set (judge's default; prompts/rubrics.toml)")

    emit(rows, as_json, render)


@rubrics.command("show")
@click.argument("name")
@click.option("--version", type=click.IntRange(min=1), help="This version (default: the latest).")
@json_option
@click.pass_obj
def rubrics_show(ctx: Context, name: str, version: int | None, as_json: bool) -> None:
    """Show a registered rubric: its criterion, levels and the texts it compares."""
    from server.usecases import registered_rubric, session

    with session(ctx.engine()) as db:
        data = registered_rubric(db, name, version).to_dict()
    emit(data, as_json, _print_rubric)


def _print_rubric(d: dict[str, Any]) -> None:
    from rich.text import Text

    rubric = d["definition"]
    lines = [
        f"{d['name']}: {rubric['title']} (version {d['version']} of {d['versions']}, "
        f"sha256 {d['text_hash']})",
        f"applies to: {', '.join(rubric['applies_to'])}",
    ]
    if rubric["compares"]:
        lines.append(f"compares: {rubric['compares']}")
    criterion = "  " + rubric["criterion"].replace("\n", "\n  ")
    lines += ["criterion:", criterion, "levels:"]
    lines += [f"  {n} - {level}" for n, level in enumerate(rubric["levels"], start=1)]
    lines += ["texts:"] + [f"  {label}: {text}" for label, text in rubric["texts"]]
    out().print(Text("\n".join(lines)), soft_wrap=True)
