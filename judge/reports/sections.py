"""The contract between whatever produces report content (stage metrics, reliability, audits)
and the renderers (JSON, CSV, HTML, the CLI's tables). Producers build these types; renderers
know nothing about producers, and figures are described, not drawn (``render`` draws them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Table:
    """A table of preformatted cells."""

    title: str
    columns: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class BoxPlot:
    """Box plots of values per labelled group, on a fixed y range."""

    title: str
    series: list[tuple[str, list[float]]]
    ylabel: str
    ylim: tuple[float, float]


@dataclass(frozen=True)
class AgreementPlot:
    """A jittered judge-vs-human scatter beside the confusion matrix of their categories."""

    title: str
    judge: list[float]
    human: list[float]
    confusion: list[list[int]]


Figure = BoxPlot | AgreementPlot


@dataclass(frozen=True)
class Section:
    """One part of a report.

    ``payload`` is the section's machine-readable content in report.json: under ``json_key``,
    or merged into the top level when ``json_key`` is None. ``csv`` names extra CSV files
    (file name -> rows) the section contributes.
    """

    title: str
    json_key: str | None
    payload: dict[str, Any]
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    csv: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


@dataclass(frozen=True)
class Report:
    """A titled list of sections; ``to_json`` is what report.json and the API return."""

    title: str
    intro: str
    sections: list[Section]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for section in self.sections:
            if section.json_key is None:
                out.update(section.payload)
            else:
                out[section.json_key] = section.payload
        return out

    def section(self, title: str) -> Section | None:
        return next((s for s in self.sections if s.title == title), None)
