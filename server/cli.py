"""The ``fairjudge`` command: a thin layer that parses options, calls one domain function and
prints the result (a readable table, or JSON with ``--json``)."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from annotation import external, reliability
from annotation.ratings import import_ratings
from judge import dataset_files, pipeline
from judge.config import ROOT, Settings, load_settings
from judge.embedded import EmbeddedServer
from judge.errors import FairJudgeError
from judge.report import build_report, metrics_table, write_report
from judge.store import session_scope

SAMPLE_DATASET = ROOT / "datasets" / "fairmonitor_sample.jsonl"
# Piped output gets a wide fixed width so tables are not cut to 80 columns.
out = Console(width=None if sys.stdout.isatty() else 160, soft_wrap=True)
err = Console(stderr=True)


class Context:
    def __init__(self, config: str | None, database_url: str | None) -> None:
        self.config_path = config
        self.database_url = database_url
        self._engine: Any = None

    def settings(self, **overrides: object) -> Settings:
        return load_settings(self.config_path, database_url=self.database_url, **overrides)

    def engine(self, settings: Settings | None = None) -> Any:
        if self._engine is None:
            self._engine = pipeline.open_store(settings or self.settings())
        return self._engine


pass_ctx = click.make_pass_decorator(Context)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")


def emit(data: Any, as_json: bool, render: Callable[[Any], None]) -> None:
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
    else:
        render(data)


def table(title: str, rows: list[dict[str, Any]]) -> None:
    if not rows:
        out.print(f"{title}: none")
        return
    t = Table(title=title)
    for key in rows[0]:
        t.add_column(str(key))
    for row in rows:
        t.add_row(*(Text("" if v is None else str(v)) for v in row.values()))
    out.print(t)


@contextmanager
def progress_bar(label: str, quiet: bool) -> Iterator[Callable[[int, int], None] | None]:
    if quiet:
        yield None
        return
    with Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=False,
    ) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


@click.group()
@click.option(
    "--config",
    type=click.Path(dir_okay=False),
    envvar="FAIRJUDGE_CONFIG",
    help="Config file (default: fairjudge.toml at the repository root).",
)
@click.option(
    "--db",
    "database_url",
    envvar="FAIRJUDGE_DATABASE_URL",
    help="Database URL; overrides database_url in the config.",
)
@click.pass_context
def cli(ctx: click.Context, config: str | None, database_url: str | None) -> None:
    """FairJudge: LLM-as-judge bias evaluation with human annotation."""
    ctx.obj = Context(config, database_url)


# --- the embedded model -------------------------------------------------------------------


@cli.group()
def model() -> None:
    """Manage the embedded local model server."""


def _server(ctx: Context) -> EmbeddedServer:
    settings = ctx.settings()
    return EmbeddedServer(settings.embedded, settings.state_dir)


@model.command("serve")
@json_option
@pass_ctx
def model_serve(ctx: Context, as_json: bool) -> None:
    """Start the embedded model server (no-op when it already runs)."""
    status = _server(ctx).start()
    emit(
        status.__dict__,
        as_json,
        lambda s: out.print(
            f"embedded model {', '.join(s['models'])} answers at {s['url']} (pid {s['pid']})"
        ),
    )


@model.command("stop")
@pass_ctx
def model_stop(ctx: Context) -> None:
    """Stop the embedded model server started from this state folder."""
    stopped = _server(ctx).stop()
    out.print("stopped" if stopped else "no embedded model server was running")


@model.command("status")
@json_option
@pass_ctx
def model_status(ctx: Context, as_json: bool) -> None:
    """Say which model is served, where, and whether it answers."""
    status = _server(ctx).status()

    def render(s: dict[str, Any]) -> None:
        state = "answers" if s["answers"] else "does not answer"
        out.print(
            f"{s['url']} {state}; models: {', '.join(s['models']) or '-'}; "
            f"pid: {s['pid'] or '-'}; file: {s['model_file'] or 'not installed'}"
        )

    emit(status.__dict__, as_json, render)


# --- datasets -----------------------------------------------------------------------------


@cli.group()
def dataset() -> None:
    """Import, list, show and export FairMonitor item files."""


@dataset.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--name", help="Dataset name (default: the file name without extension).")
@json_option
@pass_ctx
def dataset_import(ctx: Context, file: str, name: str | None, as_json: bool) -> None:
    """Import FILE (JSONL); a file with any bad line is rejected whole."""
    with session_scope(ctx.engine()) as session:
        summary = dataset_files.import_items(session, file, name or Path(file).stem)
    emit(
        summary.__dict__,
        as_json,
        lambda s: out.print(
            f"dataset {s['dataset']}: {s['added']} added, {s['unchanged']} already present, "
            f"{s['total']} in all"
        ),
    )


@dataset.command("list")
@json_option
@pass_ctx
def dataset_list(ctx: Context, as_json: bool) -> None:
    """List datasets with their item counts."""
    with session_scope(ctx.engine()) as session:
        rows = dataset_files.list_datasets(session)
    emit(rows, as_json, lambda r: table("datasets", r))


@dataset.command("show")
@click.argument("name")
@json_option
@pass_ctx
def dataset_show(ctx: Context, name: str, as_json: bool) -> None:
    """Show counts per stage and factor, and which factor x stage cells are empty."""
    with session_scope(ctx.engine()) as session:
        info = dataset_files.describe_dataset(session, name)
    emit(info, as_json, lambda i: out.print_json(json.dumps(i)))


@dataset.command("export")
@click.argument("name")
@click.argument("file", type=click.Path(dir_okay=False))
@pass_ctx
def dataset_export(ctx: Context, name: str, file: str) -> None:
    """Write dataset NAME to FILE in the import format."""
    with session_scope(ctx.engine()) as session:
        n = dataset_files.export_items(session, name, file)
    out.print(f"wrote {n} items to {file}")


# --- runs ---------------------------------------------------------------------------------


def _summary_line(kind: str, s: Any) -> str:
    return (
        f"{kind} run {s.run_id}: {s.tasks} to do, {s.model_calls} model calls, "
        f"{s.cached} from cache, {s.http_attempts} HTTP requests; {s.flags}"
    )


@cli.command()
@click.argument("dataset_name", metavar="DATASET")
@click.option("--endpoint", help="Endpoint under test (default: [generation] endpoint).")
@click.option("--temperature", type=float)
@click.option("--max-tokens", type=int)
@click.option("--limit", type=int, help="Only the first N items.")
@click.option("--new", is_flag=True, help="Start a new run even if one with these settings exists.")
@json_option
@pass_ctx
def generate(
    ctx: Context,
    dataset_name: str,
    endpoint: str | None,
    temperature: float | None,
    max_tokens: int | None,
    limit: int | None,
    new: bool,
    as_json: bool,
) -> None:
    """Send DATASET's items to the model under test and store the answers (resumable)."""
    settings = ctx.settings(
        **{
            "generation.endpoint": endpoint,
            "generation.temperature": temperature,
            "generation.max_tokens": max_tokens,
        }
    )
    with progress_bar("generating", as_json) as bar:
        summary = pipeline.generate(
            ctx.engine(settings), settings, dataset_name, limit=limit, new=new, progress=bar
        )
    emit(summary.__dict__, as_json, lambda s: out.print(_summary_line("generation", summary)))


@cli.command("judge")
@click.argument("run_id", type=int, metavar="GENERATION_RUN")
@click.option("--endpoint", help="Judge endpoint (default: [judge] endpoint).")
@click.option("--prompt-variant", type=click.Choice(["plain", "cot"]))
@click.option("--temperature", type=float)
@click.option("--samples", type=int, help="Judge calls per item and rubric.")
@click.option("--aggregation", type=click.Choice(["mean", "majority"]))
@json_option
@pass_ctx
def judge_cmd(
    ctx: Context,
    run_id: int,
    endpoint: str | None,
    prompt_variant: str | None,
    temperature: float | None,
    samples: int | None,
    aggregation: str | None,
    as_json: bool,
) -> None:
    """Score a generation run's answers with the FairMonitor rubrics (resumable)."""
    settings = ctx.settings(
        **{
            "judge.endpoint": endpoint,
            "judge.prompt_variant": prompt_variant,
            "judge.temperature": temperature,
            "judge.samples": samples,
            "judge.aggregation": aggregation,
        }
    )
    with progress_bar("judging", as_json) as bar:
        summary = pipeline.judge(ctx.engine(settings), settings, run_id, progress=bar)
    emit(summary.__dict__, as_json, lambda s: out.print(_summary_line("judge", summary)))


@cli.command()
@json_option
@pass_ctx
def runs(ctx: Context, as_json: bool) -> None:
    """List generation runs and judge runs."""
    with session_scope(ctx.engine()) as session:
        data = pipeline.list_runs(session)

    def render(d: dict[str, Any]) -> None:
        table("generation runs", d["generation_runs"])
        table("judge runs", d["judge_runs"])

    emit(data, as_json, render)


def print_metrics(report: dict[str, Any]) -> None:
    head, body = metrics_table(report["metrics_by_factor"] + report["metrics_overall"])
    t = Table(
        title=f"FairMonitor metrics: {report['generation_run']['model']} "
        f"(judge {report['judge_run']['model']}, {report['judge_run']['prompt_variant']},"
        f" T={report['judge_run']['temperature']})"
    )
    for h in head:
        t.add_column(h)
    for line in body:
        t.add_row(*(Text(cell) for cell in line))
    out.print(t)
    out.print(f"unscored judgments: {report['unscored'] or 'none'}; tokens: {report['tokens']}")


@cli.command()
@click.argument("run_id", type=int, metavar="JUDGE_RUN")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    required=True,
    help="Folder for report.html, report.json, metrics.csv, item_scores.csv.",
)
@json_option
@pass_ctx
def report(ctx: Context, run_id: int, out_dir: str, as_json: bool) -> None:
    """Write the HTML/JSON/CSV report of a judge run."""
    with session_scope(ctx.engine()) as session:
        data = build_report(session, run_id)
        section = reliability.report_section(session, run_id)
    if section is not None:
        data["agreement"] = section
    paths = write_report(data, out_dir)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "paths": {k: str(v) for k, v in paths.items()},
                    "metrics": data["metrics_overall"],
                },
                indent=2,
            )
        )
        return
    print_metrics(data)
    out.print(f"report: {paths['html'].resolve()}")


@cli.command()
@click.option(
    "--out", "out_dir", default="reports/demo", show_default=True, type=click.Path(file_okay=False)
)
@click.option(
    "--dataset-file",
    type=click.Path(dir_okay=False),
    show_default="datasets/fairmonitor_sample.jsonl in the repository",
    help="Item file to run.",
)
@click.option("--limit", type=int, help="Only the first N items (a quicker look).")
@pass_ctx
def demo(ctx: Context, out_dir: str, dataset_file: str | None, limit: int | None) -> None:
    """The whole pipeline on the embedded model: serve, import, generate, judge, report, stop."""
    dataset_file = dataset_file or str(SAMPLE_DATASET)
    settings = ctx.settings()
    server = EmbeddedServer(settings.embedded, settings.state_dir)
    started = server.served_models() is None
    out.print(
        "starting the embedded model server..."
        if started
        else "using the embedded model server that is already running"
    )
    server.start()
    try:
        engine = ctx.engine(settings)
        name = Path(dataset_file).stem
        with session_scope(engine) as session:
            imported = dataset_files.import_items(session, dataset_file, name)
        out.print(f"dataset {name}: {imported.total} items ({imported.added} new)")
        with progress_bar("generating", False) as bar:
            gen = pipeline.generate(engine, settings, name, limit=limit, progress=bar)
        out.print(_summary_line("generation", gen))
        with progress_bar("judging", False) as bar:
            jud = pipeline.judge(engine, settings, gen.run_id, progress=bar)
        out.print(_summary_line("judge", jud))
        with session_scope(engine) as session:
            data = build_report(session, jud.run_id)
        paths = write_report(data, out_dir)
        print_metrics(data)
        out.print(
            "[bold]note:[/bold] SmolLM2-135M judges at about chance level; it exercises "
            "the machinery. Point \\[judge] at a capable endpoint for real scores."
        )
        out.print(f"report: {paths['html'].resolve()}")
    finally:
        if started:
            server.stop()
            out.print("stopped the embedded model server")


# --- human ratings and judge reliability --------------------------------------------------


@cli.group()
def ratings() -> None:
    """Human ratings collected outside Label Studio."""


@ratings.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--run", "run_id", type=int, required=True, help="Generation run the ratings are for."
)
@click.option("--replace", is_flag=True, help="Overwrite changed scores instead of refusing.")
@json_option
@pass_ctx
def ratings_import(ctx: Context, file: str, run_id: int, replace: bool, as_json: bool) -> None:
    """Import FILE (CSV: item_id,rubric,rater,score[,rationale]); all or nothing."""
    with session_scope(ctx.engine()) as session:
        summary = import_ratings(session, file, run_id, replace=replace)
    emit(
        summary.__dict__,
        as_json,
        lambda s: out.print(
            f"run {s['run']}: {s['added']} ratings added, {s['unchanged']} unchanged, "
            f"{s['replaced']} replaced ({s['raters']} raters, {s['items']} items)"
        ),
    )


bootstrap_option = click.option(
    "--bootstrap",
    "n_bootstrap",
    type=click.IntRange(min=0),
    default=1000,
    show_default=True,
    help="Bootstrap resamples for the 95 % CIs (0 = none).",
)
seed_option = click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap."
)
human_option = click.option(
    "--human-score",
    "human_score",
    type=click.Choice(["mean", "median"]),
    default="mean",
    show_default=True,
    help="How an item's human score combines its raters.",
)


def print_reliability(result: dict[str, Any]) -> None:
    for coefficient in ("spearman", "pearson", "kappa_quadratic"):
        head, body = reliability.table3(result, coefficient)
        t = Table(title=f"Judge vs human: {coefficient} [95 % CI] (run {result['generation_run']})")
        for h in head:
            t.add_column(h)
        for line in body:
            t.add_row(*(Text(c) for c in line))
        out.print(t)
    for rubric, entry in result["rubrics"].items():
        for j in entry["judges"]:
            out.print(Text(f"{rubric} / {j['label']}: {j['reading']}"))


@cli.group(invoke_without_command=True)
@click.option("--run", "run_id", type=int, help="Generation run whose judges to validate.")
@bootstrap_option
@seed_option
@human_option
@click.option(
    "--target-half-width",
    type=float,
    default=0.1,
    show_default=True,
    help="CI half-width used to estimate how many items to rate.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Also write agreement.json and plots here.",
)
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
    as_json: bool,
) -> None:
    """Judge reliability: every judge run of a generation run against the human ratings."""
    if click_ctx.invoked_subcommand is not None:
        return
    if run_id is None:
        raise click.UsageError("give --run GENERATION_RUN, or use `agreement compute`")
    ctx: Context = click_ctx.obj
    with session_scope(ctx.engine()) as session:
        result = reliability.run_reliability(
            session,
            run_id,
            n_bootstrap=n_bootstrap,
            seed=seed,
            human=human_score,
            target_half_width=target_half_width,
        )
    if out_dir:
        paths = write_agreement(result, out_dir)
        result["files"] = [str(p) for p in paths]
    emit(result, as_json, print_reliability)


def write_agreement(result: dict[str, Any], out_dir: str) -> list[Path]:
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / "agreement.json"]
    paths[0].write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")
    for rubric, entry in result["rubrics"].items():
        for j in entry["judges"]:
            if "points" not in j:
                continue
            png = folder / f"agreement_{rubric}_judge{j['judge_run']}.png"
            png.write_bytes(
                reliability.plots_png(
                    j["points"]["judge"],
                    j["points"]["human"],
                    j["confusion_matrix"]["counts"],
                    f"{rubric}: {j['label']}",
                )
            )
            paths.append(png)
    return paths


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
@bootstrap_option
@seed_option
@human_option
@json_option
def agreement_compute(
    human_csv: str,
    judge_csv: str | None,
    group_by: str | None,
    n_bootstrap: int,
    seed: int,
    human_score: str,
    as_json: bool,
) -> None:
    """Agreement for your own files: human vs human, and judge vs human with --judge."""
    result = external.compute(
        human_csv,
        judge_csv,
        group_by=group_by,
        n_bootstrap=n_bootstrap,
        seed=seed,
        human=human_score,
    )

    def render(r: dict[str, Any]) -> None:
        rows = []
        for section in ("human_vs_human", "judge_vs_human", "grouped"):
            for name, c in r.get(section, {}).items():
                if isinstance(c, dict) and "value" in c:
                    rows.append(
                        {
                            "section": section,
                            "coefficient": name,
                            "value [95 % CI]": reliability.fmt(c, 3),
                            "p": "" if c.get("p_value") is None else f"{c['p_value']:.3g}",
                            "n": c["n"],
                        }
                    )
        table(f"agreement ({r['n_items']} items)", rows)

    emit(result, as_json, render)


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=5000, show_default=True, type=int)
@pass_ctx
def serve(ctx: Context, host: str, port: int) -> None:
    """Run the FairJudge web API (development server)."""
    from server import create_app

    create_app({"SETTINGS": ctx.settings()}).run(host=host, port=port)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main() -> None:
    """Console entry point: user errors become one clear line and exit code 1."""
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        cli.main(standalone_mode=False)
    except FairJudgeError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    except click.exceptions.Abort:
        err.print("interrupted: finished work is stored; run the same command again to resume")
        sys.exit(130)
    except KeyboardInterrupt:
        err.print("interrupted: finished work is stored; run the same command again to resume")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
