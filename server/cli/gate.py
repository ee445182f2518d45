"""``fairjudge gate``: release gates checked on stored judge runs, for a CI pipeline: a
pass/fail table (or JSON), JUnit XML, and an exit code of its own when a gate fails."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from server.cli.output import json_option, out, report_table, writing

if TYPE_CHECKING:
    from server.cli import Context


@click.command()
@click.argument("gates_file", type=click.Path(dir_okay=False), metavar="GATES_FILE")
@click.option(
    "--junit",
    "junit_path",
    type=click.Path(dir_okay=False),
    help="Also write JUnit XML here: one testcase per gate, a failure naming the figure "
    "found and the threshold.",
)
@click.option(
    "--record",
    "record",
    metavar="NAME",
    help="Keep the verdict under NAME (default: GATES_FILE as given), for `GET /api/v1/gates` "
    "and the dashboard's gates page, which show each name's last verdict.",
)
@click.option(
    "--no-record",
    is_flag=True,
    help="Keep nothing: only print (and write --junit). A bad file is never kept.",
)
@json_option
@click.pass_obj
def gate(
    ctx: Context,
    gates_file: str,
    junit_path: str | None,
    record: str | None,
    no_record: bool,
    as_json: bool,
) -> None:
    """Check the gates of GATES_FILE (TOML, docs/gates.md) on stored judge runs: thresholds
    on a run's figures or their interval bounds, on paired differences B - A, and on the
    judge's qualification. Prints a pass/fail table with the figures and exits 5 when any
    gate fails; a bad file (every problem listed with its line) exits 1, nothing evaluated.
    Each verdict is kept in the store under --record (default GATES_FILE) unless --no-record."""
    from judge.errors import GatesFailedError, InvalidInputError
    from server.usecases import session
    from server.usecases.release_gates import gate_verdict, read_gates_file

    if record is not None and no_record:
        raise InvalidInputError("--record and --no-record: give one of them, not both")
    text = read_gates_file(gates_file)
    kept_as = None if no_record else (gates_file if record is None else record)
    with session(ctx.engine()) as db:
        verdict, _ = gate_verdict(db, text, source=gates_file, record=kept_as)
    if junit_path:
        with writing(junit_path):
            Path(junit_path).write_text(verdict.junit(), encoding="utf-8")
    if as_json:
        click.echo(json.dumps(verdict.to_json(), indent=2))
    else:
        report_table(verdict.table(), notes=True)
        if junit_path:
            out().print(f"junit: {Path(junit_path).resolve()}")
    failed = verdict.failed
    if failed:
        raise GatesFailedError(
            f"{len(failed)} of {len(verdict.results)} gates failed: "
            + "; ".join(f"{r.gate.index} ({r.gate.name})" for r in failed)
        )
