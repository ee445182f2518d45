"""A gates file read and checked: release gates a CI pipeline can stand on (``fairjudge
gate``). Pure: text in, the gates and every problem found out; the figures they are checked
against are ``judge.reports.gate_checks``'s, the store is read by the use case.

The file is TOML (docs/gates.md): an optional ``[runs]`` table naming judge runs, and one
``[[gate]]`` table per gate, of one of three kinds, told apart by the key that names its runs:

* ``run = R``: a figure of one run (a stage metric or a rubric mean, overall, for one factor,
  or for every factor), its value or a bound of its 95 % interval, against ``min``/``max``;
* ``compare = [A, B]``: the paired difference B - A of two runs of the same items
  (``judge.reports.compare_paired``), its value or interval bound against ``min``/``max``, or
  a verdict (``require = "no_worse" | "equivalent" | "not_flagged"``);
* ``qualified = R``: the judge of run R is validated for every rubric it used (or those of
  ``rubrics``).

tomllib reports neither the line of a key nor more than one syntax error, so the lines of
problems come from a light scan of the text: the n-th ``[[gate]]`` header and the key's own
``key =`` line below it. Every problem of the file is collected before any is reported.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from judge.metrics import StageMetric
from judge.reports.compare_paired import DEFAULT_MARGIN, PAIRED_METRICS

FIGURE, PAIRED, QUALIFIED = "figure", "paired", "qualified"
OVERALL, EVERY = "all", "every"
BOUNDS = ("value", "lower", "upper")
VERDICTS = ("no_worse", "equivalent", "not_flagged")
LATEST = "latest"
GATE_KEYS = {
    FIGURE: {"name", "run", "figure", "factor", "of", "min", "max"},
    PAIRED: {"name", "compare", "figure", "factor", "of", "min", "max", "require", "margin"},
    QUALIFIED: {"name", "qualified", "rubrics"},
}
KIND_KEY = {"run": FIGURE, "compare": PAIRED, "qualified": QUALIFIED}
SELECTOR_KEYS = {"latest", "model", "judge_model", "dataset"}

RunRef = int | str
"""A judge run as a gate names it: its id, a name from ``[runs]``, or ``"latest"``."""


@dataclass(frozen=True)
class Selector:
    """The newest judge run whose generation run's model (the model under test), judge model
    and dataset match the given ones (None: any)."""

    model: str | None = None
    judge_model: str | None = None
    dataset: str | None = None

    def says(self) -> str:
        parts = [f"{k} {v!r}" for k, v in vars(self).items() if v is not None]
        return "the newest judge run" + (" of " + ", ".join(parts) if parts else "")


@dataclass(frozen=True)
class Gate:
    """One gate as the file gives it, checked for shape; ``line`` is its ``[[gate]]`` header
    and ``lines`` the line of each of its keys (for problems found later)."""

    index: int  # from 1, in file order
    name: str
    kind: str  # FIGURE, PAIRED or QUALIFIED
    line: int
    runs: tuple[RunRef, ...]  # one run, or (A, B) for a paired gate
    metric: StageMetric | None = None
    factor: str = OVERALL  # OVERALL, EVERY or one factor
    of: str = "value"
    low: float | None = None  # min
    high: float | None = None  # max
    require: str | None = None
    margin: float = DEFAULT_MARGIN
    rubrics: tuple[str, ...] | None = None
    lines: Mapping[str, int] = field(default_factory=dict)

    def line_of(self, key: str) -> int:
        return self.lines.get(key, self.line)

    def threshold(self) -> str:
        """The condition in words: '>= 80', '<= 10', 'in [1, 2]', 'no_worse'."""
        if self.kind == QUALIFIED:
            return "validated"
        if self.require is not None:
            return self.require.replace("_", " ")
        if self.low is not None and self.high is not None:
            return f"in [{self.low:g}, {self.high:g}]"
        return f">= {self.low:g}" if self.low is not None else f"<= {self.high:g}"


@dataclass(frozen=True)
class GatesFile:
    """The gates that are well formed, the runs the file names, and every problem found as
    (line, reason) pairs; the file is usable only when ``problems`` is empty."""

    gates: list[Gate]
    runs: dict[str, int | Selector]
    problems: list[tuple[int, str]]
    runs_lines: dict[str, int] = field(default_factory=dict)


def metric_named(text: str) -> StageMetric | None:
    """A stage metric or rubric mean by its table label ('S3 SBAS>=4', 'S1 ICS mean') or its
    name in report.json ('S3 SBAS share>=4 (%)'), case and spaces ignored."""
    want = " ".join(text.split()).lower()
    for metric in PAIRED_METRICS:
        if want in (metric.label.lower(), metric.name.lower()):
            return metric
    return None


def figure_names() -> str:
    return ", ".join(m.label for m in PAIRED_METRICS)


_HEADER = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.\"' -]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_-]+|\"[^\"]*\")\s*=")


def _blocks(text: str) -> tuple[list[tuple[int, dict[str, int]]], dict[str, int], dict[str, int]]:
    """The line scan: each ``[[gate]]`` block's header line and its keys' lines, the
    ``[runs]`` keys' lines, and the top-level keys' lines."""
    gates: list[tuple[int, dict[str, int]]] = []
    runs: dict[str, int] = {}
    top: dict[str, int] = {}
    current: dict[str, int] | None = top
    for number, raw in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(raw)
        if header:
            name = header.group(1).strip().strip("\"'")
            if raw.strip().startswith("[[") and name == "gate":
                gates.append((number, {}))
                current = gates[-1][1]
            else:
                current = runs if name == "runs" else None
            continue
        key = _KEY.match(raw)
        if key and current is not None:
            current.setdefault(key.group(1).strip('"'), number)
    return gates, runs, top


def _syntax_line(exc: tomllib.TOMLDecodeError) -> tuple[int, str]:
    found = re.search(r"\(at line (\d+), column \d+\)", str(exc))
    reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
    if found is None:
        return 1, f"not valid TOML: {reason}"
    return int(found.group(1)), f"not valid TOML: {reason} (TOML stops at its first error)"


def parse_gates(text: str) -> GatesFile:
    """The gates file in ``text`` read and checked for shape (see the module docstring);
    nothing here reads the store, so a run or figure that does not exist is the caller's
    to find (``judge.reports.gate_checks.missing_figures``)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return GatesFile([], {}, [_syntax_line(exc)])
    blocks, runs_lines, top_lines = _blocks(text)
    problems: list[tuple[int, str]] = []
    for key in sorted(set(data) - {"runs", "gate"}):
        problems.append(
            (top_lines.get(key, 1), f"unknown key {key!r}: a gates file has [runs] and [[gate]]")
        )
    runs = _runs(data.get("runs", {}), runs_lines, problems)
    raw_gates = data.get("gate", [])
    if not isinstance(raw_gates, list) or not all(isinstance(g, dict) for g in raw_gates):
        problems.append((1, "gate must be an array of tables: one [[gate]] per gate"))
        raw_gates = []
    if not raw_gates and not problems:
        problems.append((1, "no gates: add at least one [[gate]] table (see docs/gates.md)"))
    gates: list[Gate] = []
    names: dict[str, int] = {}
    for index, raw in enumerate(raw_gates, start=1):
        line, lines = blocks[index - 1] if index <= len(blocks) else (1, {})
        gate = _gate(index, raw, line, lines, runs, problems)
        if gate is None:
            continue
        if "name" in raw and gate.name in names:  # JUnit tells testcases apart by name
            problems.append(
                (gate.line_of("name"), f"{_who(gate)}: the same name as gate {names[gate.name]}")
            )
        names.setdefault(gate.name, index)
        gates.append(gate)
    return GatesFile(gates, runs, sorted(problems), runs_lines)


def _runs(
    raw: Any, lines: Mapping[str, int], problems: list[tuple[int, str]]
) -> dict[str, int | Selector]:
    if not isinstance(raw, dict):
        problems.append((1, "runs must be a table: [runs] then one name = JUDGE_RUN_ID a line"))
        return {}
    out: dict[str, int | Selector] = {}
    for name, value in raw.items():
        line = lines.get(name, 1)
        if name == LATEST:
            problems.append((line, f"runs: {LATEST!r} is built in; choose another name"))
        elif isinstance(value, int) and not isinstance(value, bool) and value > 0:
            out[name] = value
        elif isinstance(value, dict):
            selector = _selector(name, value, line, problems)
            if selector is not None:
                out[name] = selector
        else:
            problems.append(
                (
                    line,
                    f"runs.{name}: {value!r} is neither a judge run id (a positive whole "
                    'number) nor a selector such as { latest = true, model = "M" }',
                )
            )
    return out


def _selector(
    name: str, value: dict[str, Any], line: int, problems: list[tuple[int, str]]
) -> Selector | None:
    before = len(problems)
    unknown = sorted(set(value) - SELECTOR_KEYS)
    if unknown:
        problems.append(
            (line, f"runs.{name}: unknown key(s) {', '.join(unknown)}; a selector takes "
             f"{', '.join(sorted(SELECTOR_KEYS))}")
        )  # fmt: skip
    if value.get("latest") is not True:
        problems.append((line, f"runs.{name}: a selector needs latest = true"))
    texts = {k: value.get(k) for k in ("model", "judge_model", "dataset")}
    for key, text in texts.items():
        if text is not None and not isinstance(text, str):
            problems.append((line, f"runs.{name}.{key} must be a string, got {text!r}"))
    if len(problems) > before:
        return None
    return Selector(**texts)  # type: ignore[arg-type]


def _who(gate_or_index: Gate | int, name: str | None = None) -> str:
    if isinstance(gate_or_index, Gate):
        return f"gate {gate_or_index.index} ({gate_or_index.name!r})"
    return f"gate {gate_or_index}" + (f" ({name!r})" if name else "")


def _ref(value: Any, runs: Mapping[str, Any]) -> tuple[RunRef | None, str]:
    """A run reference and "", or None and the reason it is not one."""
    if isinstance(value, bool):
        return None, f"{value!r} is not a judge run"
    if isinstance(value, int):
        return (value, "") if value > 0 else (None, f"{value} is not a judge run id")
    if isinstance(value, str) and (value in runs or value == LATEST):
        return value, ""
    if isinstance(value, str):
        known = ", ".join(sorted(runs)) or "none"
        return None, f"no run named {value!r} in [runs] (named: {known}; or use an id or 'latest')"
    return None, f"{value!r} is not a judge run (an id, a name from [runs] or 'latest')"


def _number(gate: dict[str, Any], key: str, who: str, line: int, problems: list) -> float | None:
    value = gate.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        problems.append((line, f"{who}: {key} must be a number, got {value!r}"))
        return None
    return float(value)


def _gate(
    index: int,
    raw: dict[str, Any],
    line: int,
    lines: dict[str, int],
    runs: Mapping[str, Any],
    problems: list[tuple[int, str]],
) -> Gate | None:
    """One gate checked for shape; None (with its problems added) when it is not usable."""
    name = raw.get("name")
    who = _who(index, name if isinstance(name, str) else None)
    at = lines.get
    before = len(problems)
    kinds = [KIND_KEY[k] for k in KIND_KEY if k in raw]
    if len(kinds) != 1:
        found = "none" if not kinds else " and ".join(k for k in KIND_KEY if k in raw)
        problems.append(
            (line, f"{who}: give exactly one of run (a figure), compare (a paired difference) "
             f"or qualified (the judge's standing); found {found}")
        )  # fmt: skip
        return None
    kind = kinds[0]
    for key in sorted(set(raw) - GATE_KEYS[kind]):
        problems.append((at(key, line), f"{who}: unknown key {key!r} for a {kind} gate "
                         f"(keys: {', '.join(sorted(GATE_KEYS[kind]))})"))  # fmt: skip
    if name is not None and not (isinstance(name, str) and name.strip()):
        problems.append((at("name", line), f"{who}: name must be a non-empty string"))
    refs = _gate_runs(kind, raw, who, at, line, runs, problems)
    if kind == QUALIFIED:
        rubrics = raw.get("rubrics")
        if rubrics is not None and not (
            isinstance(rubrics, list) and rubrics and all(isinstance(r, str) for r in rubrics)
        ):
            problems.append((at("rubrics", line), f"{who}: rubrics must be a list of names"))
            rubrics = None
        if len(problems) > before:
            return None
        return Gate(
            index, name or f"judge of run {refs[0]} qualified", kind, line, refs,
            rubrics=tuple(rubrics) if rubrics else None, lines=lines,
        )  # fmt: skip
    return _figure_gate(index, raw, kind, name, who, line, lines, refs, problems, before)


def _gate_runs(
    kind: str,
    raw: dict[str, Any],
    who: str,
    at: Any,
    line: int,
    runs: Mapping[str, Any],
    problems: list[tuple[int, str]],
) -> tuple[RunRef, ...]:
    key = {FIGURE: "run", PAIRED: "compare", QUALIFIED: "qualified"}[kind]
    value = raw[key]
    if kind == PAIRED and not (isinstance(value, list) and len(value) == 2):
        problems.append((at(key, line), f"{who}: compare must be two runs, [A, B] (B - A)"))
        return ()
    found = [_ref(v, runs) for v in (value if kind == PAIRED else [value])]
    for _, reason in found:
        if reason:
            problems.append((at(key, line), f"{who}: {key}: {reason}"))
    refs = tuple(ref for ref, _ in found if ref is not None)
    if kind == PAIRED and len(refs) == 2 and refs[0] == refs[1]:
        problems.append((at(key, line), f"{who}: compare names the same run twice"))
    return refs


def _figure_gate(
    index: int,
    raw: dict[str, Any],
    kind: str,
    name: Any,
    who: str,
    line: int,
    lines: dict[str, int],
    refs: tuple[RunRef, ...],
    problems: list[tuple[int, str]],
    before: int,
) -> Gate | None:
    at = lines.get
    figure = raw.get("figure")
    metric = metric_named(figure) if isinstance(figure, str) else None
    if figure is None:
        problems.append((line, f"{who}: no figure (one of: {figure_names()})"))
    elif metric is None:
        problems.append(
            (at("figure", line), f"{who}: no figure {figure!r} (one of: {figure_names()})")
        )
    factor = raw.get("factor", OVERALL)
    if not isinstance(factor, str) or not factor.strip():
        problems.append((at("factor", line), f"{who}: factor must be a factor's name, "
                         f"{OVERALL!r} (all items) or {EVERY!r} (each factor)"))  # fmt: skip
    of = raw.get("of", "value")
    if of not in BOUNDS:
        problems.append((at("of", line), f"{who}: of must be one of {', '.join(BOUNDS)}, "
                         f"got {of!r}"))  # fmt: skip
    low = _number(raw, "min", who, at("min", line), problems)
    high = _number(raw, "max", who, at("max", line), problems)
    require = raw.get("require")
    margin = DEFAULT_MARGIN
    if kind == PAIRED:
        margin_raw = _number(raw, "margin", who, at("margin", line), problems)
        if margin_raw is not None and not margin_raw > 0:
            problems.append((at("margin", line), f"{who}: margin must be above 0 points"))
        margin = margin_raw if margin_raw is not None and margin_raw > 0 else DEFAULT_MARGIN
        if require is not None and require not in VERDICTS:
            problems.append((at("require", line), f"{who}: require must be one of "
                             f"{', '.join(VERDICTS)}, got {require!r}"))  # fmt: skip
    has_bound = "min" in raw or "max" in raw
    if require is not None and (has_bound or "of" in raw):
        problems.append((at("require", line), f"{who}: require is a verdict; it takes no "
                         "of, min or max (make two gates)"))  # fmt: skip
    elif require is None and not has_bound:
        needs = "min or max" + (" (or require)" if kind == PAIRED else "")
        problems.append((line, f"{who}: no threshold: give {needs}"))
    if low is not None and high is not None and low > high:
        problems.append((at("min", line), f"{who}: min {low:g} is above max {high:g}"))
    if len(problems) > before or metric is None:
        return None
    where = "every factor" if factor == EVERY else factor
    what = metric.label + ("" if of == "value" else f" {of} bound")
    default = (
        f"{what} ({where}) of run {refs[0]}"
        if kind == FIGURE
        else f"{refs[1]} - {refs[0]}: {what} ({where})"
    )
    gate = Gate(
        index, name or default, kind, line, refs, metric=metric, factor=factor, of=of,
        low=low, high=high, require=require, margin=margin, lines=lines,
    )  # fmt: skip
    return gate if name else replace(gate, name=f"{default} {gate.threshold()}")


def gate_refs(gates: Sequence[Gate]) -> list[RunRef]:
    """Every run reference the gates use, once each, in order of appearance."""
    return list(dict.fromkeys(ref for gate in gates for ref in gate.runs))
