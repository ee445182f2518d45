"""``fairjudge judgments``: pairwise judgments made elsewhere (a published study's, one's own
A/B comparisons), imported and checked for position bias; see docs/pairwise.md."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from server.cli.output import emit, grid, json_option, out

if TYPE_CHECKING:
    from server.cli import Context


@click.group()
def judgments() -> None:
    """Pairwise judgments made elsewhere: import, position bias, win rates, Bradley-Terry."""


@judgments.command("import")
@click.argument("source", type=click.Path(exists=True))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["shi2024", "csv", "jsonl"]),
    required=True,
    help="shi2024: Shi et al.'s record files (a .tsv or .tsv.gz, or a folder of them); "
    "csv/jsonl: question, model_a, model_b, verdict[, judge, repetition, category, raw].",
)
@click.option(
    "--judge",
    metavar="LABEL",
    help="The judge's label (csv/jsonl: required unless the file has a judge column; "
    "shi2024: replaces the judge named by the file's last column).",
)
@click.option(
    "--repetition",
    type=click.IntRange(min=1),
    help="shi2024: the repetition of every file (default: the N of a RepetitionN_ file name, "
    "else 1).",
)
@click.option(
    "--models",
    metavar="A,B,...",
    help="The models the file may name, comma-separated: any other is a problem.",
)
@json_option
@click.pass_obj
def judgments_import(
    ctx: Context,
    source: str,
    fmt: str,
    judge: str | None,
    repetition: int | None,
    models: str | None,
    as_json: bool,
) -> None:
    """Import the pairwise judgments of SOURCE, every pair judged in both orders. A source
    with any problem (one order missing, a verdict outside A/B/tie/unreadable, an unknown
    model, a judgment already stored) is refused whole, every problem listed."""
    from server.usecases.pairwise import import_judgments

    names = [m.strip() for m in models.split(",") if m.strip()] if models else None
    summary = import_judgments(
        ctx.engine(), source, fmt, judge=judge, repetition=repetition, models=names
    )

    def render(s: dict[str, Any]) -> None:
        out().print(
            f"import {s['import_id']}: {s['records']} judgments from {s['files']} file(s), "
            f"{len(s['judges'])} judge(s), {len(s['models'])} models, {s['questions']} "
            f"questions, repetitions {', '.join(map(str, s['repetitions']))}; "
            f"{s['unreadable']} unreadable verdicts kept as such",
            markup=False,
            highlight=False,
        )

    emit(summary, as_json, render)


def _ci(value: float | None, ci: list[float | None], fmt: str) -> str:
    if value is None:
        return "n/a"
    low, high = ci
    text = f"{value:{fmt}}"
    return text if low is None or high is None else f"{text} [{low:{fmt}}, {high:{fmt}}]"


def render_figures(result: dict[str, Any]) -> None:
    """The position figures of ``judgments position`` for people (also after ``judge-pairs``)."""
    pct = int(round(result["level"] * 100))
    head = [
        "judge", "pairs", f"position consistency [{pct} % CI]",
        f"preference fairness [{pct} % CI]", "consistent / primacy / recency",
        "repetition stability", "unreadable pairs", "flag",
    ]  # fmt: skip
    body = []
    for j in result["judges"]:
        rs = j["repetition_stability"]
        body.append([
            j["judge"], str(j["pairs"]),
            _ci(j["position_consistency"], j["position_consistency_ci"], ".1%"),
            _ci(j["preference_fairness"], j["preference_fairness_ci"], "+.3f"),
            f"{j['consistent']} / {j['primacy_preferring']} / {j['recency_preferring']}",
            "n/a" if rs is None else f"{rs:.1%}", str(j["unreadable_pairs"]),
            f"FLAGGED ({', '.join(j['flag_reasons'])})" if j["flagged"] else "",
        ])  # fmt: skip
    grid("Position bias per judge (each pair judged in both orders)", head, body)
    for j in result["judges"]:
        rates = [
            [
                f"{r['model']} vs {r['other']}", str(r["pairs"]),
                _ci(r["wins_rate"], r["wins_rate_ci"], ".1%"),
                _ci(r["ties_rate"], r["ties_rate_ci"], ".1%"),
                _ci(r["losses_rate"], r["losses_rate_ci"], ".1%"),
                str(r["inconsistent"]), str(r["unreadable"]),
            ]
            for r in j["win_rates"]
        ]  # fmt: skip
        grid(
            f"{j['judge']}: win / tie / loss rates [{pct} % Wilson]",
            ["pair", "pairs", "win", "tie", "loss", "inconsistent", "unreadable"],
            rates,
        )
        if j["bradley_terry"] is None:
            out().print(f"{j['judge']}: Bradley-Terry: {j['bradley_terry_note']}", markup=False)
            continue
        bt = [[s["model"], _ci(s["strength"], s["ci"], "+.3f")] for s in j["bradley_terry"]]
        grid(f"{j['judge']}: Bradley-Terry strengths [{pct} % CI]", ["model", "strength"], bt)
        out().print(j["bradley_terry_note"], markup=False, highlight=False)
    for note in result["notes"]:
        out().print(note, markup=False, highlight=False)


@judgments.command("position")
@click.option("--judge", metavar="LABEL", help="Only this judge (default: every judge).")
@click.option(
    "--inconsistent",
    type=click.Choice(["tie", "apart"]),
    default="tie",
    show_default=True,
    help="An inconsistent pair (the verdict follows the position): counted as a tie, or kept "
    "apart (left out of win rates and Bradley-Terry, counted on its own).",
)
@click.option(
    "--bootstrap",
    "n_bootstrap",
    type=click.IntRange(100, 10_000),
    default=1000,
    show_default=True,
    help="Bootstrap resamples of each interval.",
)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option(
    "--level",
    type=click.FloatRange(0.5, 1, min_open=True, max_open=True),
    default=0.95,
    show_default=True,
    help="Confidence of the intervals shown (the flags use Bonferroni's over the judges).",
)
@json_option
@click.pass_obj
def judgments_position(
    ctx: Context,
    judge: str | None,
    inconsistent: str,
    n_bootstrap: int,
    seed: int,
    level: float,
    as_json: bool,
) -> None:
    """Per judge: position consistency, preference fairness and repetition stability (Shi et
    al. 2024), win / tie / loss rates per model pair with Wilson intervals, and Bradley-Terry
    strengths (three models or more) with bootstrap intervals."""
    from server.usecases import session
    from server.usecases.pairwise import PositionOptions, pairwise_position

    options = PositionOptions.model_validate(
        {
            "judge": judge,
            "inconsistent": inconsistent,
            "n_bootstrap": n_bootstrap,
            "seed": seed,
            "level": level,
        }
    )
    with session(ctx.engine()) as s:
        result = pairwise_position(s, options)
    emit(result, as_json, render_figures)
