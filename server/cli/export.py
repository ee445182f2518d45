"""``fairjudge export``: a judge run's judgments and answers as CSV and JSON Lines files."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from server.cli.output import ROW_ID, emit, json_option, out, writing

if TYPE_CHECKING:
    from server.cli import Context


@click.command()
@click.argument("run_id", type=ROW_ID, metavar="JUDGE_RUN")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    required=True,
    help="Folder for judgments.csv/.jsonl and answers.csv/.jsonl.",
)
@click.option(
    "--format",
    "formats",
    default="csv,jsonl",
    show_default=True,
    help="File formats, comma-separated: csv, jsonl.",
)
@json_option
@click.pass_obj
def export(ctx: Context, run_id: int, out_dir: str, formats: str, as_json: bool) -> None:
    """Write every judgment of JUDGE_RUN (score or unscored reason, explanation, raw output,
    prompt hash, model, parameters, tokens) and every answer it judged, one row each."""
    from rich.text import Text

    from server.usecases.exports import export_formats, export_run

    chosen = export_formats(formats)  # a bad format fails before the store is opened
    with writing(out_dir):
        result = export_run(ctx.engine(), run_id, out_dir, formats=chosen)

    def render(_: object) -> None:
        out().print(
            Text(
                f"judge run {result.judge_run}: {result.judgments} judgments and "
                f"{result.answers} answers (generation run {result.generation_run}) written to "
                f"{', '.join(str(p) for p in result.files.values())}"
            )
        )

    emit(result.to_dict(), as_json, render)
