"""``fairjudge audit``: the audit suites from the bias literature. ``SUITE run`` sends a
suite's design to the model under test and stores every answer (resumable, like generation);
``show`` reads a run back as figures and a report; ``SUITE analyze --from-csv`` analyses
answers classified elsewhere. The award audit's follow-up explanations are classified by the
judge (``award classify``) and by people (``award export-followups`` / ``import-labels``)."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import click

from server.cli.audit_bbq import register as register_bbq
from server.cli.audit_campaign import register
from server.cli.output import (
    ROW_ID,
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
    table,
    writing,
)
from server.cli.stages import Stage, StageCalls, batch_options, chosen_transport, run_stage

if TYPE_CHECKING:
    from server.cli import Context
    from server.usecases.requests import Request

from_csv = click.option(
    "--from-csv",
    "path",
    required=True,
    type=click.Path(dir_okay=False),
    help="CSV of classified answers (columns in docs/audits.md).",
)
out_dir = click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Also write report.html (tables and plots), report.json and CSV files here.",
)


def _write(report: Any, out: str | None) -> None:
    if out is not None:
        from server.usecases.rendering import write_report

        written = write_report(report, out)
        err().print(f"wrote {len(written)} files to {out}", highlight=False)


def _run_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options every ``SUITE run`` shares: who is asked and how."""
    options: list[Callable[..., Any]] = [
        click.option("--endpoint", help="Model under test (default: [generation] endpoint)."),
        click.option(
            "--temperature",
            type=click.FloatRange(0, 2),
            help="Sampling temperature (default 1.0: repeats only differ when the model samples).",
        ),
        click.option(
            "--max-tokens",
            type=click.IntRange(min=1),
            help="Longest answer (default: award 300, names 200, bbi 2048, bbq 100).",
        ),
        click.option(
            "--limit", type=click.IntRange(min=1), help="Only the design's first N prompts."
        ),
        click.option(
            "--new",
            is_flag=True,
            help="Start a new run even if one with these settings exists.",
        ),
        max_cost_option,
        dry_run_option,
        batch_options(),
        click.option(
            "--allow-failures",
            is_flag=True,
            help="Exit 0 even if some calls failed for good (the run's status is printed).",
        ),
        out_dir,
        json_option,
        click.pass_obj,
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _run(
    ctx: Context,
    suite: str,
    options: dict[str, Any],
    common: dict[str, Any],
    inputs: dict[str, str | None] | None = None,
) -> None:
    """Run a suite on the stages' one path (``server.cli.stages``), then print (or write)
    what its answers say so far. ``options``: the suite's design (``AuditRequest.options``);
    ``inputs``: its input files."""
    as_json, out_path = common.pop("as_json"), common.pop("out")
    allow_failures = common.pop("allow_failures")
    batching = {
        name: common.pop(name) for name in ("batch", "retry_live", "no_wait", "poll_every", "queue")
    }
    if batching["queue"] and out_path is not None:
        raise click.UsageError("--out cannot be used with --queue: nothing runs here to write")
    fields = {
        "suite": suite, "options": options, "inputs": inputs or {},
        "transport": chosen_transport(batching), **common,
    }  # fmt: skip

    def show(run_id: int, extra: dict[str, Any], as_json: bool) -> None:
        _show(ctx, run_id, out_path, as_json, extra=extra)

    stage = replace(AUDIT, verb=f"audit {suite}", show=show)
    run_stage(ctx, stage, fields, batching, allow_failures, as_json)


def _audit_request() -> type[Request]:
    from server.usecases.audits import AuditRunRequest

    return AuditRunRequest


def _audit_calls() -> StageCalls:
    from server.usecases.audits import audit, audit_dry_run
    from server.usecases.batch import audit_batch, run_batch_summary_lines

    return StageCalls(audit_dry_run, audit, audit_batch, run_batch_summary_lines)


def _print_plan(plan: dict[str, Any], *, batch: bool = False) -> None:
    """An audit's dry run for people: prompts, calls, tokens and cost (live and batch;
    ``batch``: the batch price applies)."""
    lines = [
        f"audit run: {plan['audit_run_id'] or 'new'} ({plan['suite']}; {plan['endpoint']}, "
        f"{plan['model']})",
        f"prompts: {plan['prompts']:,} in the design; {plan['prompts_to_ask']:,} to ask "
        f"({plan['cached_calls']:,} answered by the cache)",
        f"calls to send: {plan['calls_to_send']:,}",
        *estimate_lines(plan["estimate"], batch=batch),
    ]
    if plan["followup_estimate"] is not None:
        lines += [
            f'follow-up calls: at most {plan["followup_calls_max"]:,} ("why?" after each '
            "answer that chose a student"
            + ("; with --batch in a second batch, once the first answers are in" if batch else "")
            + "), on top of the above:",
            *("  " + line for line in estimate_lines(plan["followup_estimate"], batch=batch)),
        ]
    print_lines(lines)


def _show(
    ctx: Context,
    run_id: int,
    out_path: str | None,
    as_json: bool,
    extra: dict[str, Any] | None = None,
) -> None:
    from server.usecases import audits

    settings = ctx.settings()
    result = audits.show(ctx.engine(settings), run_id, settings)
    _write(result.report, out_path)
    from server.usecases.audits import finite

    emit(finite({**(extra or {}), **result.to_dict()}), as_json, _print)


AUDIT = Stage(
    "audit", "audit", "audit", _audit_request, _audit_calls,
    lambda settings: settings.generation.endpoint,
    lambda plan, batch: _print_plan(plan, batch=batch),
)  # fmt: skip
"""The suites' stage; each command sets its verb (``audit award``) and what it shows."""


@click.group()
def audit() -> None:
    """Audit suites from the bias literature: award choice, name-based advice, BBI, BBQ."""


@audit.command("runs")
@click.option(
    "--suite", type=click.Choice(["award", "names", "bbi", "bbq"]), help="Only this suite."
)
@json_option
@click.pass_obj
def runs(ctx: Context, suite: str | None, as_json: bool) -> None:
    """List audit runs, newest first."""
    from server.usecases import audits

    found = audits.runs(ctx.engine(), suite)
    shown = [
        {k: r[k] for k in ("id", "suite", "endpoint", "model", "status", "answers", "created_at")}
        for r in found
    ]
    emit(found, as_json, lambda _: table("Audit runs", shown))


@audit.command("show")
@click.argument("run_id", type=ROW_ID, metavar="RUN")
@out_dir
@require_qualified_option
@json_option
@click.pass_obj
def show(
    ctx: Context, run_id: int, out: str | None, require_qualified: bool | None, as_json: bool
) -> None:
    """A stored audit run's figures: answers by status, the suite's tests, the follow-up's
    classes and agreement (re-read from the store; nothing is sent). Classes a judge gave
    say that no qualification covers them."""
    if requires_qualified(ctx.settings(), require_qualified):
        from server.usecases import audits

        audits.require_qualified_in(ctx.engine(), run_id)
    _show(ctx, run_id, out, as_json)


@audit.group()
def award() -> None:
    """Award choice between two equally scoring students (seed 000)."""


@award.command("run")
@click.option("--items", type=click.Path(dir_okay=False), help="Item bank (JSON).")
@click.option("--names", "names_file", type=click.Path(dir_okay=False),
              help="Name groups file (TOML).")  # fmt: skip
@click.option("--levels", help="Performance levels, comma-separated (default 5,10,15,20).")
@click.option("--pairs", type=click.IntRange(min=1), help="Response-vector pairs per level (125).")
@click.option("--seed", type=int, help="Seed of the design's draws (0).")
@click.option("--followup", is_flag=True, help="Also ask why, after every answer that chose.")
@_run_options
def award_run(
    ctx: Context, items: str | None, names_file: str | None, levels: str | None,
    pairs: int | None, seed: int | None, followup: bool, **common: Any,
) -> None:  # fmt: skip
    """Send the counterbalanced award design (2,000 prompts by default) to the model under
    test, classify each answer (group A, B or equivocal) and test A against B per level."""
    options = {
        "levels": _ints(levels, "--levels"), "pairs_per_level": pairs, "seed": seed,
        "followup": followup,
    }  # fmt: skip
    _run(ctx, "award", options, common, {"items": items, "names_file": names_file})


@award.command("classify")
@click.argument("run_id", type=ROW_ID, metavar="RUN")
@click.option("--endpoint", help="Judge endpoint (default: [judge] endpoint).")
@json_option
@click.pass_obj
def award_classify(ctx: Context, run_id: int, endpoint: str | None, as_json: bool) -> None:
    """Have the judge sort RUN's follow-up explanations into indecisive, justified or
    irrational (resumable: failed calls are sent again; an unreadable reply is kept with its
    raw text)."""
    from server.usecases import followups

    settings = ctx.settings()
    engine = ctx.engine(settings)
    with progress_bar("classifying", as_json) as bar:
        summary = followups.classify_followups(
            engine, settings, run_id, endpoint=endpoint, progress=bar
        )
    _show(ctx, run_id, None, as_json, extra={"classified": summary.flags})


@award.command("export-followups")
@click.argument("run_id", type=ROW_ID, metavar="RUN")
@click.option("--out", "path", required=True, type=click.Path(dir_okay=False),
              help="CSV to write (fill in its label column).")  # fmt: skip
@json_option
@click.pass_obj
def award_export(ctx: Context, run_id: int, path: str, as_json: bool) -> None:
    """Write RUN's follow-up explanations as a CSV for people to classify (the chosen
    student's group is not in it)."""

    from server.usecases import audits

    rows = audits.export_followups(ctx.engine(), run_id)
    with writing(path), open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=audits.followup_columns())
        writer.writeheader()
        writer.writerows(rows)
    emit(
        {"written": len(rows), "path": path},
        as_json,
        lambda d: err().print(f"wrote {d['written']} explanations to {path}", highlight=False),
    )


@award.command("import-labels")
@click.argument("run_id", type=ROW_ID, metavar="RUN")
@click.argument("path", type=click.Path(dir_okay=False), metavar="FILE")
@click.option("--annotator", required=True, help="Who classified them (name or e-mail).")
@json_option
@click.pass_obj
def award_import(ctx: Context, run_id: int, path: str, annotator: str, as_json: bool) -> None:
    """Store one person's classes (CSV with answer_id,label) for RUN's follow-ups."""
    from server.usecases import audits

    counts = audits.import_labels(ctx.engine(), run_id, path, annotator)
    emit(counts, as_json, lambda c: out().print(
        f"{c['added']} added, {c['changed']} changed, {c['unchanged']} unchanged",
        highlight=False))  # fmt: skip


@award.command("estimates")
@click.argument("run_id", type=ROW_ID, metavar="RUN")
@click.option(
    "--assume-random",
    is_flag=True,
    help="Treat the follow-ups people classified as a simple random sample of the run's. "
    "Without it a subset gives no human-only or prediction-powered estimate. The subset is "
    "checked against the rest first ([estimates] max_smd, smd_alpha) and refused when unlike it.",
)
@click.option(
    "--accept-unrepresentative",
    is_flag=True,
    help="With --assume-random: use people's classes even when they fail that check; the "
    "output's design then says so.",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0.001, 0.5),
    default=0.05,
    show_default=True,
    help="1 - the intervals' coverage (0.05: 95 % intervals).",
)
@click.option(
    "--judge",
    metavar="SOURCE",
    help="The judge whose classes to use (judge:ENDPOINT/MODEL), where several classified.",
)
@require_qualified_option
@json_option
@click.pass_obj
def award_estimates(
    ctx: Context, run_id: int, assume_random: bool, accept_unrepresentative: bool, alpha: float,
    judge: str | None, require_qualified: bool | None, as_json: bool,
) -> None:  # fmt: skip
    """Each follow-up class's share of RUN, overall and per chosen group, and the gap
    between the groups: as the judge classified them, as people did, and prediction-powered
    (the judge's classes of every follow-up corrected by people's, PPI++)."""
    from server.usecases import audits

    if accept_unrepresentative and not assume_random:
        raise click.UsageError("--accept-unrepresentative goes with --assume-random")
    if requires_qualified(ctx.settings(), require_qualified):
        audits.require_qualified_in(ctx.engine(), run_id)
    found = audits.followup_estimates_in(
        ctx.engine(), run_id, assume_random=assume_random, alpha=alpha, judge=judge,
        accept_unrepresentative=accept_unrepresentative, rules=ctx.settings().estimates,
    )  # fmt: skip
    emit(found.to_dict(), as_json, lambda _: _tables(found.tables()))


def _tables(tables: list[Any]) -> None:
    """Report tables, each followed by its notes."""
    for t in tables:
        report_table(t, notes=True)


register(award)  # campaign and pull: the follow-ups' classes by people in Label Studio


@award.command("analyze")
@from_csv
@click.option("--names", type=click.Path(dir_okay=False), help="Name groups file (TOML).")
@out_dir
@json_option
def award_analyze(path: str, names: str | None, out: str | None, as_json: bool) -> None:
    """Binomial tests per level (level,choice) and, with a name_pair column
    (level,name_pair,choice), the Kruskal-Wallis test of equivocal rates across name pairs;
    or the follow-up's chi-square (level,chosen_group,followup_class). The header says
    which."""
    from server.usecases import audits

    found = audits.analyze_award_csv(path, names)
    if found.note is not None:
        err().print(found.note, highlight=False, soft_wrap=True)
    _write(found.report, out)
    from server.usecases.audits import finite

    emit(finite(found.data), as_json, _print)


@audit.group()
def names() -> None:
    """Name-based numeric advice (seed 002)."""


@names.command("run")
@click.option("--design", type=click.Path(dir_okay=False), help="Design file (TOML).")
@click.option("--repeats", type=click.IntRange(min=1),
              help="Answers per name and template (default 100: 168,000 prompts).")  # fmt: skip
@_run_options
def names_run(ctx: Context, design: str | None, repeats: int | None, **common: Any) -> None:
    """Ask for advice about each named person in every template, read the number from each
    answer, and compare means by race and gender."""
    _run(ctx, "names", {"repeats": repeats}, common, {"design": design})


@names.command("analyze")
@from_csv
@out_dir
@json_option
def names_analyze(path: str, out: str | None, as_json: bool) -> None:
    """Means and CIs by race and gender per variation and context, Welch's tests against
    White and male, per-name standardised means. Each answer is read in its cell's unit (an
    optional unit column, else the bundled design's for the scenario)."""
    from server.usecases import audits

    found = audits.analyze_names_csv(path)
    _write(found.report, out)
    from server.usecases.audits import finite

    emit(finite(found.data), as_json, _print)


@audit.group()
def bbi() -> None:
    """StereoSet / CrowS-Pairs Bias Balance Indicator (seed 004)."""


@bbi.command("run")
@click.option("--stereoset", type=click.Path(dir_okay=False),
              help="StereoSet intersentence JSON (default: the bundled sample).")  # fmt: skip
@click.option("--crows-pairs", type=click.Path(dir_okay=False),
              help="CrowS-Pairs CSV (default: the bundled sample).")  # fmt: skip
@click.option("--per-type", type=click.IntRange(min=1),
              help="Items of each bias type per prompt (20: 60 per prompt).")  # fmt: skip
@click.option("--repeats", type=click.IntRange(min=1), help="Times each batch is asked (5).")
@click.option("--seed", type=int, help="Seed of the shuffles (0).")
@click.option(
    "--bias-types",
    help="Bias types, comma-separated (default gender,race,religion: the seed's three).",
)
@click.option(
    "--max-per-type",
    type=click.IntRange(min=1),
    help="At most N items of each dataset and bias type, drawn with --seed (the seed: 100).",
)
@_run_options
def bbi_run(
    ctx: Context, stereoset: str | None, crows_pairs: str | None, per_type: int | None,
    repeats: int | None, seed: int | None, bias_types: str | None,
    max_per_type: int | None, **common: Any,
) -> None:  # fmt: skip
    """Ask for the more fitting sentence of every item, in batches with the labels hidden,
    and compute RS, SBS and the Bias Balance Indicator from the majority choices."""
    types = [t.strip() for t in bias_types.split(",") if t.strip()] if bias_types else None
    options = {
        "per_type": per_type, "repeats": repeats, "seed": seed, "bias_types": types,
        "max_per_type": max_per_type,
    }  # fmt: skip
    _run(ctx, "bbi", options, common, {"stereoset": stereoset, "crows_pairs": crows_pairs})


@bbi.command("analyze")
@from_csv
@out_dir
@json_option
def bbi_analyze(path: str, out: str | None, as_json: bool) -> None:
    """RS, SBS per dataset and BBI, overall and per bias type, from dataset,bias_type,label."""
    from server.usecases import audits

    found = audits.analyze_bbi_csv(path)
    _write(found.report, out)
    from server.usecases.audits import finite

    emit(finite(found.data), as_json, _print)


register_bbq(audit, _run_options, _run, out_dir, _write)  # audit bbq run / analyze


def _ints(text: str | None, option: str) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(
            f"whole numbers separated by commas, got {text!r}", param_hint=option
        ) from None


def _print(data: dict[str, Any]) -> None:
    """The figures as indented JSON (the analyses nest too deeply for one table)."""
    out().print_json(json.dumps(data))
