"""``fairjudge dataset``: import, list, show and export FairMonitor item files, and have a
model write new items (``generate`` for one cell, ``plan`` for the whole grid)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

from server.cli.output import (
    emit,
    err,
    json_option,
    out,
    progress_bar,
    report_table,
    table,
    writing,
)

if TYPE_CHECKING:
    from server.cli import Context


@click.group()
def dataset() -> None:
    """Import, list, show and export FairMonitor item files; have a model write new ones."""


@dataset.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--name", help="Dataset name (default: the file name without extension).")
@click.option(
    "--allow-unmapped",
    is_flag=True,
    help="Do not warn about factor-scenario pairs outside FairMonitor's table.",
)
@json_option
@click.pass_obj
def dataset_import(
    ctx: Context, file: str, name: str | None, allow_unmapped: bool, as_json: bool
) -> None:
    """Import FILE (JSONL); a file with any bad line is rejected whole."""
    from server.usecases import import_dataset

    summary = import_dataset(ctx.engine(), file, name, allow_unmapped=allow_unmapped)

    def render(s: dict[str, object]) -> None:
        from rich.text import Text

        out().print(
            f"dataset {s['dataset']}: {s['added']} added, {s['unchanged']} already present, "
            f"{s['total']} in all"
        )
        for warning in summary.warnings:
            err().print(Text(f"warning: {warning}"))
        if summary.warnings:
            err().print("(pass --allow-unmapped to import such pairs without warnings)")

    emit(asdict(summary), as_json, render)


@dataset.command("list")
@json_option
@click.pass_obj
def dataset_list(ctx: Context, as_json: bool) -> None:
    """List datasets with their item counts."""
    from server.usecases import list_datasets

    rows = [asdict(info) for info in list_datasets(ctx.engine())]
    emit(rows, as_json, lambda r: table("datasets", r))


@dataset.command("show")
@click.argument("name")
@json_option
@click.pass_obj
def dataset_show(ctx: Context, name: str, as_json: bool) -> None:
    """Show counts per stage and factor, and which factor x stage cells are empty."""
    from server.usecases import describe_dataset

    info = asdict(describe_dataset(ctx.engine(), name))
    emit(info, as_json, lambda i: out().print_json(json.dumps(i)))


@dataset.command("export")
@click.argument("name")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--status",
    "statuses",
    multiple=True,
    help="Only items with this review status (repeatable): unreviewed, draft, accepted, "
    "edited, rejected. The reviewed benchmark: --status accepted --status edited.",
)
@json_option
@click.pass_obj
def dataset_export(
    ctx: Context, name: str, file: str, statuses: tuple[str, ...], as_json: bool
) -> None:
    """Write dataset NAME to FILE in the import format, with each item's review status,
    review and provenance when set."""
    from server.usecases import export_dataset

    engine = ctx.engine()
    with writing(file):
        n = export_dataset(engine, name, file, statuses=statuses or None)
    emit(
        {"dataset": name, "items": n, "file": file},
        as_json,
        lambda d: out().print(f"wrote {d['items']} items to {d['file']}"),
    )


@dataset.command("coverage")
@click.argument("name")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Also write report.html, report.json and coverage.csv into this folder.",
)
@json_option
@click.pass_obj
def dataset_coverage(ctx: Context, name: str, out_dir: str | None, as_json: bool) -> None:
    """Items per stage x factor x scenario by review status, over FairMonitor's grid; empty
    cells and cells with no usable item are marked (the terminal shows only those rows)."""
    from rich.text import Text

    from server.usecases import Table, coverage_report, session

    with session(ctx.engine()) as db:
        report = coverage_report(db, name)
    if out_dir is not None:
        from server.usecases.rendering import write_report

        with writing(out_dir):
            written = write_report(report, out_dir)
        err().print(f"wrote {len(written)} files to {out_dir}", highlight=False)
    section = report.sections[0]
    if as_json:
        emit(section.payload, True, lambda _: None)
        return
    for note in section.notes:
        out().print(Text(note), soft_wrap=True)
    factor_stage, cells, *outside = section.tables
    report_table(factor_stage, notes=True)
    gaps = [row for row in cells.rows if row[-1]]
    report_table(
        Table(f"{cells.title} (gaps only)", cells.columns, gaps, cells.notes, cells.key_columns),
        notes=True,
    )
    for extra in outside:
        report_table(extra, notes=True)


STAGE_CHOICE = click.Choice(["S1", "S2", "S3", "S4"])
RAW_SHOWN = 400
"""Characters of a rejected reply or item printed (``--json`` gives them all)."""


def _old_name(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    """``--catalogue``, the old name of ``--taxonomy``: still read, with a line saying so."""
    if value is not None:
        err().print("--catalogue is deprecated: use --taxonomy (the same file)", highlight=False)
        ctx.params["taxonomy_file"] = value


def _keep_old_name(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """``--taxonomy``'s value, or the one ``--catalogue`` gave (click reads the options on
    the command line first, so an unset ``--taxonomy`` would otherwise undo it)."""
    if value is None:
        old = ctx.params.get("taxonomy_file")
        return old if isinstance(old, str) else None
    return value


def generation_options(f: Any) -> Any:
    """The options ``dataset generate`` and ``dataset plan`` share."""
    options = [
        click.option(
            "--endpoint",
            required=True,
            help="Endpoint that writes the items (an [endpoints.NAME] of the config).",
        ),
        click.option(
            "--into",
            "into",
            default="generated",
            show_default=True,
            metavar="DATASET",
            help="Dataset the items go into (created if new).",
        ),
        click.option(
            "--taxonomy",
            "taxonomy_file",
            type=click.Path(dir_okay=False, exists=True),
            callback=_keep_old_name,
            help="A TOML file of your own factors and scenarios, in the shape of "
            "datasets/factors_scenarios.toml, added to the built-in ones.",
        ),
        click.option(
            "--catalogue",
            type=click.Path(dir_okay=False, exists=True),
            expose_value=False,
            hidden=True,
            callback=_old_name,
            help="The old name of --taxonomy (deprecated).",
        ),
        click.option(
            "--items-per-call",
            type=click.IntRange(1, 50),
            help="Items one call asks for (default 5).",
        ),
        click.option(
            "--temperature",
            type=click.FloatRange(0, 2),
            help="Sampling temperature (default 0.9: each attempt's seed then gives new items).",
        ),
        click.option(
            "--max-tokens",
            type=click.IntRange(min=16),
            help="Longest reply in tokens (default 400 per item a call asks for).",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@dataset.command("generate")
@click.option("--stage", required=True, type=STAGE_CHOICE, help="FairMonitor stage.")
@click.option("--factor", required=True, help="Sensitive factor id (see docs/datasets.md).")
@click.option("--scenario", required=True, help="Scenario id (see docs/datasets.md).")
@click.option(
    "--count",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="New items wanted (valid, not near-duplicates).",
)
@generation_options
@json_option
@click.pass_obj
def dataset_generate(
    ctx: Context,
    stage: str,
    factor: str,
    scenario: str,
    count: int,
    endpoint: str,
    into: str,
    taxonomy_file: str | None,
    items_per_call: int | None,
    temperature: float | None,
    max_tokens: int | None,
    as_json: bool,
) -> None:
    """Have an endpoint write COUNT new test items of one stage, factor and scenario, each
    with its expected unbiased answer; they are stored as drafts for expert review. Replies
    that cannot be read, items of the wrong shape or stage, and near-duplicates are reported
    with their raw text and not stored."""
    from server import usecases
    from server.usecases.requests import ItemCellRequest

    request = ItemCellRequest.build(
        endpoint=endpoint, stage=stage, factor=factor, scenario=scenario, count=count,
        into=into, taxonomy_file=taxonomy_file, items_per_call=items_per_call,
        temperature=temperature, max_tokens=max_tokens,
    )  # fmt: skip
    settings = ctx.settings()
    engine = ctx.engine(settings)
    with progress_bar("asking for items", as_json) as bar:
        summary = usecases.generate_items(engine, settings, request, progress=bar)
    emit(summary.to_json(), as_json, _print_generation)


@dataset.command("plan")
@click.option(
    "--per-cell",
    type=click.IntRange(min=1),
    required=True,
    help="Items each stage x factor x scenario cell should hold (rejected items do not count).",
)
@click.option(
    "--stage", "stages", multiple=True, type=STAGE_CHOICE, help="Only this stage (repeatable)."
)
@click.option("--factor", "factors", multiple=True, help="Only this factor id (repeatable).")
@click.option("--scenario", "scenarios", multiple=True, help="Only this scenario id (repeatable).")
@generation_options
@click.option(
    "--dry-run",
    is_flag=True,
    help="Only say how many cells, calls, tokens and how much money it would take; send nothing.",
)
@json_option
@click.pass_obj
def dataset_plan(
    ctx: Context,
    per_cell: int,
    stages: tuple[str, ...],
    factors: tuple[str, ...],
    scenarios: tuple[str, ...],
    endpoint: str,
    into: str,
    taxonomy_file: str | None,
    items_per_call: int | None,
    temperature: float | None,
    max_tokens: int | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Fill every stage x factor x scenario cell of the taxonomy (or those chosen) up to
    --per-cell items written by an endpoint. Resumable: run it again and it asks only for
    what is still missing, skipping the calls already stored."""
    from server import usecases
    from server.usecases.requests import ItemPlanRequest

    request = ItemPlanRequest.build(
        endpoint=endpoint, per_cell=per_cell, stages=stages, factors=factors,
        scenarios=scenarios, into=into, taxonomy_file=taxonomy_file,
        items_per_call=items_per_call, temperature=temperature, max_tokens=max_tokens,
        dry_run=dry_run,
    )  # fmt: skip
    settings = ctx.settings()
    engine = ctx.engine(settings)
    if request.dry_run:
        emit(usecases.plan_items_dry_run(engine, settings, request), as_json, _print_dry_run)
        return
    with progress_bar("asking for items", as_json) as bar:
        summary = usecases.plan_items(engine, settings, request, progress=bar)
    emit(summary.to_json(), as_json, _print_generation)


def _shown(raw: str) -> str:
    if len(raw) <= RAW_SHOWN:
        return raw
    return f"{raw[:RAW_SHOWN]}... ({len(raw) - RAW_SHOWN:,} more characters; --json shows all)"


def _print_generation(s: dict[str, Any]) -> None:
    from rich.text import Text

    def say(line: str, *, error: bool = False) -> None:
        (err() if error else out()).print(Text(line), soft_wrap=True)

    for rejection in s["rejections"]:
        where = f"{rejection['cell']} attempt {rejection['attempt']}"
        item = "reply" if rejection["index"] is None else f"item {rejection['index']}"
        say(f"rejected {where} {item} ({rejection['kind']}): {rejection['reason']}", error=True)
        say(f"  raw: {_shown(rejection['raw'])}", error=True)
    for dup in s["duplicate_items"]:
        say(
            f"duplicate {dup['cell']} attempt {dup['attempt']} item {dup['index']}: like "
            f"{dup['of']} (similarity {dup['similarity']:.2f}); skipped",
            error=True,
        )
        say(f"  raw: {_shown(dup['raw'])}", error=True)
    for warning in s["warnings"]:
        say(f"warning: {warning}", error=True)
    rejected = ", ".join(f"{n:,} {kind}" for kind, n in s["rejected"].items()) or "none"
    say(
        f"dataset {s['dataset']}: {s['added']:,} items added as drafts of {s['wanted']:,} "
        f"wanted in {s['cells_asked']:,} of {s['cells']:,} cells; {s['calls']:,} model calls, "
        f"{s['cached']:,} from cache, {s['failed_calls']:,} failed, {s['unreadable_calls']:,} "
        f"unreadable; rejected: {rejected}; {s['duplicates']:,} near-duplicates skipped"
    )
    for short in s["short"]:
        say(f"short: {short['cell']}: {short['added']} of {short['wanted']}: {short['why']}")
    if s["short"]:
        say(f"{len(s['short']):,} cell(s) did not get every item they needed")


def _print_dry_run(plan: dict[str, Any]) -> None:
    from rich.text import Text

    e = plan["estimate"]

    def money(x: float | None) -> str:
        return "unknown (no prices for this endpoint)" if x is None else f"{x:.4f}"

    typical = e["completion_tokens_typical"]
    lines = [
        f"dataset {plan['dataset']} ({plan['endpoint']}, {plan['model']}): "
        f"{plan['cells_short']:,} of {plan['cells']:,} cells short, "
        f"{plan['items_wanted']:,} items wanted",
        f"calls: {plan['calls_planned']:,} ({plan['items_per_call']} items each), "
        f"{plan['cached_calls']:,} answered by the cache, {plan['calls_to_send']:,} to send; "
        f"at most {plan['max_calls']:,} if replies are rejected",
        f"prompt tokens: about {e['prompt_tokens']:,}; completion tokens: at most "
        f"{e['completion_tokens_max']:,}" + (f", typically {typical:,}" if typical else ""),
        f"cost: {money(e['cost_typical'] if typical is not None else e['cost_min'])}"
        + (" (prompts alone)" if typical is None and e["cost_min"] is not None else "")
        + f", at most {money(e['cost_max'])}",
        plan["note"],
        e["note"],
    ]
    for line in lines:
        out().print(Text(line), soft_wrap=True)
