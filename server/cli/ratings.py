"""``fairjudge ratings``: human ratings collected outside Label Studio."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

import click

from server.cli.output import emit, json_option, out

if TYPE_CHECKING:
    from server.cli import Context


@click.group()
def ratings() -> None:
    """Human ratings collected outside Label Studio."""


@ratings.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--run", "run_id", type=int, required=True, help="Generation run the ratings are for."
)
@click.option("--replace", is_flag=True, help="Overwrite changed scores instead of refusing.")
@json_option
@click.pass_obj
def ratings_import(ctx: Context, file: str, run_id: int, replace: bool, as_json: bool) -> None:
    """Import FILE (CSV: item_id,rubric,rater,score[,rationale]); all or nothing."""
    from annotation.ratings import import_ratings
    from judge.store.engine import session_scope
    from server.services import rubrics

    settings = ctx.settings()
    with session_scope(ctx.engine(settings)) as session:
        summary = import_ratings(session, file, run_id, rubrics(settings), replace=replace)
    emit(
        asdict(summary),
        as_json,
        lambda s: out.print(
            f"run {s['run']}: {s['added']} ratings added, {s['unchanged']} unchanged, "
            f"{s['replaced']} replaced ({s['raters']} raters, {s['items']} items)"
        ),
    )
