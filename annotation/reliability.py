"""Judge reliability for a generation run: every judge configuration against the humans, with
the humans' own agreement beside it as the ceiling (laid out like FairMonitor's Table 3)."""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from typing import Any

import numpy as np
from sqlmodel import Session, col, select

from judge.agreement import (
    RatingMatrix,
    human_vs_human,
    items_needed,
    jsonable,
    judge_vs_human,
    kappa_per_annotator,
    self_consistency,
)
from judge.errors import NotFoundError
from judge.metrics import aggregate
from judge.tables import GenerationRun, HumanRating, Item, JudgeRun, Judgment

SHOWN = ("pearson", "spearman", "kendall", "kappa_quadratic", "mean_difference")


def judge_label(run: JudgeRun) -> str:
    samples = f", {run.samples} samples ({run.aggregation})" if run.samples > 1 else ""
    return f"{run.model} {run.prompt_variant} T={run.temperature:g}{samples}"


def _judge_scores(
    session: Session, run: JudgeRun, rubric: str
) -> tuple[dict[int, float], dict[int, list[float]], int]:
    """Per item: the combined judge score, its sample scores, and the count of unscored items."""
    samples: dict[int, list[float]] = defaultdict(list)
    seen: set[int] = set()
    for j in session.exec(
        select(Judgment).where(Judgment.judge_run_id == run.id, Judgment.rubric == rubric)
    ):
        seen.add(j.item_id)
        if j.status == "scored" and j.score is not None:
            samples[j.item_id].append(float(j.score))
    combined = {}
    for item_id, values in samples.items():
        value = aggregate([int(v) for v in values], run.aggregation)
        if value is not None:
            combined[item_id] = float(value)
    return combined, samples, len(seen - set(combined))


def reading(
    coefs: dict[str, Any], ceiling: dict[str, Any], judge_values: list[float], n: int
) -> str:
    """One plain-language line about a judge configuration on one rubric."""
    notes = []
    if n < 10:
        notes.append(f"only {n} rated items: too few for a stable estimate")
    kq, alpha = coefs["kappa_quadratic"], ceiling.get("alpha_interval")
    if alpha is not None and math.isfinite(kq.value) and math.isfinite(alpha.value):
        if math.isfinite(kq.ci_high) and kq.ci_high >= alpha.value:
            notes.append(
                f"within the human ceiling (weighted kappa {kq.value:.2f} vs human "
                f"alpha {alpha.value:.2f})"
            )
        else:
            notes.append(
                f"below the human ceiling (weighted kappa {kq.value:.2f} vs human "
                f"alpha {alpha.value:.2f})"
            )
    diff = coefs["mean_difference"]
    if (
        math.isfinite(diff.value)
        and abs(diff.value) >= 0.3
        and not (diff.ci_low <= 0 <= diff.ci_high)
    ):
        side = "harsher" if diff.value < 0 else "more lenient"
        notes.append(f"judge {side} by {abs(diff.value):.1f} on average")
    used = {int(round(v)) for v in judge_values}
    unused = [s for s in (1, 5) if s not in used]
    if judge_values and len(used) == 1:
        notes.append(f"judge gives every item {used.pop()}")
    elif unused:
        notes.append(f"judge never uses {' or '.join(map(str, unused))}")
    return "; ".join(notes) or "no notable pattern"


def run_reliability(
    session: Session,
    generation_run_id: int,
    *,
    n_bootstrap: int = 1000,
    seed: int | None = 0,
    human: str = "mean",
    target_half_width: float = 0.1,
) -> dict[str, Any]:
    """Agreement per rubric x judge run of a generation run, with the human ceiling."""
    if session.get(GenerationRun, generation_run_id) is None:
        raise NotFoundError(f"no generation run {generation_run_id}; see `fairjudge runs`")
    ratings = session.exec(
        select(HumanRating, Item.key)
        .join(Item)
        .where(HumanRating.generation_run_id == generation_run_id)
    ).all()
    if not ratings:
        raise NotFoundError(
            f"run {generation_run_id} has no human ratings yet; import them with "
            f"`fairjudge ratings import FILE --run {generation_run_id}`"
        )
    judge_runs = session.exec(
        select(JudgeRun)
        .where(JudgeRun.generation_run_id == generation_run_id)
        .order_by(col(JudgeRun.id))
    ).all()
    by_rubric: dict[str, list[tuple[HumanRating, str]]] = defaultdict(list)
    for rating, key in ratings:
        by_rubric[rating.rubric].append((rating, key))
    rubrics: dict[str, Any] = {}
    for rubric in sorted(by_rubric):
        rows = by_rubric[rubric]
        matrix = RatingMatrix.from_long(
            [r.item_id for r, _ in rows], [r.rater for r, _ in rows], [r.score for r, _ in rows]
        )
        human_scores = dict(
            zip((int(i) for i in matrix.items), matrix.item_scores(human), strict=True)
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ceiling = human_vs_human(matrix, n_bootstrap=n_bootstrap, seed=seed)
        judges = []
        for run in judge_runs:
            combined, samples, unscored = _judge_scores(session, run, rubric)
            items = [i for i in human_scores if i in combined]
            entry: dict[str, Any] = {
                "judge_run": run.id,
                "label": judge_label(run),
                "prompt_variant": run.prompt_variant,
                "temperature": run.temperature,
                "n": len(items),
                "judge_unscored_on_rated_items": len(
                    [i for i in human_scores if i not in combined]
                ),
            }
            if not items:
                entry["reading"] = "the judge scored none of the rated items"
                judges.append(entry)
                continue
            jx = np.array([combined[i] for i in items])
            hy = np.array([human_scores[i] for i in items])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                coefs = judge_vs_human(jx, hy, n_bootstrap=n_bootstrap, seed=seed)
            sub = RatingMatrix(
                matrix.items,
                matrix.raters,
                matrix.values[:, [matrix.items.index(str(i)) for i in items]],
            )
            entry.update(
                {
                    "coefficients": {
                        k: v.to_dict() for k, v in coefs.items() if k != "confusion_matrix"
                    },
                    "confusion_matrix": coefs["confusion_matrix"],
                    "kappa_per_annotator": kappa_per_annotator(
                        jx, sub, n_bootstrap=n_bootstrap, seed=seed
                    ),
                    "items_needed": {
                        k: items_needed(coefs[k], target_half_width)
                        for k in ("pearson", "spearman", "kappa_quadratic")
                    },
                    "reading": reading(coefs, ceiling, jx.tolist(), len(items)),
                    "points": {"judge": jx.tolist(), "human": hy.tolist()},
                }
            )
            if run.samples > 1:
                grid = np.full((len(samples), run.samples), np.nan)
                for row, values in enumerate(samples.values()):
                    grid[row, : len(values)] = values
                entry["self_consistency"] = self_consistency(
                    grid, n_bootstrap=n_bootstrap, seed=seed
                )
            judges.append(entry)
        rubrics[rubric] = {
            "n_rated_items": len(matrix.items),
            "n_raters": len(matrix.raters),
            "n_ratings": len(rows),
            "human_vs_human": jsonable(ceiling),
            "judges": judges,
        }
    return {
        "generation_run": generation_run_id,
        "human_score": human,
        "n_bootstrap": n_bootstrap,
        "seed": seed,
        "target_half_width": target_half_width,
        "rubrics": rubrics,
    }


def fmt(c: dict[str, Any] | None, digits: int = 2) -> str:
    """'0.78 [0.70, 0.85]' or 'n/a'."""
    if not c or c.get("value") is None:
        return "n/a"
    low, high = c.get("ci_low"), c.get("ci_high")
    ci = f" [{low:.{digits}f}, {high:.{digits}f}]" if low is not None and high is not None else ""
    return f"{c['value']:.{digits}f}{ci}"


def table3(
    result: dict[str, Any], coefficient: str = "spearman"
) -> tuple[list[str], list[list[str]]]:
    """Rubric rows x judge-configuration columns, plus the human ceiling column."""
    labels: list[str] = []
    for entry in result["rubrics"].values():
        for j in entry["judges"]:
            if j["label"] not in labels:
                labels.append(j["label"])
    head = ["rubric", "n items", "human alpha (interval)", *labels]
    body = []
    for rubric, entry in result["rubrics"].items():
        cells = {
            j["label"]: fmt(j.get("coefficients", {}).get(coefficient)) for j in entry["judges"]
        }
        body.append(
            [
                rubric,
                str(entry["n_rated_items"]),
                fmt(entry["human_vs_human"].get("alpha_interval")),
                *(cells.get(label, "") for label in labels),
            ]
        )
    return head, body


def plots_png(
    judge_values: list[float],
    human_values: list[float],
    confusion: list[list[int]],
    title: str,
    seed: int = 0,
) -> bytes:
    """A jittered judge-vs-human scatter and a confusion heatmap side by side."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(seed)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.8), dpi=100)
    jx = np.asarray(judge_values) + rng.uniform(-0.15, 0.15, len(judge_values))
    hy = np.asarray(human_values) + rng.uniform(-0.15, 0.15, len(human_values))
    left.scatter(hy, jx, s=12, alpha=0.5)
    left.plot([1, 5], [1, 5], color="grey", lw=1, ls="--")
    left.set_xlabel("human score (mean of raters)")
    left.set_ylabel("judge score")
    left.set_xlim(0.5, 5.5)
    left.set_ylim(0.5, 5.5)
    left.set_title("judge vs human (jittered)")
    grid = np.asarray(confusion) if confusion else np.zeros((5, 5))
    right.imshow(grid, cmap="Blues", origin="lower", extent=(0.5, 5.5, 0.5, 5.5))
    for (row, column), count in np.ndenumerate(grid):
        right.text(column + 1, row + 1, str(int(count)), ha="center", va="center", fontsize=8)
    right.set_xlabel("human category")
    right.set_ylabel("judge category")
    right.set_title("confusion (counts)")
    fig.suptitle(title)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


def report_section(
    session: Session, judge_run_id: int, *, n_bootstrap: int = 1000, seed: int | None = 0
) -> dict[str, Any] | None:
    """The reliability section of one judge run's HTML report; None without human ratings."""
    import base64

    run = session.get(JudgeRun, judge_run_id)
    if run is None:
        raise NotFoundError(f"no judge run {judge_run_id}")
    has_ratings = session.exec(
        select(HumanRating.id).where(HumanRating.generation_run_id == run.generation_run_id)
    ).first()
    if has_ratings is None:
        return None
    result = run_reliability(session, run.generation_run_id, n_bootstrap=n_bootstrap, seed=seed)
    rows, plots = [], []
    for rubric, entry in result["rubrics"].items():
        mine = next((j for j in entry["judges"] if j["judge_run"] == judge_run_id), None)
        if mine is None:
            continue
        coefs = mine.get("coefficients", {})
        rows.append(
            {
                "rubric": rubric,
                "n": mine["n"],
                **{name: fmt(coefs.get(name)) for name in SHOWN},
                "human alpha (interval)": fmt(entry["human_vs_human"].get("alpha_interval")),
                "reading": mine["reading"],
            }
        )
        if "points" in mine:
            png = plots_png(
                mine["points"]["judge"],
                mine["points"]["human"],
                mine["confusion_matrix"]["counts"],
                f"{rubric}: {mine['label']}",
            )
            plots.append({"title": rubric, "png": base64.b64encode(png).decode("ascii")})
    return {
        "rows": rows,
        "plots": plots,
        "n_bootstrap": n_bootstrap,
        "note": "values with bootstrap 95 % CIs; human alpha is the agreement humans reach "
        "among themselves (the ceiling)",
    }
