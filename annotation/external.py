"""Agreement for data collected anywhere: long-format human CSV, optional judge CSV.

HUMAN.csv: ``item_id,rater,score`` (other columns allowed, e.g. a grouping column).
JUDGE.csv: ``item_id,score``; several rows for one item are samples and are averaged. An empty
score (or NA / nan / null) is an unscored judge sample: it is counted, never turned into a number.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from annotation.errors import RatingsError
from annotation.ratings import parse_score, read_csv_rows
from judge.agreement import (
    RatingMatrix,
    grouped_correlations,
    human_vs_human,
    jsonable,
    judge_vs_human,
    kappa_per_annotator,
    self_consistency,
)

MISSING = {"", "na", "nan", "null", "none"}


def read_human(path: str | Path, group_by: str | None) -> tuple[RatingMatrix, dict[str, str]]:
    required = ("item_id", "rater", "score") + ((group_by,) if group_by else ())
    problems: list[tuple[int, str]] = []
    items, raters, scores = [], [], []
    groups: dict[str, str] = {}
    seen: dict[tuple[str, str], int] = {}
    for number, row in read_csv_rows(path, required):
        item, rater = row["item_id"].strip(), row["rater"].strip()
        if not item or not rater:
            problems.append((number, "item_id and rater must not be empty"))
            continue
        try:
            score = parse_score(row["score"])
        except ValueError as exc:
            problems.append((number, str(exc)))
            continue
        if (item, rater) in seen:
            problems.append(
                (
                    number,
                    f"rater {rater!r} already rated item {item!r} on line {seen[(item, rater)]}",
                )
            )
            continue
        seen[(item, rater)] = number
        if group_by:
            group = row[group_by].strip()
            if groups.setdefault(item, group) != group:
                problems.append(
                    (
                        number,
                        f"item {item!r} is in group {groups[item]!r} on an "
                        f"earlier line and {group!r} here",
                    )
                )
                continue
        items.append(item)
        raters.append(rater)
        scores.append(score)
    if problems:
        raise RatingsError(f"{path} has problems; fix these lines:", problems)
    return RatingMatrix.from_long(items, raters, scores), groups


def read_judge(path: str | Path) -> tuple[dict[str, list[float]], int]:
    """Scores per item (samples), and the number of unscored rows."""
    problems: list[tuple[int, str]] = []
    samples: dict[str, list[float]] = defaultdict(list)
    unscored = 0
    for number, row in read_csv_rows(path, ("item_id", "score")):
        item = row["item_id"].strip()
        if (row["score"] or "").strip().lower() in MISSING:
            unscored += 1
            samples.setdefault(item, [])
            continue
        try:
            samples[item].append(parse_score(row["score"]))
        except ValueError as exc:
            problems.append((number, str(exc)))
    if problems:
        raise RatingsError(f"{path} has problems; fix these lines:", problems)
    return dict(samples), unscored


def compute(
    human_csv: str | Path,
    judge_csv: str | Path | None = None,
    *,
    group_by: str | None = None,
    n_bootstrap: int = 1000,
    seed: int | None = 0,
    human: str = "mean",
    confidence: float = 0.95,
) -> dict[str, Any]:
    """The agreement report for external files (see the module docstring for formats)."""
    matrix, groups = read_human(human_csv, group_by)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hh = human_vs_human(matrix, n_bootstrap=n_bootstrap, seed=seed, confidence=confidence)
    result: dict[str, Any] = {
        "n_items": len(matrix.items),
        "human_vs_human": jsonable(hh),
        "settings": {
            "bootstrap": n_bootstrap,
            "seed": seed,
            "human_score": human,
            "confidence": confidence,
            "group_by": group_by,
        },
    }
    if judge_csv is None:
        return result
    samples, unscored_rows = read_judge(judge_csv)
    human_scores = dict(zip(matrix.items, matrix.item_scores(human), strict=True))
    paired = [i for i in matrix.items if samples.get(i)]
    result["n_items"] = len(paired)
    result["items"] = {
        "paired": len(paired),
        "human_only": len([i for i in matrix.items if i not in samples]),
        "judge_only": len([i for i in samples if i not in human_scores]),
        "judge_unscored_items": len([i for i in matrix.items if i in samples and not samples[i]]),
        "judge_unscored_rows": unscored_rows,
    }
    jx = np.array([np.mean(samples[i]) for i in paired])
    hy = np.array([human_scores[i] for i in paired])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        coefs = judge_vs_human(jx, hy, n_bootstrap=n_bootstrap, seed=seed, confidence=confidence)
    columns = [matrix.items.index(i) for i in paired]
    sub = RatingMatrix(paired, matrix.raters, matrix.values[:, columns])
    result["judge_vs_human"] = jsonable(coefs)
    result["judge_vs_human"]["kappa_per_annotator"] = kappa_per_annotator(
        jx, sub, n_bootstrap=n_bootstrap, seed=seed, confidence=confidence
    )
    most = max((len(samples[i]) for i in paired), default=0)
    if most > 1:
        grid = np.full((len(paired), most), np.nan)
        for row, item in enumerate(paired):
            grid[row, : len(samples[item])] = samples[item]
        result["judge_self_consistency"] = self_consistency(
            grid, n_bootstrap=n_bootstrap, seed=seed
        )
    if group_by:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            grouped = grouped_correlations(
                jx,
                hy,
                [groups[i] for i in paired],
                n_bootstrap=n_bootstrap,
                seed=seed,
                confidence=confidence,
            )
        result["grouped"] = jsonable(grouped)
    return result
