"""``fairjudge checks``: checks on the judge itself. ``counterfactual`` judges a copy of a
judge run's answers with sensitive words swapped and compares the scores; ``show`` prints a
judge run's diagnostics (self-preference, counterfactual copies, order, length)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

from judge.errors import IncompleteError
from judge.vocab import RunStatus
from server.cli.output import (
    ROW_ID,
    cost_line,
    dry_run_option,
    emit,
    err,
    estimate_lines,
    json_option,
    max_cost_option,
    out,
    print_lines,
    progress_bar,
    report_table,
    require_qualified_option,
    requires_qualified,
)

if TYPE_CHECKING:
    from server.cli import Context
    from server.usecases.rendering import Report

SWAP_CHOICES = ("names", "gender", "race", "all")

judge_run_option = click.option(
    "--judge-run", "judge_run_id", type=ROW_ID, required=True, metavar="RUN",
    help="The judge run to check (`fairjudge runs` lists them).",
)  # fmt: skip
tolerance_option = click.option(
    "--tolerance",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Flag only a shift whose mean size exceeds this (besides being significant).",
)
margin_option = click.option(
    "--margin",
    type=click.FloatRange(min=0, min_open=True),
    default=0.25,
    show_default=True,
    help="Counterfactual equivalence margin in score points: a row not flagged is called "
    "'no shift larger than MARGIN' when two one-sided tests rule out a larger one, "
    "'inconclusive' otherwise.",
)
out_option = click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Also write report.html (tables and plots), report.json and CSV files here.",
)


@click.group("checks")
def checks() -> None:
    """Check the judge's own biases: counterfactual swaps, order, length, self-preference."""


@checks.command()
@judge_run_option
@click.option(
    "--swap",
    type=click.Choice(SWAP_CHOICES),
    multiple=True,
    required=True,
    help="Words to swap: first names across groups, gendered words, group words, or all "
    "(repeat the option for several).",
)
@click.option(
    "--swaps",
    "swaps_file",
    type=click.Path(dir_okay=False),
    help="A swap list of your own (KIND WORD WORD per line; default: the bundled "
    "datasets/counterfactual_swaps.txt).",
)
@click.option(
    "--swap-in",
    type=click.Choice(("answers", "questions", "both")),
    default="both",
    show_default=True,
    help="Where to swap the words: in the answers, in the questions (the item's texts the "
    "judge is shown beside the answers), or both. Answers alone cannot show a judge swayed by "
    "the question's wording.",
)
@click.option("--limit", type=click.IntRange(min=1), help="Only the first N items with a swap.")
@max_cost_option
@dry_run_option
@tolerance_option
@margin_option
@click.option(
    "--allow-failures",
    is_flag=True,
    help="Exit 0 even if some judgments of the copy failed (its status is printed).",
)
@out_option
@json_option
@click.pass_obj
def counterfactual(
    ctx: Context, judge_run_id: int, swap: tuple[str, ...], swaps_file: str | None,
    swap_in: str, limit: int | None, max_cost: float | None, dry_run: bool, tolerance: float,
    margin: float, allow_failures: bool, out_dir: str | None, as_json: bool,
) -> None:  # fmt: skip
    """Judge a copy of RUN's answers with only sensitive words swapped, with RUN's own judge
    and settings, and report per rubric how the scores moved (resumable)."""
    from server.usecases import trust
    from server.usecases.requests import CounterfactualRequest
    from server.usecases.runs import run_cost

    request = CounterfactualRequest.build(
        judge_run_id=judge_run_id, swap=list(swap), swaps_file=swaps_file, swap_in=swap_in,
        limit=limit, max_cost=max_cost, dry_run=dry_run,
    )  # fmt: skip
    settings = ctx.settings()
    engine = ctx.engine(settings)
    if request.dry_run:
        emit(trust.counterfactual_dry_run(engine, settings, request), as_json, _print_plan)
        return
    with progress_bar("judging the counterfactual copy", as_json) as bar:
        done = trust.counterfactual_audit(engine, settings, request, progress=bar)
    report = trust.diagnostics(engine, settings, judge_run_id, tolerance=tolerance, margin=margin)
    status, detail = trust.judge_run_status(engine, done.judge_run_id)
    cost = run_cost(engine, settings, "judge", done.judge_run_id)
    extra = {
        "copy": asdict(done.copy),
        "copy_judge_run_id": done.judge_run_id,
        "summary": asdict(done.summary),
        "cost": cost,
    }
    _show(report, out_dir, as_json, extra)
    if not as_json:
        print_lines([f"the copy's judge run {done.judge_run_id}: {cost_line(cost)}"])
    if status in (RunStatus.INCOMPLETE, RunStatus.UNUSABLE):
        line = f"the copy's judge run {done.judge_run_id} is {status}: {detail}"
        if not allow_failures:
            again = "retry them" if status == RunStatus.INCOMPLETE else "retry what failed"
            raise IncompleteError(f"{line}; run the same command again to {again}")
        (err() if as_json else out()).print(line, highlight=False, soft_wrap=True)


def _print_plan(plan: dict[str, Any]) -> None:
    """A counterfactual's dry run for people: the copy, judgments, calls, tokens, cost."""
    copy = plan["copy_run_id"]
    print_lines(
        [
            f"copy of judge run {plan['checked_judge_run_id']}'s answers: "
            + (f"generation run {copy}" if copy else "new (made in memory for this estimate)")
            + f", {plan['items_copied']:,} items copied, {plan['items_skipped']:,} without a "
            "word to swap",
            f"its judge run: {plan['judge_run_id'] or 'new'} ({plan['endpoint']}, {plan['model']})",
            f"judgments to make: {plan['judgments_to_make']:,} ({plan['missing_answers']:,} "
            f"without an answer, {plan['cached_calls']:,} answered by the cache)",
            f"calls to send: {plan['calls_to_send']:,} (repairs of unreadable replies come on top)",
            *estimate_lines(plan["estimate"]),
        ]
    )


@checks.command()
@judge_run_option
@tolerance_option
@margin_option
@out_option
@require_qualified_option
@json_option
@click.pass_obj
def show(
    ctx: Context, judge_run_id: int, tolerance: float, margin: float, out_dir: str | None,
    require_qualified: bool | None, as_json: bool,
) -> None:  # fmt: skip
    """RUN's judge diagnostics from the store (nothing is sent), after its standing per
    rubric."""
    from server.usecases import trust
    from server.usecases.standing import require_in

    settings = ctx.settings()
    if requires_qualified(settings, require_qualified):
        require_in(ctx.engine(settings), judge_run_id)
    report = trust.diagnostics(
        ctx.engine(settings), settings, judge_run_id, tolerance=tolerance, margin=margin
    )
    _show(report, out_dir, as_json)


def _show(
    report: Report, out_dir: str | None, as_json: bool, extra: dict[str, Any] | None = None
) -> None:
    from rich.text import Text

    from server.usecases.audits import finite

    if out_dir is not None:
        from server.usecases.rendering import write_report

        written = write_report(report, out_dir)
        err().print(f"wrote {len(written)} files to {out_dir}", highlight=False)
    if as_json:
        emit(finite({**(extra or {}), **report.to_json()}), True, lambda _: None)
        return
    console = out()
    console.print(Text(report.intro), soft_wrap=True)
    for section in report.sections:
        for note in section.notes:
            if note not in report.intro:
                console.print(Text(note), soft_wrap=True)
        for t in section.tables:
            report_table(t, console=console, notes=True)


@checks.command()
@click.argument("judge_run_id", type=ROW_ID, metavar="RUN")
@click.option("--rubric", required=True, help="The rubric to qualify the judge for.")
@click.option(
    "--epsilon",
    type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
    help="The alt-test's margin (default: [qualify] epsilon, 0.15).",
)
@click.option(
    "--campaign",
    "campaigns",
    multiple=True,
    help="Use only this campaign's ratings (or import:BATCH); repeat for several "
    "(default: every campaign and import batch of the run).",
)
@json_option
@click.pass_obj
def qualify(
    ctx: Context, judge_run_id: int, rubric: str, epsilon: float | None,
    campaigns: tuple[str, ...], as_json: bool,
) -> None:  # fmt: skip
    """Measure RUN's judge against the human ratings of one rubric and store a qualification
    for its configuration (endpoint, model, prompt variant, template, rubric, scale,
    temperature): agreement with intervals, the majority baseline, the human ceiling, the
    alt-test, and the rule's outcome ([qualify] in the config). Exit 0 whether it qualified
    or not: the line says which; bad input stores nothing and exits 1."""
    from server.usecases.qualify import QualifyRequest, qualify_in

    settings = ctx.settings()
    request = QualifyRequest.model_validate(
        {"judge_run": judge_run_id, "rubric": rubric, "epsilon": epsilon,
         "campaigns": list(campaigns)}
    )  # fmt: skip
    done = qualify_in(ctx.engine(settings), request, settings.qualify)
    emit(done.to_dict(), as_json, _print_qualification)


def _print_qualification(record: dict[str, Any]) -> None:
    ev = record["evidence"]

    def shown(c: dict[str, Any]) -> str:
        if c.get("value") is None:
            return f"undefined ({c.get('undefined_reason')})"
        if c.get("ci_low") is None:
            return f"{c['value']:.3f}"
        return f"{c['value']:.3f} [{c['ci_low']:.3f}, {c['ci_high']:.3f}]"

    alt = ev["alt_test"]
    lines = [
        record["line"],
        f"qualification {record['id']} of judge run {record['judge_run']} on "
        f"{record['n_ratings']} rated items, {record['n_raters']} raters",
        f"  exact agreement   {shown(ev['exact_agreement'])}  (majority baseline "
        f"{ev['majority_baseline']['value']:.3f})",
        f"  weighted kappa    {shown(ev['kappa_quadratic'])}",
        f"  kappa             {shown(ev['kappa'])}",
        f"  Gwet's AC1        {shown(ev['ac1'])}  (majority baseline "
        f"{shown(ev['majority_baseline_ac1'])})",
        f"  alpha (interval)  {shown(ev['alpha_interval'])}  (human ceiling "
        f"{shown(ev['human_ceiling_alpha_interval'])})",
        f"  alt-test          {alt['verdict'] or 'refused: ' + str(alt['refused'])}",
    ]
    lines += [f"  flag: {f['message']}" for f in ev["flags"]]
    if ev.get("weighting"):
        lines.append(f"  agreement is {ev['weighting']['note']}")
    if ev.get("position"):
        p = ev["position"]
        lines.append(f"  position consistency {p['position_consistency']} over {p['pairs']} pairs")
    if ev.get("directional"):
        flagged = [d["label"] for d in ev["directional"] if d.get("flagged")]
        lines.append(
            f"  counterfactual: {'flagged ' + ', '.join(flagged) if flagged else 'no flag'}"
        )
    print_lines(lines)


@checks.command()
@click.argument("judge_run_id", type=ROW_ID, metavar="RUN")
@json_option
@click.pass_obj
def standing(ctx: Context, judge_run_id: int, as_json: bool) -> None:
    """RUN's standing per rubric: validated (how, when, on how many ratings), not validated,
    failed validation, or stale (ratings changed after the qualification)."""
    from server.usecases.standing import standing_in, standing_json

    found = standing_in(ctx.engine(), judge_run_id)
    emit(
        standing_json(found),
        as_json,
        lambda d: print_lines([f"{r}: {s['says']}" for r, s in d.items()] or ["no rubric judged"]),
    )
