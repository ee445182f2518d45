"""``fairjudge agreement``: judge reliability against the stored human ratings, and
``agreement compute`` for ratings and judge scores kept in the user's own CSV files. Both
ask ``server.usecases.agreement``; ``--json`` gives the shape the web API's agreement route
gives. ``agreement alt-test`` asks ``server.usecases.alttest`` whether the judge may replace
the annotators, on the stored ratings or on the same files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from server.cli.output import (
    ROW_ID,
    bootstrap_option,
    emit,
    human_option,
    json_option,
    out,
    report_table,
    seed_option,
    table,
    writing,
)
from server.cli.ratings import ScaleType, scale_option

campaign_option = click.option(
    "--campaign",
    "campaigns",
    multiple=True,
    metavar="NAME",
    help="Use only this campaign's ratings (repeatable; import:BATCH for an imported batch). "
    "Default: every campaign and batch, the newest winning per rater, item and rubric.",
)

if TYPE_CHECKING:
    from pydantic import BaseModel

    from judge.vocab import Scale
    from server.cli import Context
    from server.usecases.agreement import Agreement
    from server.usecases.alttest import AltTestReport

R = TypeVar("R", bound="BaseModel")


def print_reliability(result: Agreement) -> None:
    """FairMonitor's Table 3 for three coefficients, raw agreement beside chance (with the
    flags), the humans' agreement among themselves (alphas, Fleiss' kappa, pairwise kappa and
    AC1), then one reading per rubric x judge."""
    from rich.text import Text

    for t in result.tables():
        report_table(t, notes=True)  # the chance table's legend says what its columns are
    for line in result.readings():
        out().print(Text(line))


def write_agreement(result: Agreement, out_dir: str) -> list[Path]:
    """agreement.json and one scatter + confusion PNG per rubric x judge run with data."""
    from server.usecases.rendering import figure_png

    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / "agreement.json"]
    paths[0].write_text(json.dumps(result.to_dict(), indent=2, default=str), encoding="utf-8")
    for rubric, judge_run, plot in result.plots():
        png = folder / f"agreement_{rubric}_judge{judge_run}.png"
        png.write_bytes(figure_png(plot))
        paths.append(png)
    return paths


@click.group(invoke_without_command=True)
@click.option("--run", "run_id", type=ROW_ID, help="Generation run whose judges to validate.")
@bootstrap_option
@seed_option
@human_option
@click.option(
    "--target-half-width",
    type=float,
    default=0.1,
    show_default=True,
    help="Half the CI's width (upper minus lower bound, over 2) to aim for when estimating "
    "how many items to rate.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Also write agreement.json and plots here.",
)
@click.option(
    "--group-by",
    help="Also correlate within groups of rated items and average over the groups: stage, "
    "factor, scenario or fields.NAME (a field of the items' texts, e.g. their document).",
)
@campaign_option
@json_option
@click.pass_context
def agreement(
    click_ctx: click.Context,
    run_id: int | None,
    n_bootstrap: int,
    seed: int,
    human_score: str,
    target_half_width: float,
    out_dir: str | None,
    group_by: str | None,
    campaigns: tuple[str, ...],
    as_json: bool,
) -> None:
    """Judge reliability: every judge run of a generation run against the human ratings.

    Without --campaign every campaign and import batch of the run counts; where several
    rated the same item and rubric by the same person, the newest campaign's rating is used.
    The output names the campaigns it used."""
    if click_ctx.invoked_subcommand is not None:
        return
    if run_id is None:
        raise click.UsageError("give --run GENERATION_RUN, or use `agreement compute`")
    from server.usecases.agreement import AgreementRequest
    from server.usecases.standing import agreement_with_standing_in

    ctx: Context = click_ctx.obj
    request = _request(
        AgreementRequest,
        generation_run=run_id,
        campaigns=list(campaigns),
        n_bootstrap=n_bootstrap,
        seed=seed,
        human_score=human_score,
        target_half_width=target_half_width,
        group_by=group_by,
    )
    result = agreement_with_standing_in(ctx.engine(), request)
    data = result.to_dict()
    if out_dir:
        with writing(out_dir):
            data["files"] = [str(p) for p in write_agreement(result, out_dir)]
    emit(data, as_json, lambda _: print_reliability(result))


@agreement.command("compute")
@click.option(
    "--human",
    "human_csv",
    type=click.Path(dir_okay=False),
    required=True,
    help="Long-format CSV: item_id,rater,score (other columns allowed).",
)
@click.option(
    "--judge",
    "judge_csv",
    type=click.Path(dir_okay=False),
    help="CSV: item_id,score (several rows per item = samples, averaged).",
)
@click.option("--group-by", help="Column of HUMAN.csv to compute grouped correlations by.")
@scale_option
@bootstrap_option
@seed_option
@human_option
@json_option
def agreement_compute(
    human_csv: str,
    judge_csv: str | None,
    group_by: str | None,
    scale: Scale,
    n_bootstrap: int,
    seed: int,
    human_score: str,
    as_json: bool,
) -> None:
    """Agreement for your own files: human vs human, and judge vs human with --judge.

    Human and judge scores lie on one rating scale: --scale, 1-5 unless given.
    """
    from server.usecases.agreement import AgreementOptions, files_agreement, files_table

    options = _request(
        AgreementOptions, n_bootstrap=n_bootstrap, seed=seed, human_score=human_score
    )
    result = files_agreement(human_csv, judge_csv, group_by=group_by, scale=scale, options=options)

    def render(_: object) -> None:
        from rich.text import Text

        t = files_table(result)
        table(t.title, [dict(zip(t.columns, row, strict=True)) for row in t.rows])
        for note in t.notes:  # the agreement's flags, then what the baseline is
            out().print(Text(note))

    emit(result.to_dict(), as_json, render)


@agreement.command("alt-test")
@click.option(
    "--judge-run",
    "judge_run",
    type=ROW_ID,
    help="Test this judge run against the stored ratings of its generation run.",
)
@click.option("--rubric", help="Only this rubric (default: every rubric with ratings).")
@campaign_option
@click.option(
    "--human",
    "human_csv",
    type=click.Path(dir_okay=False),
    help="Instead of a judge run: long-format CSV item_id,rater,score (with --judge).",
)
@click.option(
    "--judge",
    "judge_csv",
    type=click.Path(dir_okay=False),
    help="CSV item_id,score (several rows per item = samples, averaged); with --human.",
)
@click.option(
    "--scale",
    type=ScaleType(),
    default=None,
    metavar="SCALE",
    help="With --human/--judge: their rating scale (LOW-HIGH, 0/1, 1,2,3 or named levels); "
    "1-5 unless given.",
)
@click.option(
    "--epsilon",
    required=True,
    metavar="expert|skilled|crowd|FLOAT",
    help="How far the judge may trail an annotator for its lower cost to pay: expert 0.2, "
    "skilled 0.15, crowd 0.1, or a number in (0, 1). Required: a verdict means nothing "
    "without it.",
)
@click.option(
    "--alpha",
    type=float,
    default=0.05,
    show_default=True,
    help="False discovery rate over the annotators (Benjamini-Yekutieli).",
)
@click.option(
    "--alignment",
    type=click.Choice(["neg_rmse", "neg_mae", "accuracy"]),
    default="neg_rmse",
    show_default=True,
    help="How close a score is to the other annotators': neg_rmse or neg_mae for numbers, "
    "accuracy for categories.",
)
@click.option(
    "--min-items",
    "min_items",
    type=int,
    default=30,  # judge.stats.alttest.MIN_ITEMS, the authors' rule (a test keeps them equal)
    show_default=True,
    help="Refuse when an annotator shares fewer items with the others. 30 is the authors' "
    "rule; a lower number gives verdicts their procedure does not, and the output says so.",
)
@json_option
@click.pass_obj
def agreement_alt_test(
    ctx: Context,
    judge_run: int | None,
    rubric: str | None,
    campaigns: tuple[str, ...],
    human_csv: str | None,
    judge_csv: str | None,
    scale: Scale | None,
    epsilon: str,
    alpha: float,
    alignment: str,
    min_items: int,
    as_json: bool,
) -> None:
    """The Alternative Annotator Test: may the judge replace the annotators?

    Each annotator is left out in turn; on the items they rated, is the judge closer to the
    other annotators than they are, up to EPSILON? The judge passes when it wins against at
    least half of them (omega >= 0.5). Needs three annotators or more, each with
    --min-items items shared with another; otherwise the test is refused (exit 1).

    Give --judge-run (stored ratings; --campaign, --rubric) or --human and --judge (files).
    """
    from server.usecases.alttest import (
        AltTestOptions,
        AltTestRequest,
        alt_test_files,
        alt_test_in,
    )

    files = human_csv is not None or judge_csv is not None
    if (judge_run is not None) == files or (files and (human_csv is None or judge_csv is None)):
        raise click.UsageError("give --judge-run RUN, or both --human FILE and --judge FILE")
    if files and (rubric or campaigns):
        raise click.UsageError("--rubric and --campaign choose stored ratings: use --judge-run")
    if not files and scale is not None:
        raise click.UsageError("--scale is for --human/--judge files; stored ratings keep theirs")
    options = dict(epsilon=epsilon, alpha=alpha, alignment=alignment, min_items=min_items)
    if files:
        assert human_csv is not None and judge_csv is not None
        report = alt_test_files(
            human_csv, judge_csv, _request(AltTestOptions, **options), scale=scale
        )
    else:
        request = _request(
            AltTestRequest, judge_run=judge_run, rubric=rubric, campaigns=list(campaigns), **options
        )
        report = alt_test_in(ctx.engine(), request)
    emit(report.to_dict(), as_json, lambda _: print_alt_test(report))


def print_alt_test(report: AltTestReport) -> None:
    """Each rubric's table of annotators, then one line per rubric: its verdict or why it
    was refused."""
    from rich.text import Text

    for t in report.tables():
        report_table(t)
    for line in report.lines():
        out().print(Text(line))


def _request(model: type[R], **fields: Any) -> R:
    """``model`` built from the options; a value it refuses is a usage error naming it."""
    from pydantic import ValidationError

    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(f"{_option(e['loc'])}: {e['msg']}" for e in exc.errors())
        raise click.UsageError(problems) from None


def _option(loc: tuple[int | str, ...]) -> str:
    """The option that sets a request's field."""
    name = str(loc[0]) if loc else ""
    return {"n_bootstrap": "--bootstrap", "generation_run": "--run", "campaigns": "--campaign"}.get(
        name, "--" + name.replace("_", "-")
    )
