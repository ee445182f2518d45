"""``fairjudge jury RUN RUN...``: several judge runs of the same answers combined into a jury,
its agreement with people beside each judge's, whether it beats its best judge (a paired
interval over the rated items), and what it costs (``server.usecases.juries``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from server.cli.agreement import campaign_option
from server.cli.output import (
    ROW_ID,
    bootstrap_option,
    human_option,
    json_option,
    out,
    report_table,
    seed_option,
    writing,
)

if TYPE_CHECKING:
    from server.cli import Context

OPTION_OF = {"runs": "JUDGE_RUN", "campaigns": "--campaign", "n_bootstrap": "--bootstrap",
             "human_score": "--human-score"}  # fmt: skip


@click.command()
@click.argument("run_ids", nargs=-1, required=True, type=ROW_ID, metavar="JUDGE_RUN JUDGE_RUN...")
@click.option(
    "--combine",
    type=click.Choice(["mean", "median", "majority", "learnt"]),
    default="mean",
    show_default=True,
    help="How an item's judge scores combine: mean, median, majority (ties: the tied level "
    "nearest the judges' median, the lower of two equally near), or learnt (weights >= 0 "
    "summing to 1, learnt on the rated items with cross-fitting: each fold's jury scores "
    "use weights learnt on the other folds).",
)
@click.option(
    "--statistic",
    type=click.Choice(["spearman", "pearson", "kendall", "kappa_quadratic"]),
    default="spearman",
    show_default=True,
    help="The agreement statistic the jury and its best judge are compared on.",
)
@click.option(
    "--folds", type=int, default=5, show_default=True, help="With --combine learnt: the folds."
)
@bootstrap_option
@seed_option
@human_option
@campaign_option
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Also write jury.json here.",
)
@json_option
@click.pass_obj
def jury(
    ctx: Context,
    run_ids: tuple[int, ...],
    combine: str,
    statistic: str,
    folds: int,
    n_bootstrap: int,
    seed: int,
    human_score: str,
    campaigns: tuple[str, ...],
    out_dir: str | None,
    as_json: bool,
) -> None:
    """Combine judge runs of the same answers into a jury and say whether it agrees with
    people better than its best single judge, on the same rated items: each judge's and the
    jury's agreement with intervals, the paired bootstrap interval of jury minus best judge
    (better / not shown better / worse), and the jury's cost beside its best judge's."""
    from pydantic import ValidationError
    from rich.text import Text

    from server.usecases import session
    from server.usecases.juries import JuryRequest, jury_summary
    from server.usecases.juries import jury as make_jury

    fields = dict(runs=list(run_ids), combine=combine, statistic=statistic, folds=folds,
                  n_bootstrap=n_bootstrap, seed=seed, human_score=human_score,
                  campaigns=list(campaigns))  # fmt: skip
    try:
        request = JuryRequest.model_validate(fields)
    except ValidationError as exc:
        problems = [
            f"{OPTION_OF.get(str(e['loc'][0]), '--' + str(e['loc'][0]))}: {e['msg']}"
            for e in exc.errors()
        ]
        raise click.UsageError("; ".join(problems)) from None
    settings = ctx.settings()
    with session(ctx.engine(settings)) as db:
        result = make_jury(db, request, settings)
    data = result.to_dict()
    if out_dir:
        path = Path(out_dir) / "jury.json"
        with writing(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(data, indent=2), encoding="utf-8")
        data["paths"] = {"json": str(path)}
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    tables, lines = jury_summary(result)
    for t in tables:
        report_table(t, notes=True)
    for line in lines:
        out().print(Text(line), soft_wrap=False)
    if out_dir:
        out().print(f"written: {data['paths']['json']}")
