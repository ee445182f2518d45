"""A report as the interfaces hand it out: one HTML page, one CSV table, the files of a folder,
a figure's PNG. The interfaces call these instead of ``judge.reports.render``, which imports
matplotlib: each function imports it only when called (tests/server/test_startup.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from judge.reports.sections import Figure, Report

__all__ = ["Report", "csv_table", "figure_png", "html", "write_report"]


def html(report: Report) -> str:
    """The report as one self-contained HTML page, figures included."""
    from judge.reports.render import html as render

    return render(report)


def csv_table(report: Report, name: str | None = None) -> tuple[str, str]:
    """One of the report's tables as CSV (``name``: its file name; default the first):
    the file name and the text."""
    from judge.reports.render import csv_table as render

    return render(report, name)


def write_report(report: Report, out_dir: str | Path) -> dict[str, Path]:
    """report.json, every CSV the sections declare and report.html written to ``out_dir``;
    the paths written, by what they hold."""
    from judge.reports.render import write_report as write

    return write(report, out_dir)


def figure_png(figure: Figure) -> bytes:
    """One figure drawn as PNG bytes."""
    from judge.reports.render import figure_png as draw

    return draw(figure)
