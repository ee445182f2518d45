"""A series of judge runs of one configuration on the same anchor items, watched for drift
against its baseline after every run (``fairjudge drift``).

The series: judge runs given in release order, every one judged with the same judge settings
at the same server (the same ``config_hash``) on the same dataset's items, and every run
holding the same item x rubric pairs: the anchor set. A run that lacks an anchor item (a gap)
or holds one the first run lacks is refused with the items named: a drift figure over part of
the anchors would describe other items than the baseline's, and the difference would mix
drift with the change of items. An anchor the judge left unscored in a run is not a gap (the
item was judged and its failure is recorded): its pair drops out of that look and is counted.

The baseline is the first run, or the mean of the first ``k`` (item by item); each later run
is one look. A figure is a rubric mean (over a stage's items, in score points) or a stage
share (percent of items at or above the metric's threshold). For each figure and look the
paired differences run - baseline, item by item, go to ``judge.stats.sequential``, which
gives the drift estimate, its anytime-valid interval and the alarm. Several figures split
alpha equally (Bonferroni), so the whole table keeps the guarantee: with no drift anywhere,
the chance that any alarm of the table ever rings is at most alpha.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlmodel import Session

from judge.errors import InvalidInputError, NotFoundError
from judge.metrics import STAGE_METRICS, ItemScore, item_scores
from judge.reports.sections import Table
from judge.stats.sequential import ALPHA, METHOD, drift_looks, first_alarm
from judge.store.tables import GenerationRun, JudgeRun

SETTINGS = (
    "model",
    "base_url",
    "temperature",
    "max_tokens",
    "prompt_variant",
    "samples",
    "aggregation",
    "rubric_set",
    "swap_order",
)
"""The judge run's settings a configuration mismatch is explained by (``config_hash`` holds
them and the template versions)."""
SHOWN_ITEMS = 5


@dataclass(frozen=True)
class DriftFigure:
    """What can be watched: a rubric mean (points) or a stage share (percent)."""

    name: str  # "S2 TCS mean", "S2 TCS>=4"
    stage: str
    rubric: str
    kind: str  # "mean" or "share"
    threshold: int = 0

    def unit(self, score: float) -> float:
        return score if self.kind == "mean" else 100.0 * (score >= self.threshold)


@dataclass(frozen=True)
class SeriesRun:
    judge_run_id: int
    generation_run_id: int
    model: str  # the model under test (a release)
    status: str


@dataclass(frozen=True)
class DriftRow:
    """One run of one figure: the baseline's runs have no look."""

    judge_run_id: int
    model: str
    look: int | None
    value: float | None  # the figure in this run (over its scored anchors)
    pairs: int
    dropped: int  # anchors unscored in this run or in a baseline run
    estimate: float | None  # drift: mean paired difference run - baseline
    low: float | None
    high: float | None
    alpha: float | None  # the share of the figure's alpha spent at this look
    alarm: bool
    note: str = ""


@dataclass(frozen=True)
class FigureDrift:
    figure: DriftFigure
    alpha: float  # this figure's share of the table's alpha
    rows: list[DriftRow]
    first_alarm_run: int | None  # the judge run at whose look the alarm first rang


@dataclass(frozen=True)
class DriftSeries:
    runs: list[SeriesRun]
    baseline: int
    alpha: float
    anchors: int  # item x rubric pairs in every run
    figures: list[FigureDrift]
    method: str = METHOD
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def available_figures(scores: Sequence[ItemScore]) -> list[DriftFigure]:
    """Every rubric mean present, then the stage shares whose rubric is present."""
    present = dict.fromkeys((s.stage, s.rubric) for s in scores)
    means = [DriftFigure(f"{st} {ru} mean", st, ru, "mean") for st, ru in present]
    shares = [
        DriftFigure(m.label, m.stage, m.rubric, "share", m.threshold)
        for m in STAGE_METRICS
        if m.kind == "share" and (m.stage, m.rubric) in present
    ]
    return sorted(means, key=lambda f: f.stage) + shares


def chosen_figures(scores: Sequence[ItemScore], names: Sequence[str]) -> list[DriftFigure]:
    """The figures named (every rubric mean when none is), or an error listing the names."""
    figures = available_figures(scores)
    if not names:
        return [f for f in figures if f.kind == "mean"]
    by_name = {f.name.lower(): f for f in figures}
    unknown = [n for n in names if n.lower() not in by_name]
    if unknown:
        raise InvalidInputError(
            f"no figure {', '.join(repr(n) for n in unknown)} in these runs; choose from: "
            + ", ".join(f.name for f in figures)
        )
    return list(dict.fromkeys(by_name[n.lower()] for n in names))


def series_runs(session: Session, judge_run_ids: Sequence[int]) -> list[tuple[JudgeRun, int]]:
    """The runs in the order given with their dataset ids; refuses repeats, unknown ids,
    fewer than two runs, and runs of another configuration or dataset than the first."""
    ids = list(judge_run_ids)
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise InvalidInputError(
            f"judge run {', '.join(map(str, repeated))} is listed twice: give each run of the "
            "series once, in release order"
        )
    if len(ids) < 2:
        raise InvalidInputError(
            f"drift needs a series of at least two judge runs (a baseline and a later run), "
            f"got {len(ids)}"
        )
    found = {i: session.get(JudgeRun, i) for i in ids}
    missing = [str(i) for i, run in found.items() if run is None]
    if missing:
        raise NotFoundError(
            f"no judge run {', '.join(missing)}; see `fairjudge runs` for the runs that exist"
        )
    runs = []
    for i in ids:
        jrun = found[i]
        assert jrun is not None
        grun = session.get(GenerationRun, jrun.generation_run_id)
        assert grun is not None, "a judge run always has its generation run"
        runs.append((jrun, grun.dataset_id))
    _check_same_configuration(runs)
    return runs


def _check_same_configuration(runs: Sequence[tuple[JudgeRun, int]]) -> None:
    first, dataset = runs[0]
    for jrun, other_dataset in runs[1:]:
        if other_dataset != dataset:
            raise InvalidInputError(
                f"judge run {jrun.id} judged another dataset than judge run {first.id}: a drift "
                "series judges the same anchor items in every run"
            )
        if jrun.config_hash == first.config_hash:
            continue
        differ = [
            f"{name} {getattr(first, name)!r} vs {getattr(jrun, name)!r}"
            for name in SETTINGS
            if getattr(first, name) != getattr(jrun, name)
        ]
        why = "; ".join(differ) or (
            f"its judge templates or rubric versions (configuration {first.config_hash} vs "
            f"{jrun.config_hash})"
        )
        raise InvalidInputError(
            f"judge run {jrun.id} was judged with another configuration than judge run "
            f"{first.id} ({why}): a drift series holds one judge configuration"
        )


def _check_no_gaps(run_ids: Sequence[int], scores: Sequence[Sequence[ItemScore]]) -> int:
    """The number of anchors (the first run's item x rubric pairs); refuses a run with a gap."""
    keys = [{(s.item_id, s.rubric): s.item_key for s in run} for run in scores]
    anchors = keys[0]
    if not anchors:
        raise InvalidInputError(f"judge run {run_ids[0]} holds no judgment: nothing to watch")
    for run_id, other in zip(run_ids[1:], keys[1:], strict=True):
        lacking = sorted(set(anchors) - set(other))
        extra = sorted(set(other) - set(anchors))
        if not lacking and not extra:
            continue
        shown = lacking or extra
        names = {**anchors, **other}
        named = ", ".join(f"{names[p]} {p[1]}" for p in shown[:SHOWN_ITEMS])
        if len(shown) > SHOWN_ITEMS:
            named += f" and {len(shown) - SHOWN_ITEMS} more"
        what = (
            f"lacks {len(lacking)} anchor item x rubric pairs of judge run {run_ids[0]}"
            if lacking
            else f"holds {len(extra)} item x rubric pairs judge run {run_ids[0]} lacks"
        )
        raise InvalidInputError(
            f"drift series has a gap: judge run {run_id} {what} ({named}); every run "
            "must judge the same anchor items (judge the missing items, or leave the run out)"
        )
    return len(anchors)


def _figure_drift(
    figure: DriftFigure,
    runs: Sequence[SeriesRun],
    scores: Sequence[Sequence[ItemScore]],
    baseline: int,
    alpha: float,
) -> FigureDrift:
    per_run = [
        {s.item_id: s.score for s in run if (s.stage, s.rubric) == (figure.stage, figure.rubric)}
        for run in scores
    ]
    items = list(per_run[0])
    base: dict[int, float] = {}
    for item in items:
        sides = [per_run[k][item] for k in range(baseline)]
        if all(x is not None for x in sides):
            base[item] = sum(figure.unit(x) for x in sides if x is not None) / baseline
    diffs = [
        [figure.unit(x) - base[i] for i, x in values.items() if i in base and x is not None]
        for values in per_run[baseline:]
    ]
    looks = drift_looks(diffs, alpha=alpha)
    rows = []
    for k, (run, values) in enumerate(zip(runs, per_run, strict=True)):
        scored = [figure.unit(x) for x in values.values() if x is not None]
        value = sum(scored) / len(scored) if scored else None
        if k < baseline:
            rows.append(
                DriftRow(run.judge_run_id, run.model, None, value, len(scored),
                         len(items) - len(scored), None, None, None, None, False, "baseline")
            )  # fmt: skip
            continue
        look = looks[k - baseline]
        rows.append(
            DriftRow(run.judge_run_id, run.model, look.look, value, look.n, len(items) - look.n,
                     look.estimate, look.low, look.high, look.alpha, look.alarm, look.note)
        )  # fmt: skip
    first = first_alarm(looks)
    first_run = next((r.judge_run_id for r in rows if first is not None and r.look == first), None)
    return FigureDrift(figure, alpha, rows, first_run)


def drift_series(
    session: Session,
    judge_run_ids: Sequence[int],
    *,
    figures: Sequence[str] = (),
    baseline: int = 1,
    alpha: float = ALPHA,
) -> DriftSeries:
    """The drift of every chosen figure (every rubric mean when none is named) over the
    series ``judge_run_ids`` (release order), against the mean of its first ``baseline``
    runs; refuses what the module docstring says."""
    if not 0 < alpha < 1:
        raise InvalidInputError(f"--alpha must be between 0 and 1, got {alpha}")
    runs = series_runs(session, judge_run_ids)
    if not 1 <= baseline < len(runs):
        raise InvalidInputError(
            f"--baseline {baseline} leaves no run to watch: it must be at least 1 and below the "
            f"number of runs ({len(runs)})"
        )
    scores = [item_scores(session, int(j.id), j.aggregation) for j, _ in runs]  # type: ignore[arg-type]
    ids = [int(j.id) for j, _ in runs]  # type: ignore[arg-type]
    anchors = _check_no_gaps(ids, scores)
    chosen = chosen_figures(scores[0], figures)
    series = [_series_run(session, j) for j, _ in runs]
    share = alpha / len(chosen)
    done = [_figure_drift(f, series, scores, baseline, share) for f in chosen]
    return DriftSeries(
        series, baseline, alpha, anchors, done, notes=_notes(ids[0], baseline, alpha, len(chosen))
    )


def _notes(first: int, baseline: int, alpha: float, figures: int) -> list[str]:
    """What the tables' columns are, how they were computed and what they assume."""
    base = f"judge run {first}" if baseline == 1 else f"the mean of the first {baseline} runs"
    split = f", split equally over the {figures} figures ({alpha / figures:.3g} each)"
    return [
        f"Baseline: {base}, item by item; every later run is one look. Drift: the mean over "
        "the anchors of run - baseline (rubric means in score points, shares in percentage "
        "points).",
        f"Interval: {METHOD}; alpha {alpha:g}{split if figures > 1 else ''}. With no drift, the "
        "chance that any alarm of the series ever rings is at most alpha, looking after every "
        "run.",
        "Assumes: the anchor items are fixed; from run to run only the noise of answering and "
        "judging varies, independently between items. Pairs with an unscored side drop out of "
        "their look and are counted.",
    ]


def _series_run(session: Session, jrun: JudgeRun) -> SeriesRun:
    grun = session.get(GenerationRun, jrun.generation_run_id)
    assert grun is not None and jrun.id is not None and grun.id is not None
    return SeriesRun(jrun.id, grun.id, grun.model, jrun.status)


def _number(x: float | None, sign: bool = False, digits: int = 2) -> str:
    if x is None:
        return "-"
    return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"


def _cells(r: DriftRow, digits: int) -> list[str]:
    interval = (
        "-"
        if r.low is None
        else f"[{_number(r.low, True, digits)}, {_number(r.high, True, digits)}]"
    )
    return [
        str(r.judge_run_id),
        r.model,
        "baseline" if r.look is None else str(r.look),
        _number(r.value, digits=digits),
        f"{r.pairs} ({r.dropped})",
        _number(r.estimate, True, digits),
        interval,
        "-" if r.alpha is None else f"{r.alpha:.2g}",
        "-" if r.look is None else ("ALARM" if r.alarm else "no"),
    ]


def drift_tables(series: DriftSeries) -> tuple[list[Table], list[str]]:
    """One table per figure (a row per run) and the lines that follow them: each figure's
    first alarm, then the notes."""
    tables, lines = [], []
    for fd in series.figures:
        digits = 2 if fd.figure.kind == "mean" else 1
        body = [_cells(r, digits) for r in fd.rows]
        unit = "points" if fd.figure.kind == "mean" else "percentage points"
        tables.append(
            Table(
                f"Drift of {fd.figure.name} against the baseline ({unit})",
                ["judge run", "model", "look", "value", "pairs (dropped)", "drift",
                 "anytime-valid interval", "alpha spent", "alarm"],
                body,
                notes=[
                    f"judge run {r.judge_run_id}: {r.note}"
                    for r in fd.rows
                    if r.note and r.look is not None
                ],
            )
        )  # fmt: skip
        lines.append(
            f"{fd.figure.name}: first alarm at judge run {fd.first_alarm_run}"
            if fd.first_alarm_run is not None
            else f"{fd.figure.name}: no alarm"
        )
    return tables, lines + series.notes
