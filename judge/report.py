"""Run reports: one dict of numbers, written as JSON, CSV and a self-contained HTML page.

Every number comes from stored rows; the item-score table lists the judgment ids behind each
item, so any metric can be traced back to the raw judge replies.
"""

from __future__ import annotations

import base64
import csv
import io
import json
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

import jinja2
from sqlalchemy import func
from sqlmodel import Session, select

from judge.errors import NotFoundError
from judge.metrics import STAGE_METRICS, item_scores, metric_dicts, stage_metrics
from judge.tables import Dataset, GenerationRun, Item, JudgeRun, Judgment, Response

TEMPLATES = Path(__file__).parent / "templates"
BOX_ORDER = [
    ("S1", "ICS"),
    ("S2", "TCS"),
    ("S2", "PCS"),
    ("S2", "ETCS"),
    ("S3", "SBAS"),
    ("S4", "ICS"),
]


def build_report(session: Session, judge_run_id: int) -> dict[str, Any]:
    jrun = session.get(JudgeRun, judge_run_id)
    if jrun is None:
        raise NotFoundError(f"no judge run {judge_run_id}; see `fairjudge runs`")
    grun = session.get(GenerationRun, jrun.generation_run_id)
    assert grun is not None
    dataset = session.get(Dataset, grun.dataset_id)
    scores = item_scores(session, judge_run_id, jrun.aggregation)
    model = grun.model
    by_factor = stage_metrics(scores, model)
    overall = stage_metrics(scores, model, by_factor=False)
    flags = session.exec(
        select(Item.stage, Response.flag, func.count())
        .join(Item)
        .where(Response.run_id == grun.id)
        .group_by(Item.stage, Response.flag)
    ).all()
    unscored = Counter(
        _reason_kind(r)
        for r in session.exec(
            select(Judgment.reason).where(
                Judgment.judge_run_id == judge_run_id, Judgment.status != "scored"
            )
        )
    )
    gen_tokens = session.exec(
        select(
            func.coalesce(func.sum(Response.prompt_tokens), 0),
            func.coalesce(func.sum(Response.completion_tokens), 0),
            func.count(),
        ).where(Response.run_id == grun.id)
    ).one()
    judge_tokens = session.exec(
        select(
            func.coalesce(func.sum(Judgment.prompt_tokens), 0),
            func.coalesce(func.sum(Judgment.completion_tokens), 0),
            func.coalesce(func.sum(Judgment.calls), 0),
            func.count(),
        ).where(Judgment.judge_run_id == judge_run_id)
    ).one()
    template_versions = sorted(
        set(
            session.exec(
                select(Judgment.template_version).where(
                    Judgment.judge_run_id == judge_run_id, Judgment.template_version != ""
                )
            ).all()
        )
    )
    return {
        "dataset": dataset.name if dataset else None,
        "generation_run": {
            "id": grun.id,
            "endpoint": grun.endpoint_name,
            "model": grun.model,
            "base_url": grun.base_url,
            "temperature": grun.temperature,
            "max_tokens": grun.max_tokens,
            "template_version": grun.template_version,
        },
        "judge_run": {
            "id": jrun.id,
            "endpoint": jrun.endpoint_name,
            "model": jrun.model,
            "base_url": jrun.base_url,
            "prompt_variant": jrun.prompt_variant,
            "temperature": jrun.temperature,
            "samples": jrun.samples,
            "aggregation": jrun.aggregation,
            "max_tokens": jrun.max_tokens,
            "template_versions": template_versions,
            "status": jrun.status,
        },
        "metrics_overall": metric_dicts(overall),
        "metrics_by_factor": metric_dicts(by_factor),
        "metric_definitions": {
            name: _definition(kind, threshold, rubric)
            for _, rubric, name, kind, threshold in STAGE_METRICS
        },
        "answers": [{"stage": s, "flag": f, "count": c} for s, f, c in flags],
        "unscored": dict(unscored),
        "n_item_scores": len(scores),
        "n_unscored_items": sum(s.score is None for s in scores),
        "tokens": {
            "generation_prompt": gen_tokens[0],
            "generation_completion": gen_tokens[1],
            "generation_answers": gen_tokens[2],
            "judge_prompt": judge_tokens[0],
            "judge_completion": judge_tokens[1],
            "judge_calls": judge_tokens[2],
            "judgments": judge_tokens[3],
        },
        "item_scores": [asdict(s) for s in scores],
    }


def _reason_kind(reason: str | None) -> str:
    """Group unscored reasons by their leading phrase ('call failed', 'unparsable ...')."""
    text = reason or "unknown"
    return text.split(":")[0]


def _definition(kind: str, threshold: int, rubric: str) -> str:
    if kind == "mean_pct":
        return f"mean {rubric} over scored items / 5 x 100"
    return f"percentage of scored items with {rubric} >= {threshold}"


def box_plot_png(report: dict[str, Any]) -> bytes:
    """Box plots of item scores per stage and rubric (FairMonitor's Figure 4 layout)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data, labels = [], []
    for stage, rubric in BOX_ORDER:
        values = [
            s["score"]
            for s in report["item_scores"]
            if s["stage"] == stage and s["rubric"] == rubric and s["score"] is not None
        ]
        data.append(values or [float("nan")])
        labels.append(f"{stage} {rubric}\n(n={len(values)})")
    fig, ax = plt.subplots(figsize=(8, 3.6), dpi=100)
    ax.boxplot(data, showmeans=True)
    ax.set_xticks(range(1, len(labels) + 1), labels)
    ax.set_ylim(0.5, 5.5)
    ax.set_ylabel("judge score (1-5)")
    ax.set_title(f"Score distributions: {report['generation_run']['model']}")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


def metrics_table(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Factor rows x metric columns, formatted like FairMonitor's Table 5."""
    names = [metric[2] for metric in STAGE_METRICS]
    present = [n for n in names if any(r["metric"] == n for r in rows)]
    factors = sorted({r["factor"] for r in rows} - {"all"})
    factors += ["all"] if any(r["factor"] == "all" for r in rows) else []
    cell = {(r["factor"], r["metric"]): r for r in rows}
    body = []
    for factor in factors:
        line = [factor]
        for name in present:
            r = cell.get((factor, name))
            line.append("" if r is None else _fmt(r))
        body.append(line)
    return ["factor", *present], body


def _fmt(row: dict[str, Any]) -> str:
    value = "n/a" if row["value"] is None else f"{row['value']:.1f}"
    extra = f" ({row['n_unscored']} unscored)" if row["n_unscored"] else ""
    return f"{value} [n={row['n_scored']}]{extra}"


def write_report(report: dict[str, Any], out_dir: str | Path) -> dict[str, Path]:
    """Write report.json, metrics.csv, item_scores.csv and report.html into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": out / "report.json",
        "metrics_csv": out / "metrics.csv",
        "items_csv": out / "item_scores.csv",
        "html": out / "report.html",
    }
    paths["json"].write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    _write_csv(paths["metrics_csv"], report["metrics_overall"] + report["metrics_by_factor"])
    _write_csv(
        paths["items_csv"],
        [
            {
                **s,
                "judgment_ids": " ".join(map(str, s["judgment_ids"])),
                "unscored_reasons": " | ".join(s["unscored_reasons"]),
            }
            for s in report["item_scores"]
        ],
    )
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=jinja2.select_autoescape(["html"])
    )
    head, body = metrics_table(report["metrics_by_factor"] + report["metrics_overall"])
    html = env.get_template("report.html").render(
        r=report, head=head, body=body, plot=base64.b64encode(box_plot_png(report)).decode("ascii")
    )
    paths["html"].write_text(html, encoding="utf-8")
    return paths


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        if not rows:
            return
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
