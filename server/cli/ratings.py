"""``fairjudge ratings``: human ratings collected outside Label Studio."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

from judge.vocab import Scale
from server.cli.output import ROW_ID, emit, json_option, out

if TYPE_CHECKING:
    from server.cli import Context


class ScaleType(click.ParamType):
    """``--scale``: text that ``judge.vocab.Scale.parse`` reads, or a usage error."""

    name = "scale"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, Scale):
            return value
        try:
            return Scale.parse(value)
        except ValueError as exc:
            raise click.UsageError(str(exc), ctx) from None


scale_option = click.option(
    "--scale",
    type=ScaleType(),
    default="1-5",
    show_default=True,
    metavar="SCALE",
    help="Rating scale: LOW-HIGH (whole numbers, e.g. 0-3, 1-7, 1-10), 0/1 (two levels), "
    "1,2,3 (the levels) or poor,fair,good (named levels, coded 1, 2, 3). A score "
    "outside it is refused with its line number.",
)


@click.group()
def ratings() -> None:
    """Human ratings collected outside Label Studio."""


@ratings.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--run", "run_id", type=ROW_ID, required=True, help="Generation run the ratings are for."
)
@click.option("--replace", is_flag=True, help="Overwrite changed scores instead of refusing.")
@click.option(
    "--scale",
    type=ScaleType(),
    default=None,
    metavar="SCALE",
    help="How FILE writes scores, when not as the rubric's level numbers: e.g. "
    "poor,fair,good for a rubric of three levels (coded 1, 2, 3). It must have as many "
    "levels as each rubric FILE rates. Default: each rubric's own scale (1-5 for "
    "FairMonitor's rubrics, 1..N for a registered rubric of N levels).",
)
@click.option(
    "--batch",
    metavar="NAME",
    help="The import batch the ratings belong to (default: 'default'); importing the same "
    "rows into the same batch again changes nothing.",
)
@json_option
@click.pass_obj
def ratings_import(
    ctx: Context,
    file: str,
    run_id: int,
    replace: bool,
    scale: Scale | None,
    batch: str | None,
    as_json: bool,
) -> None:
    """Import FILE (CSV: item_id,rubric,rater,score[,rationale]); all or nothing.

    Every bad line is named. A rubric is a built-in one or one registered with `rubrics add`,
    and each score lies on its rubric's scale."""
    from server.usecases.ratings import import_ratings_file

    settings = ctx.settings()
    summary = import_ratings_file(
        ctx.engine(settings), settings, file, run_id, replace=replace, scale=scale, batch=batch
    )
    emit(
        {**asdict(summary), "scale": "each rubric's own" if scale is None else str(scale)},
        as_json,
        lambda s: out().print(
            f"run {s['run']}: {s['added']} ratings added, {s['unchanged']} unchanged, "
            f"{s['replaced']} replaced ({s['raters']} raters, {s['items']} items)"
        ),
    )
