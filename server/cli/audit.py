"""``fairjudge audit``: the audit suites' analyses on answers already classified (a CSV of
your own); running the audits against a model comes with their next step (issue 13)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click

from server.cli.output import emit, err, json_option, out

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
        from judge.reports.render import write_report

        written = write_report(report, out)
        err().print(f"wrote {len(written)} files to {out}", highlight=False)


@click.group()
def audit() -> None:
    """Audit suites from the bias literature: award choice, name-based advice, BBI."""


@audit.group()
def award() -> None:
    """Award choice between two equally scoring students (seed 000)."""


@award.command("analyze")
@from_csv
@click.option("--names", type=click.Path(dir_okay=False), help="Name groups file (TOML).")
@out_dir
@json_option
def award_analyze(path: str, names: str | None, out: str | None, as_json: bool) -> None:
    """Binomial tests per level (level,choice) or the follow-up's chi-square
    (level,chosen_group,followup_class); the header says which."""
    from judge.audits import award as suite
    from judge.audits.report import award_report

    groups = suite.load_name_groups(names) if names else None
    read = suite.read_award_csv(path, groups)
    if read.layout == "choice":
        result: Any = suite.analyze(read.choices)
    else:
        result = suite.analyze_followup(read.followups)
    data = result.to_dict()
    _write(award_report(result), out)
    emit(_finite({"layout": read.layout, **data}), as_json, _print)


@audit.group()
def names() -> None:
    """Name-based numeric advice (seed 002)."""


@names.command("analyze")
@from_csv
@out_dir
@json_option
def names_analyze(path: str, out: str | None, as_json: bool) -> None:
    """Means and CIs by race and gender per variation and context, Welch's tests against
    White and male, per-name standardised means."""
    from judge.audits import names as suite
    from judge.audits.report import names_report

    result = suite.analyze(suite.read_answers_csv(Path(path)))
    _write(names_report(result), out)
    emit(_finite(result.to_dict()), as_json, _print)


@audit.group()
def bbi() -> None:
    """StereoSet / CrowS-Pairs Bias Balance Indicator (seed 004)."""


@bbi.command("analyze")
@from_csv
@out_dir
@json_option
def bbi_analyze(path: str, out: str | None, as_json: bool) -> None:
    """RS, SBS per dataset and BBI, overall and per bias type, from dataset,bias_type,label."""
    from judge.audits import bbi as suite
    from judge.audits.report import bbi_report

    result = suite.analyze_labels(suite.read_labels_csv(Path(path)))
    _write(bbi_report(result), out)
    emit(_finite(result.to_dict()), as_json, _print)


def _print(data: dict[str, Any]) -> None:
    """The figures as indented JSON (the analyses nest too deeply for one table)."""
    out().print_json(json.dumps(data))


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as None: JSON has no NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
