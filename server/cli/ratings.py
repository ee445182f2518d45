"""``fairjudge ratings``: human ratings collected outside Label Studio."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

from server.cli.output import emit, json_option, out

if TYPE_CHECKING:
    from judge.vocab import Scale
    from server.cli import Context


class ScaleType(click.ParamType):
    """``--scale``: text that ``judge.vocab.Scale.parse`` reads, or a usage error."""

    name = "scale"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from judge.vocab import Scale

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
    "--run", "run_id", type=int, required=True, help="Generation run the ratings are for."
)
@click.option("--replace", is_flag=True, help="Overwrite changed scores instead of refusing.")
@scale_option
@json_option
@click.pass_obj
def ratings_import(
    ctx: Context, file: str, run_id: int, replace: bool, scale: Scale, as_json: bool
) -> None:
    """Import FILE (CSV: item_id,rubric,rater,score[,rationale]); all or nothing. FairMonitor's
    rubrics are 1-5, so `agreement --run` compares ratings on that scale."""
    from annotation.ratings import import_ratings
    from judge.store.engine import session_scope
    from server.services import rubrics

    settings = ctx.settings()
    with session_scope(ctx.engine(settings)) as session:
        summary = import_ratings(
            session, file, run_id, rubrics(settings), replace=replace, scale=scale
        )
    emit(
        {**asdict(summary), "scale": str(scale)},
        as_json,
        lambda s: out().print(
            f"run {s['run']}: {s['added']} ratings added, {s['unchanged']} unchanged, "
            f"{s['replaced']} replaced ({s['raters']} raters, {s['items']} items)"
        ),
    )
