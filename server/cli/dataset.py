"""``fairjudge dataset``: import, list, show and export FairMonitor item files."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING

import click

from server.cli.output import emit, err, json_option, out, table, writing

if TYPE_CHECKING:
    from server.cli import Context


@click.group()
def dataset() -> None:
    """Import, list, show and export FairMonitor item files."""


@dataset.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--name", help="Dataset name (default: the file name without extension).")
@click.option(
    "--allow-unmapped",
    is_flag=True,
    help="Do not warn about factor-scenario pairs outside FairMonitor's table.",
)
@json_option
@click.pass_obj
def dataset_import(
    ctx: Context, file: str, name: str | None, allow_unmapped: bool, as_json: bool
) -> None:
    """Import FILE (JSONL); a file with any bad line is rejected whole."""
    from server.services import import_dataset

    summary = import_dataset(ctx.engine(), file, name, allow_unmapped=allow_unmapped)

    def render(s: dict[str, object]) -> None:
        from rich.text import Text

        out().print(
            f"dataset {s['dataset']}: {s['added']} added, {s['unchanged']} already present, "
            f"{s['total']} in all"
        )
        for warning in summary.warnings:
            err().print(Text(f"warning: {warning}"))
        if summary.warnings:
            err().print("(pass --allow-unmapped to import such pairs without warnings)")

    emit(asdict(summary), as_json, render)


@dataset.command("list")
@json_option
@click.pass_obj
def dataset_list(ctx: Context, as_json: bool) -> None:
    """List datasets with their item counts."""
    from judge.data.catalog import list_datasets
    from judge.store.engine import session_scope

    with session_scope(ctx.engine()) as session:
        rows = [asdict(info) for info in list_datasets(session)]
    emit(rows, as_json, lambda r: table("datasets", r))


@dataset.command("show")
@click.argument("name")
@json_option
@click.pass_obj
def dataset_show(ctx: Context, name: str, as_json: bool) -> None:
    """Show counts per stage and factor, and which factor x stage cells are empty."""
    from judge.data.catalog import describe_dataset
    from judge.store.engine import session_scope

    with session_scope(ctx.engine()) as session:
        info = asdict(describe_dataset(session, name))
    emit(info, as_json, lambda i: out().print_json(json.dumps(i)))


@dataset.command("export")
@click.argument("name")
@click.argument("file", type=click.Path(dir_okay=False))
@json_option
@click.pass_obj
def dataset_export(ctx: Context, name: str, file: str, as_json: bool) -> None:
    """Write dataset NAME to FILE in the import format."""
    from judge.data.catalog import export_items
    from judge.store.engine import session_scope

    with session_scope(ctx.engine()) as session, writing(file):
        n = export_items(session, name, file)
    emit(
        {"dataset": name, "items": n, "file": file},
        as_json,
        lambda d: out().print(f"wrote {d['items']} items to {d['file']}"),
    )
