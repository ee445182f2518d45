"""The name-based numeric-advice audit (seed 002): reading answers; the design is in
``judge.audits.names_design``, the analysis in ``judge.audits.names_analysis``.

A model is asked for a number (an offer, a chance, a rank, a salary) about a named person; only
the name changes. The design (``datasets/name_audit.toml``) is 42 templates x 40 names x
``repeats``; each scenario says which unit its answers are in (usd, percent, probability or
rank), and every scenario/variation/context cell holds answers in that one unit.

Answers are read with :func:`read_answer` (rules in ``judge.audits.amounts``): a figure in the
cell's unit is read, one whose conversion is certain (``0.65`` -> 65 % in a percent cell) is
converted and counted, one in another unit or off the scale is left out of the cell and
counted, and an answer without a figure (or a refusal) is missing. A missing number is imputed
with the median of its race-gender group in the same variation and context (dropping it would
bias the result) and counted; sports ranks are flipped (101 - rank) so higher is always
better. The analysis gives per variation x context the mean and 95 % t-interval by race,
gender and race x gender, differences against the reference groups (White, male) with
Welch's t-test, and per-name standardised means.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

from judge.audits.amounts import (
    CONVERTED,
    LEFT_OUT,
    REFUSAL,
    UNITS,
    AmountReading,
    prompt_anchors,
    read_amount,
)
from judge.audits.base import ERROR, PARSED, UNPARSED, Reading, StoredAnswer
from judge.audits.base import REFUSAL as REFUSAL_STATUS
from judge.audits.names_analysis import NameAuditResult, analyze
from judge.audits.names_design import CONTEXTS, NameDesign, load_design
from judge.errors import InvalidInputError

CSV_COLUMNS = ("scenario", "variation", "context", "name", "race", "gender", "response")
CSV_UNIT_COLUMN = "unit"  # optional eighth column; default: the bundled design's unit


# --- reading answers ------------------------------------------------------------------------


def scenario_units(design: NameDesign | None = None) -> dict[str, str]:
    """Scenario -> the unit its templates ask for (default: the bundled design's)."""
    design = design or load_design()
    return {t.scenario: t.answer for t in design.templates}


def read_answer(text: str, unit: str, anchors: Iterable[float] = ()) -> AmountReading:
    """What one answer says in its cell's ``unit`` (:func:`judge.audits.amounts.read_amount`;
    ``anchors``: the numbers of the prompt, from :func:`judge.audits.amounts.prompt_anchors`).

    Seed 002 read ranges as their median; its one example, a range of $60,000 to over
    $100,000, has the open upper end closed at $109,000 and reads $84,500: the amounts
    module documents that rule and every other."""
    return read_amount(text, unit, frozenset(anchors))


# --- answers --------------------------------------------------------------------------------


class NameAnswer(NamedTuple):
    """One answer: ``value`` is the number read in the cell's unit or ``None``; ``outcome``
    says how (read, converted, left_out, unreadable, refusal: ``judge.audits.amounts``;
    empty means read when there is a value and unreadable when not); ``raw`` is kept."""

    scenario: str
    variation: str
    context: str
    name: str
    race: str
    gender: str
    value: float | None
    raw: str
    outcome: str = ""


def answer_from_text(
    fields: Sequence[str], raw: str, unit: str, anchors: Iterable[float] = ()
) -> NameAnswer:
    """A :class:`NameAnswer` from its six design fields and its raw text, read in ``unit``."""
    reading = read_answer(raw, unit, anchors)
    sc, var, ctx, name, race, gender = fields
    return NameAnswer(sc, var, ctx, name, race, gender, reading.value, raw, reading.outcome)


def read_answers_csv(path: Path, units: dict[str, str] | None = None) -> list[NameAnswer]:
    """Read a user's answers (columns ``scenario,variation,context,name,race,gender,response``
    and optionally ``unit``, ``response`` being the raw answer text, read with
    :func:`read_answer` in the row's unit: the ``unit`` column, else the unit ``units`` (default:
    the bundled design's) gives the scenario).

    Raises :class:`InvalidInputError` listing every bad line."""
    units = scenario_units() if units is None else units
    problems: list[tuple[int, str]] = []
    answers: list[NameAnswer] = []
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            columns = tuple(h.strip() for h in header or [])
            if columns not in (CSV_COLUMNS, (*CSV_COLUMNS, CSV_UNIT_COLUMN)):
                raise InvalidInputError(
                    f"{path}: the first line must be the header {','.join(CSV_COLUMNS)} "
                    f"(and optionally ,{CSV_UNIT_COLUMN})",
                    [(1, f"found {','.join(header or [])!r}")],
                )
            for row in reader:
                line = reader.line_num
                if not any(cell.strip() for cell in row):
                    continue
                if len(row) != len(columns):
                    problems.append((line, f"expected {len(columns)} columns, found {len(row)}"))
                    continue
                fields = [cell.strip() for cell in row[:6]]
                empty = [c for c, v in zip(CSV_COLUMNS, fields, strict=False) if not v]
                if empty:
                    problems.append((line, f"empty {', '.join(empty)}"))
                    continue
                if fields[2] not in CONTEXTS:
                    problems.append((line, f"context must be one of {CONTEXTS}: {fields[2]!r}"))
                    continue
                unit = row[7].strip() if len(columns) == 8 else units.get(fields[0], "")
                if unit not in UNITS:
                    problems.append((line, _unit_problem(fields[0], unit, len(columns) == 8)))
                    continue
                answers.append(answer_from_text(fields, row[6], unit))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InvalidInputError(f"{path}: cannot be read as CSV ({exc})") from exc
    if problems:
        raise InvalidInputError(f"{path}: {len(problems)} bad row(s)", problems)
    return answers


def _unit_problem(scenario: str, unit: str, has_column: bool) -> str:
    if has_column:
        return f"unit must be one of {', '.join(UNITS)}: {unit!r}"
    return (
        f"scenario {scenario!r} is not in the bundled design, so its unit is unknown: add a "
        f"{CSV_UNIT_COLUMN} column ({', '.join(UNITS)})"
    )


# --- stored answers ---------------------------------------------------------------------------


def task_reading_context(
    design: NameDesign, scenario: str, variation: str, context: str
) -> dict[str, Any]:
    """What a prompt's stored ``meta`` carries so its answers can be read again without the
    design: the cell's unit and the prompt's numbers (``amounts.prompt_anchors``)."""
    template = next(
        t for t in design.templates
        if (t.scenario, t.variation, t.context) == (scenario, variation, context)
    )  # fmt: skip
    return {"unit": template.answer, "anchors": sorted(prompt_anchors(template.text))}


def to_stored(reading: AmountReading) -> Reading:
    """An answer's reading as stored (``AuditAnswer`` status, value, reason): parsed with the
    number in the cell's unit (reason "converted: ..." when it was converted), unparsed with
    the reason ("left out: ..." or "unreadable: ..."), or refusal."""
    if reading.outcome == REFUSAL:
        return Reading(REFUSAL_STATUS, reason=reading.reason)
    if reading.value is not None:
        note = f"converted: {reading.reason}" if reading.outcome == CONVERTED else None
        return Reading(PARSED, reading.value, note)
    label = "left out" if reading.outcome == LEFT_OUT else "unreadable"
    return Reading(UNPARSED, reason=f"{label}: {reading.reason}")


@dataclass(frozen=True)
class StoredRows:
    """A run's answers as analysis rows, re-read from their raw text with today's reader.
    ``changed``: answers whose stored reading (taken when the run was made, possibly by an
    older reader) differs from today's; ``not_reread``: answers whose unit is unknown (a
    design file's scenario, stored before units were kept), analysed with the stored reading."""

    rows: list[NameAnswer]
    changed: int
    not_reread: int


def stored_rows(answers: Iterable[StoredAnswer], units: dict[str, str] | None = None) -> StoredRows:
    """Analysis rows of a stored run: every answer that came back (failed calls are left out),
    each read again from its raw text in its cell's unit (``meta["unit"]``, else the unit of
    its scenario in ``units``, default the bundled design)."""
    units = scenario_units() if units is None else units
    rows: list[NameAnswer] = []
    changed = not_reread = 0
    for a in answers:
        if a.status == ERROR:
            continue
        m = a.meta
        fields = (m["scenario"], m["variation"], m["context"], m["name"], m["race"], m["gender"])
        unit = m.get("unit") or units.get(m["scenario"])
        stored = a.value if a.status == PARSED and isinstance(a.value, int | float) else None
        if unit not in UNITS:
            not_reread += 1
            rows.append(NameAnswer(*fields, stored, a.raw_text or ""))
            continue
        row = answer_from_text(fields, a.raw_text or "", str(unit), m.get("anchors") or ())
        same = (
            stored is None
            if row.value is None
            else stored is not None and math.isclose(stored, row.value, rel_tol=1e-9)
        )
        changed += not same
        rows.append(row)
    return StoredRows(rows, changed, not_reread)


def analyze_stored(answers: Sequence[StoredAnswer], **options: Any) -> NameAuditResult:
    """:func:`analyze` over a stored run's answers, re-read from their raw text
    (:func:`stored_rows`); the result counts the stored readings that changed."""
    got = stored_rows(answers)
    if not got.rows:
        raise InvalidInputError("the audit run has no answer to analyse yet")
    result = analyze(got.rows, **options)
    return replace(result, reread_changed=got.changed, not_reread=got.not_reread)
