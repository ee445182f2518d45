"""``fairjudge responses``: answers produced elsewhere, imported as a generation run."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

from server.cli.output import emit, json_option, out

if TYPE_CHECKING:
    from server.cli import Context


@click.group()
def responses() -> None:
    """Answers produced elsewhere, judged like generated ones."""


@responses.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--dataset", required=True, metavar="NAME", help="Dataset whose items the answers are for."
)
@click.option(
    "--model",
    metavar="LABEL",
    help="Label of the model that wrote the answers (default: the file's model column, "
    "else 'external'). Each dataset and label has one imported run; later files add to it.",
)
@json_option
@click.pass_obj
def responses_import(
    ctx: Context, file: str, dataset: str, model: str | None, as_json: bool
) -> None:
    """Import FILE (.jsonl or .csv: item_id, part, text[, model, metadata]) into the imported
    run of DATASET and the model label; a file with any bad row is refused whole, every bad
    row listed. See docs/datasets.md, "Bringing your own answers"."""
    from server.usecases import import_responses

    settings = ctx.settings()
    summary = import_responses(ctx.engine(settings), settings, file, dataset, model=model)

    def render(s: dict[str, Any]) -> None:
        run = f"generation run {s['generation_run_id']}" + (" (new)" if s["created_run"] else "")
        out().print(
            f"{run}, dataset {s['dataset']}, model {s['model']}: {s['added']} answers added, "
            f"{s['unchanged']} already stored ({s['items']} items)",
            markup=False,
            highlight=False,
        )

    emit(asdict(summary), as_json, render)
