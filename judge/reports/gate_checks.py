"""Gates evaluated against the figures handed in: pure, no store (the use case reads the runs).

A run's figures are the run report's: every stage metric and rubric mean (``PAIRED_METRICS``)
overall and per factor, its value in percent and its 95 % interval by the report's one rule
(``judge.metrics.figure_interval``: Wilson for a share, Student t for a mean, none below 5
items or with no spread, and then the reason). A paired gate reads the row of the paired table
(``judge.reports.compare_paired.paired_rows``: B - A in points, its 95 % bootstrap interval,
Holm's flag, the equivalence and no-worse verdicts at the gate's margin).

A gate whose figure has no number to check (no interval, too few pairs for a verdict) does
not pass: a pipeline cannot stand on a figure that is not there, so it fails with the reason
(outcome ``no figure``), never silently.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from statistics import fmean

from judge.errors import InvalidInputError
from judge.metrics import ItemScore, StageMetric, figure_interval
from judge.reports.compare_paired import (
    PAIRED_METRICS,
    PairedRow,
    check_same_items,
    paired_cell,
    paired_p_value,
)
from judge.reports.gates import EVERY, FIGURE, OVERALL, PAIRED, QUALIFIED, Gate, RunRef
from judge.stats.multiplicity import ALPHA, flags, holm
from judge.vocab import SCALE

PASS, FAIL, NO_FIGURE = "pass", "fail", "no figure"


@dataclass(frozen=True)
class Figure:
    """One figure of a run: value and 95 % interval in percent (None: not defined, ``note``
    says why), over ``n`` scored items."""

    factor: str
    metric: str  # the metric's name in report.json
    value: float | None
    low: float | None
    high: float | None
    n: int
    note: str = ""


def _units(metric: StageMetric, scores: Sequence[float]) -> list[float]:
    if metric.kind == "mean_pct":
        return [s * 100 / SCALE.high for s in scores]
    return [100.0 if s >= metric.threshold else 0.0 for s in scores]


class RunFigures(Mapping[tuple[str, str], Figure]):
    """(factor, metric name) -> figure, for 'all' and every factor the run has items of; each
    figure is computed when first read (a gates file reads a few of a run's hundreds)."""

    def __init__(self, scores: Iterable[ItemScore]) -> None:
        present: dict[tuple[str, str, str], list[float]] = {}
        for s in scores:
            for factor in (OVERALL, s.factor):
                scored = present.setdefault((factor, s.stage, s.rubric), [])
                if s.score is not None:
                    scored.append(s.score)
        self._cells = {
            (factor, metric.name): (metric, scored)
            for (factor, stage, rubric), scored in sorted(present.items())
            for metric in PAIRED_METRICS
            if (metric.stage, metric.rubric) == (stage, rubric)
        }
        self._done: dict[tuple[str, str], Figure] = {}

    def __getitem__(self, key: tuple[str, str]) -> Figure:
        if key not in self._done:
            metric, scored = self._cells[key]
            ci = figure_interval(metric, scored)
            value = fmean(_units(metric, scored)) if scored else None
            note = "no scored item" if value is None else ci.reason
            self._done[key] = Figure(key[0], metric.name, value, ci.low, ci.high, len(scored), note)
        return self._done[key]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._cells)

    def __len__(self) -> int:
        return len(self._cells)


def run_figures(scores: Iterable[ItemScore]) -> RunFigures:
    """A run's figures (``RunFigures``) from its item scores."""
    return RunFigures(scores)


Pairs = dict[tuple[str, StageMetric], list[tuple[float | None, float | None]]]


def paired_cells(a: Sequence[ItemScore], b: Sequence[ItemScore]) -> Pairs:
    """(factor, metric) -> the (A score, B score) pairs of each cell of the paired table, as
    ``compare_paired.paired_rows`` groups them (overall first, then each factor), for runs that
    passed ``check_same_items``."""
    by_key = {(s.item_id, s.rubric): s for s in b}
    cells: dict[tuple[str, str, str], list[tuple[float | None, float | None]]] = defaultdict(list)
    for s in a:
        other = by_key[(s.item_id, s.rubric)]
        for factor in (OVERALL, s.factor):
            cells[(factor, s.stage, s.rubric)].append((s.score, other.score))
    factors = [OVERALL, *sorted({f for f, _, _ in cells} - {OVERALL})]
    return {
        (factor, metric): cells[(factor, metric.stage, metric.rubric)]
        for factor in factors
        for metric in PAIRED_METRICS
        if cells.get((factor, metric.stage, metric.rubric))
    }


def paired_table(
    cells: Pairs, wanted: set[tuple[str, str]], *, margin: float, flags_read: bool = True
) -> dict[tuple[str, str], PairedRow]:
    """The rows of the paired table (``compare_paired.paired_cell``, Holm over every cell as
    ``paired_rows`` does) for the (factor, metric name) cells in ``wanted``: only they get a
    row, bootstrapped interval and verdicts; every other cell only gets its p-value
    (``compare_paired.paired_p_value``), since Holm's correction runs over all of them. With
    ``flags_read=False`` (no gate of the table reads Holm's flag) the other cells are not
    tested at all and the rows' ``p_adjusted`` is None and ``flagged`` False: not
    corrected, which no check reads."""
    rows = {
        (factor, metric.name): paired_cell(metric, factor, pairs, margin=margin)
        for (factor, metric), pairs in cells.items()
        if (factor, metric.name) in wanted
    }
    if not flags_read:
        return rows
    family = [
        rows[(factor, metric.name)].p_value
        if (factor, metric.name) in rows
        else paired_p_value(metric, pairs)
        for (factor, metric), pairs in cells.items()
    ]
    adjusted = holm(family)
    flagged = flags(adjusted, ALPHA)
    out = {}
    for (factor, metric), p, f in zip(cells, adjusted, flagged, strict=True):
        row = rows.get((factor, metric.name))
        if row is not None:
            out[(factor, metric.name)] = replace(row, p_adjusted=None if p != p else p, flagged=f)
    return out


@dataclass(frozen=True)
class Check:
    """One figure a gate read: the number it checked (None: none to check) and the verdict."""

    factor: str
    number: float | None
    passed: bool
    value: float | None = None
    low: float | None = None
    high: float | None = None
    note: str = ""  # why there was no number or verdict to check (then the gate fails)
    detail: str = ""  # how a verdict was reached, when it says more than the interval


@dataclass(frozen=True)
class GateResult:
    """A gate's outcome (PASS, FAIL or NO_FIGURE, which fails too), the figures it read and
    one line saying what was found against what was asked."""

    gate: Gate
    run_ids: tuple[int, ...]
    outcome: str
    message: str
    checks: list[Check] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.outcome == PASS

    def to_dict(self) -> dict[str, object]:
        g = self.gate
        return {
            "index": g.index,
            "name": g.name,
            "kind": g.kind,
            "line": g.line,
            "runs": list(self.run_ids),
            "figure": g.metric.name if g.metric else None,
            "factor": g.factor if g.metric else None,
            "of": (g.of if g.require is None else None) if g.metric else None,
            "min": g.low,
            "max": g.high,
            "require": g.require,
            "margin": g.margin if g.kind == PAIRED else None,
            "rubrics": list(g.rubrics) if g.rubrics else None,
            "unit": {FIGURE: "percent", PAIRED: "percentage points"}.get(g.kind),
            "threshold": g.threshold(),
            "outcome": self.outcome,
            "passed": self.passed,
            "message": self.message,
            "checks": [vars(c) for c in self.checks],
        }


@dataclass(frozen=True)
class RubricStanding:
    """A rubric's standing for a judge run, as ``server.usecases.standing`` reads it."""

    rubric: str
    validated: bool
    says: str


@dataclass(frozen=True)
class GateInputs:
    """What the gates are checked against, keyed by judge run id: each run's item scores
    (the figures and the pairs come from them) and the standing of the runs a qualified gate
    names; ``refs`` maps each reference of the file to its run id."""

    refs: Mapping[RunRef, int]
    scores: Mapping[int, Sequence[ItemScore]]
    standing: Mapping[int, Mapping[str, RubricStanding]] = field(default_factory=dict)
    labels: Mapping[int, str] = field(default_factory=dict)


def _factors(gate: Gate, keys: Iterable[tuple[str, str]]) -> list[str]:
    assert gate.metric is not None
    have = sorted({f for f, m in keys if m == gate.metric.name})
    if gate.factor == EVERY:
        return [f for f in have if f != OVERALL]
    return [gate.factor] if gate.factor in have else []


def missing_figures(
    gates: Sequence[Gate],
    inputs: GateInputs,
    figures: Mapping[int, Mapping[tuple[str, str], Figure]],
) -> list[tuple[int, str]]:
    """(line, reason) for each gate naming a figure its runs do not have (a stage or rubric
    the run did not judge, a factor without items), paired runs of different items, and a
    qualified gate's rubric the run did not use."""
    problems: list[tuple[int, str]] = []
    refused: dict[tuple[int, int], str] = {}  # each pair checked once, however many gates
    for gate in gates:
        ids = [inputs.refs[r] for r in gate.runs]
        who = f"gate {gate.index} ({gate.name!r})"
        if gate.metric is not None:
            for run_id in ids:
                if _factors(gate, figures[run_id]):
                    continue
                where = {EVERY: "any factor", OVERALL: "all items"}.get(
                    gate.factor, f"factor {gate.factor!r}"
                )
                known = sorted({f for f, m in figures[run_id] if m == gate.metric.name})
                problems.append(
                    (gate.line_of("factor" if known else "figure"),
                     f"{who}: judge run {run_id} has no {gate.metric.label} figure for {where}"
                     + (f" (it has: {', '.join(known)})" if known else
                        f" (it judged no {gate.metric.stage} item with {gate.metric.rubric})"))
                )  # fmt: skip
        if gate.kind == PAIRED and len(ids) == 2:
            pair = (ids[0], ids[1])
            if pair not in refused:
                refused[pair] = _different_items(inputs, *pair)
            if refused[pair]:
                problems.append((gate.line_of("compare"), f"{who}: {refused[pair]}"))
        if gate.kind == QUALIFIED and gate.rubrics:
            used = inputs.standing.get(ids[0], {})
            for rubric in gate.rubrics:
                if rubric not in used:
                    judged = ", ".join(sorted(used)) or "nothing"
                    problems.append(
                        (
                            gate.line_of("rubrics"),
                            f"{who}: judge run {ids[0]} did not judge {rubric} (it judged: "
                            f"{judged})",
                        )
                    )
    return problems


def _different_items(inputs: GateInputs, a: int, b: int) -> str:
    """Why runs ``a`` and ``b`` cannot be paired ("" when they can)."""
    try:
        check_same_items(inputs.scores[a], inputs.scores[b], f"judge run {a}", f"judge run {b}")
    except InvalidInputError as exc:
        return str(exc).split(". ")[0]
    return ""


def _within(gate: Gate, number: float) -> bool:
    return (gate.low is None or number >= gate.low) and (gate.high is None or number <= gate.high)


def _number(of: str, value: float | None, low: float | None, high: float | None) -> float | None:
    return {"value": value, "lower": low, "upper": high}[of]


def _figure_check(gate: Gate, f: Figure) -> Check:
    number = _number(gate.of, f.value, f.low, f.high)
    note = "" if number is not None else (f.note or f"no {gate.of} bound")
    return Check(
        f.factor, number, number is not None and _within(gate, number), f.value, f.low, f.high,
        note,
    )  # fmt: skip


def _paired_check(gate: Gate, row: PairedRow) -> Check:
    if gate.require is not None:
        verdict = {
            "no_worse": row.no_worse,
            "equivalent": row.equivalent,
            "not_flagged": None if row.p_adjusted is None else not row.flagged,
        }[gate.require]
        note = "" if verdict is not None else (row.note or "too few pairs for a verdict")
        return Check(
            row.factor, None, bool(verdict), row.diff, row.ci_low, row.ci_high, note,
            "" if note else row.note,
        )  # fmt: skip
    number = _number(gate.of, row.diff, row.ci_low, row.ci_high)
    note = "" if number is not None else (row.note or f"no {gate.of} bound")
    return Check(
        row.factor, number, number is not None and _within(gate, number), row.diff,
        row.ci_low, row.ci_high, note,
    )  # fmt: skip


def _points(x: float | None) -> str:
    return "none" if x is None else f"{x:.4g}"


def _found(gate: Gate, c: Check, unit: str) -> str:
    """One figure read, in words: 'race 72.1 %', 'race none (too few items ...)', or for a
    verdict 'race no (B - A -12.5 [-20.1, -4.9] points)'."""
    if c.note:  # set only when there was no number or verdict to check
        return f"{c.factor} none ({c.note})"
    if gate.require is None:
        return f"{c.factor} {_points(c.number)}{unit}"
    interval = f" [{_points(c.low)}, {_points(c.high)}]" if c.low is not None else ""
    detail = f"; {c.detail}" if c.detail else ""
    verdict = "yes" if c.passed else "no"
    return f"{c.factor} {verdict} (B - A {_points(c.value)}{interval}{unit}{detail})"


def _summary(gate: Gate, checks: Sequence[Check], unit: str) -> tuple[str, str]:
    """The outcome and its one line: the figure read (the failing ones for every factor)."""
    failing = [c for c in checks if not c.passed]
    what = gate.metric.label if gate.metric else ""
    read = "verdict" if gate.require else ("value" if gate.of == "value" else f"{gate.of} bound")
    if not failing:
        if len(checks) == 1:
            return PASS, f"{what} {read}: {_found(gate, checks[0], unit)}; required " + (
                gate.threshold()
            )
        return PASS, f"{what} {read}: {gate.threshold()} for all {len(checks)} factors"
    shown = "; ".join(_found(gate, c, unit) for c in failing)
    outcome = NO_FIGURE if all(c.note for c in failing) else FAIL
    count = f" ({len(failing)} of {len(checks)} factors)" if gate.factor == EVERY else ""
    return outcome, f"{what} {read}{count}: {shown}; required {gate.threshold()}"


def evaluate(
    gates: Sequence[Gate],
    inputs: GateInputs,
    figures: Mapping[int, Mapping[tuple[str, str], Figure]] | None = None,
) -> list[GateResult]:
    """Every gate's result, in file order; ``figures``: each run's ``run_figures`` when
    already computed. The gates must have passed ``missing_figures``."""
    figures = figures or {i: run_figures(s) for i, s in inputs.scores.items()}
    paired = _paired_tables(gates, inputs)
    out = []
    for gate in gates:
        ids = tuple(inputs.refs[r] for r in gate.runs)
        if gate.metric is None:
            out.append(_qualified(gate, ids[0], inputs.standing.get(ids[0], {})))
            continue
        if gate.kind == FIGURE:
            table = figures[ids[0]]
            checks = [_figure_check(gate, table[(f, gate.metric.name)])
                      for f in _factors(gate, table)]  # fmt: skip
            unit = " %"
        else:
            rows = paired[(ids[0], ids[1], gate.margin)]
            checks = [_paired_check(gate, rows[(f, gate.metric.name)])
                      for f in _factors(gate, rows)]  # fmt: skip
            unit = " points"
        outcome, message = _summary(gate, checks, unit)
        out.append(GateResult(gate, ids, outcome, message, checks))
    return out


def _paired_tables(
    gates: Sequence[Gate], inputs: GateInputs
) -> dict[tuple[int, int, float], dict[tuple[str, str], PairedRow]]:
    """The paired table of each (A, B, margin) the gates compare, with the cells they read;
    Holm's correction over the whole table only where a gate reads its flag."""
    wanted: dict[tuple[int, int, float], set[tuple[str, str]]] = defaultdict(set)
    flags_read: set[tuple[int, int, float]] = set()
    cells: dict[tuple[int, int], Pairs] = {}
    for gate in gates:
        if gate.kind != PAIRED or gate.metric is None:
            continue
        a, b = (inputs.refs[r] for r in gate.runs)
        if (a, b) not in cells:
            cells[(a, b)] = paired_cells(inputs.scores[a], inputs.scores[b])
        keys = [(f, m.name) for f, m in cells[(a, b)]]
        wanted[(a, b, gate.margin)] |= {(f, gate.metric.name) for f in _factors(gate, keys)}
        if gate.require == "not_flagged":
            flags_read.add((a, b, gate.margin))
    return {
        key: paired_table(cells[key[:2]], want, margin=key[2], flags_read=key in flags_read)
        for key, want in wanted.items()
    }


def _qualified(gate: Gate, run_id: int, standing: Mapping[str, RubricStanding]) -> GateResult:
    rubrics = list(gate.rubrics or sorted(standing))
    checks = [Check(r, None, standing[r].validated, note=standing[r].says) for r in rubrics]
    failing = [c for c in checks if not c.passed]
    if not rubrics:
        return GateResult(gate, (run_id,), NO_FIGURE, f"judge run {run_id} judged no rubric")
    if failing:
        shown = "; ".join(f"{c.factor}: {c.note}" for c in failing)
        return GateResult(gate, (run_id,), FAIL, shown, checks)
    return GateResult(gate, (run_id,), PASS, f"validated for {', '.join(rubrics)}", checks)
