"""The contract between whatever produces report content (stage metrics, reliability, audits)
and the renderers (JSON, CSV, HTML, the CLI's tables). Producers build these types; renderers
know nothing about producers, and figures are described, not drawn (``render`` draws them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Table:
    """A table of preformatted cells.

    The first ``key_columns`` columns name a row (a factor, a rubric); a renderer short of
    width repeats them beside each slice of the other columns, or lays the table out long
    (one line per row and column).
    """

    title: str
    columns: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)
    key_columns: int = 1


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


@dataclass(frozen=True)
class BarChart:
    """Bars with their confidence intervals (``None`` bounds: no interval), and an optional
    reference line (e.g. 0.5 for a share, 0 for a balance score). ``ylabel`` names the value
    and its unit; ``ns``, where given, the items behind each bar (in the bars' order), written
    beside its mark."""

    title: str
    bars: list[tuple[str, float, float | None, float | None]]
    ylabel: str
    reference: float | None = None
    ns: list[int] = field(default_factory=list)


Figure = BoxPlot | AgreementPlot | BarChart


@dataclass(frozen=True)
class BrowsedAnswer:
    """One answer of the model under test: the prompt it was given and what it said."""

    part: str  # "answer", or "A" / "B" for the two prompts of S2 and S3 items
    prompt: str
    text: str | None
    flag: str  # ok, truncated, empty, refusal or error
    finish_reason: str | None  # "length": the answer was cut off at max_tokens
    error: str | None = None


@dataclass(frozen=True)
class BrowsedJudgment:
    """One judge sample for one rubric: its score, or why it has none, and the raw reply."""

    rubric: str
    sample_index: int
    score: int | None
    unscored_kind: str | None
    reason: str | None
    explanation: str | None
    raw_output: str | None
    repair_output: str | None
    finish_reason: str | None  # of the judge's (first) reply; "length": cut off
    judgment_id: int | None = None
    # "given" or "swapped" for a pair judged in both orders (judge --swap-order), with
    # ``repeat`` the sample within that order; None and the sample index otherwise.
    position: str | None = None
    repeat: int | None = None


@dataclass(frozen=True)
class BrowsedItem:
    """A judged item with its texts, the model's answers and every judgment of it."""

    item_id: int
    key: str
    stage: str
    factor: str
    scenario: str
    texts: dict[str, str]  # the item's fields: question(s), stories, expected answer
    answers: list[BrowsedAnswer]
    judgments: list[BrowsedJudgment]
    combined: dict[str, float | None]  # rubric -> the item's combined score

    @property
    def flags(self) -> list[str]:
        """What a reader should notice: answers not ok or cut off, judge replies cut off,
        judgments that needed a repair request or have no score."""
        # A truncated answer is named once, by its cut (flag 'truncated', finish_reason=length).
        out = [
            f"answer {a.part}: {a.flag}" for a in self.answers if a.flag not in ("ok", "truncated")
        ]
        out += [
            f"answer {a.part} cut off (finish_reason=length)"
            for a in self.answers
            if a.finish_reason == "length"
        ]
        out += [
            f"{j.rubric} judge reply cut off (finish_reason=length)"
            for j in self.judgments
            if j.finish_reason == "length"
        ]
        out += [f"{j.rubric} repaired" for j in self.judgments if j.repair_output is not None]
        out += [f"{j.rubric} unscored" for j in self.judgments if j.score is None]
        return list(dict.fromkeys(out))

    @property
    def flag_kinds(self) -> list[str]:
        """The kinds of flag the item has, for filtering: answer_not_ok, cut_off, repaired,
        unscored (and 'flagged' when it has any)."""
        kinds = []
        if any(a.flag not in ("ok", "truncated") for a in self.answers):
            kinds.append("answer_not_ok")  # a truncated answer is filed under cut_off
        if any(a.finish_reason == "length" for a in self.answers) or any(
            j.finish_reason == "length" for j in self.judgments
        ):
            kinds.append("cut_off")
        if any(j.repair_output is not None for j in self.judgments):
            kinds.append("repaired")
        if any(j.score is None for j in self.judgments):
            kinds.append("unscored")
        return ["flagged", *kinds] if kinds else []


@dataclass(frozen=True)
class ItemBrowser:
    """Every judged item of a run, for a reader to look through (HTML: a filterable list)."""

    title: str
    items: list[BrowsedItem]


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
    browser: ItemBrowser | None = None


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
