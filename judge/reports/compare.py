"""Several judge runs side by side: FairMonitor's Table 5 (stage metrics per factor and stage,
one column per model) and Figure 4 (score distributions per model across stages).

A column is a judge run, labelled by the model under test, plus the judge run's id when two
runs share a model (the same answers judged under two configurations, say). Every value
carries its interval and the count of scored and unscored items behind it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sqlmodel import Session, select

from judge.errors import InvalidInputError, NotFoundError
from judge.metrics import STAGE_METRICS, MetricRow, definition, item_scores, stage_metrics
from judge.reports.run_report import (
    counts_phrase,
    human,
    metric_cell,
    metric_glossary,
    metrics_legend,
    table_order,
)
from judge.reports.sections import BoxPlot, Figure, Section, Table
from judge.store.tables import Dataset, GenerationRun, JudgeRun, Judgment
from judge.vocab import SCALE

COMPARE_TITLE = "Model comparison"


@dataclass(frozen=True)
class ComparedRun:
    """One column of the comparison: a judge run and what it judged."""

    judge_run_id: int
    generation_run_id: int
    label: str
    model: str
    endpoint: str
    dataset: str | None
    judge_model: str
    prompt_variant: str
    temperature: float
    samples: int
    aggregation: str
    status: str

    def describe(self) -> str:
        return (
            f"{self.label}: judge run {self.judge_run_id} of generation run "
            f"{self.generation_run_id}, judged by {self.judge_model} ({self.prompt_variant} "
            f"prompt, temperature {self.temperature:g})"
        )


def compared_runs(session: Session, judge_run_ids: Sequence[int]) -> list[ComparedRun]:
    """The runs to compare, in the order given, labelled; refuses unknown ids and fewer than
    two distinct runs."""
    ids = list(dict.fromkeys(judge_run_ids))
    if len(ids) < 2:
        raise InvalidInputError(
            f"compare needs at least two different judge runs, got {list(judge_run_ids)}"
        )
    found = {i: session.get(JudgeRun, i) for i in ids}
    missing = [str(i) for i, run in found.items() if run is None]
    if missing:
        raise NotFoundError(
            f"no judge run {', '.join(missing)}; see `fairjudge runs` for the runs that exist"
        )
    pairs = []
    for i in ids:
        jrun = found[i]
        assert jrun is not None
        grun = session.get(GenerationRun, jrun.generation_run_id)
        assert grun is not None, "a judge run always has its generation run"
        pairs.append((jrun, grun))
    repeated = Counter(grun.model for _, grun in pairs)
    runs = []
    for jrun, grun in pairs:
        assert jrun.id is not None and grun.id is not None
        dataset = session.get(Dataset, grun.dataset_id)
        runs.append(
            ComparedRun(
                judge_run_id=jrun.id,
                generation_run_id=grun.id,
                label=grun.model
                if repeated[grun.model] == 1
                else f"{grun.model} (judge run {jrun.id})",
                model=grun.model,
                endpoint=grun.endpoint_name,
                dataset=dataset.name if dataset else None,
                judge_model=jrun.model,
                prompt_variant=jrun.prompt_variant,
                temperature=jrun.temperature,
                samples=jrun.samples,
                aggregation=jrun.aggregation,
                status=jrun.status,
            )
        )
    return runs


def compare_section(session: Session, runs: Sequence[ComparedRun]) -> Section:
    """The comparison as one section (flat in report.json)."""
    labels = [r.label for r in runs]
    overall: dict[str, list[MetricRow]] = {}
    by_factor: dict[str, list[MetricRow]] = {}
    distributions: dict[str, dict[tuple[str, str], list[float]]] = {}
    unscored: dict[str, dict[str, int]] = {}
    item_rows: list[dict[str, Any]] = []
    for run in runs:
        scores = item_scores(session, run.judge_run_id, run.aggregation)
        overall[run.label] = stage_metrics(scores, run.model, by_factor=False)
        by_factor[run.label] = stage_metrics(scores, run.model)
        dist: dict[tuple[str, str], list[float]] = {}
        for s in scores:
            if s.score is not None:
                dist.setdefault((s.stage, s.rubric), []).append(float(s.score))
        distributions[run.label] = dist
        kinds = session.exec(
            select(Judgment.unscored_kind).where(
                Judgment.judge_run_id == run.judge_run_id, Judgment.status != "scored"
            )
        ).all()
        unscored[run.label] = dict(Counter(kind or "unknown" for kind in kinds))
        item_rows += [
            {
                "label": run.label,
                "judge_run_id": run.judge_run_id,
                **asdict(s),
                "judgment_ids": " ".join(map(str, s.judgment_ids)),
                "unscored_reasons": " | ".join(s.unscored_reasons),
            }
            for s in scores
        ]

    def tagged(rows: dict[str, list[MetricRow]]) -> list[dict[str, Any]]:
        ids = {r.label: r.judge_run_id for r in runs}
        return [
            {"label": label, "judge_run_id": ids[label], **asdict(row)}
            for label in labels
            for row in rows[label]
        ]

    payload: dict[str, Any] = {
        "runs": [asdict(r) for r in runs],
        "metrics_overall": tagged(overall),
        "metrics_by_factor": tagged(by_factor),
        "metric_definitions": {m.name: definition(m) for m in STAGE_METRICS},
        "unscored": unscored,
    }
    notes = [
        f"Unscored judgments of {label}: {counts_phrase(unscored[label])}." for label in labels
    ]
    datasets = sorted({r.dataset or "unknown" for r in runs})
    if len(datasets) > 1:
        notes.insert(
            0,
            f"The runs answered different datasets ({', '.join(datasets)}): their values "
            "describe different items.",
        )
    return Section(
        title=COMPARE_TITLE,
        json_key=None,
        payload=payload,
        tables=[
            runs_table(runs),
            overall_table(overall, labels),
            factor_table(by_factor, labels),
        ],
        figures=box_plots(distributions, labels),
        notes=notes,
        csv={
            "metrics.csv": payload["metrics_overall"] + payload["metrics_by_factor"],
            "item_scores.csv": item_rows,
        },
    )


def runs_table(runs: Sequence[ComparedRun]) -> Table:
    """Setting rows x run columns: what each column of the comparison is."""
    settings = [
        ("model under test", lambda r: r.model),
        ("endpoint", lambda r: r.endpoint),
        ("dataset", lambda r: human(r.dataset)),
        ("generation run", lambda r: str(r.generation_run_id)),
        ("judge run", lambda r: str(r.judge_run_id)),
        ("judge model", lambda r: r.judge_model),
        ("judge prompt", lambda r: r.prompt_variant),
        ("judge temperature", lambda r: f"{r.temperature:g}"),
        ("samples", lambda r: f"{r.samples} ({r.aggregation})"),
        ("judge run status", lambda r: r.status),
    ]
    return Table(
        "Compared runs",
        ["setting", *(r.label for r in runs)],
        [[name, *(get(r) for r in runs)] for name, get in settings],
    )


def overall_table(rows: dict[str, list[MetricRow]], labels: list[str]) -> Table:
    """Metric rows x run columns over all factors."""
    cells = {(label, r.metric): r for label in labels for r in rows[label]}
    body = [
        [m.label, *(_cell(cells.get((label, m.name))) for label in labels)]
        for m in table_order()
        if any((label, m.name) in cells for label in labels)
    ]
    return Table(
        "Stage metrics over all factors", ["metric", *labels], body, notes=metric_glossary()
    )


def factor_table(rows: dict[str, list[MetricRow]], labels: list[str]) -> Table:
    """(factor, metric) rows x run columns: FairMonitor's Table 5 layout. The factor is named
    on the first row of its group."""
    cells = {(label, r.factor, r.metric): r for label in labels for r in rows[label]}
    factors = sorted({r.factor for label in labels for r in rows[label]})
    body = []
    for factor in factors:
        first = True
        for m in table_order():
            if not any((label, factor, m.name) in cells for label in labels):
                continue
            body.append(
                [
                    factor if first else "",
                    m.label,
                    *(_cell(cells.get((label, factor, m.name))) for label in labels),
                ]
            )
            first = False
    return Table(
        "Stage metrics by sensitive factor (FairMonitor Table 5 layout)",
        ["factor", "metric", *labels],
        body,
        notes=_legend(),
        key_columns=2,
    )


def _cell(row: MetricRow | None) -> str:
    return "no items" if row is None else metric_cell(row, always_unscored=True)


def _legend() -> list[str]:
    return metrics_legend(always_unscored=True)


def box_plots(
    distributions: dict[str, dict[tuple[str, str], list[float]]], labels: list[str]
) -> list[Figure]:
    """One panel per stage and rubric, one box per run (FairMonitor's Figure 4)."""
    order = list(dict.fromkeys((m.stage, m.rubric) for m in STAGE_METRICS))
    plots: list[Figure] = []
    for stage, rubric in order:
        series = [
            (f"{label}\n(n={len(values)})", values)
            for label in labels
            for values in [distributions[label].get((stage, rubric), [])]
        ]
        if not any(values for _, values in series):
            continue
        plots.append(
            BoxPlot(
                f"{stage} {rubric}: item scores of each compared run",
                series,
                f"judge score ({SCALE})",
                (SCALE.low - 0.5, SCALE.high + 0.5),
            )
        )
    return plots
