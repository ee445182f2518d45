"""Agreement for data collected anywhere: long-format human CSV, optional judge CSV.

HUMAN.csv: ``item_id,rater,score`` (other columns allowed, e.g. a grouping column).
JUDGE.csv: ``item_id,score``; several rows for one item are samples and are averaged. An empty
score (or NA / nan / null) is an unscored judge sample: it is counted, never turned into a number.
Scores lie on one declared ``Scale`` (1-5 unless given, e.g. ``Scale.parse("0-3")``): a score
outside it is refused with its line number, and kappa, alpha, the confusion matrix and
exact/within-one agreement use its levels.
Undefined coefficients keep their reason (the statistics are called with ``warn=False``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from annotation.errors import RatingsError
from annotation.ratings import parse_score, read_csv_rows
from judge.stats.coefficient import DEFAULT_OPTIONS, BootstrapOptions, Coefficient
from judge.stats.levels import (
    GroupedCorrelation,
    SelfConsistency,
    grouped_correlations,
    self_consistency,
)
from judge.stats.matrix import RatingMatrix
from judge.stats.pairs import PairAgreement, judge_vs_human
from judge.stats.raters import (
    PerRaterAgreement,
    RaterAgreement,
    human_vs_human,
    kappa_per_annotator,
)
from judge.vocab import SCALE, Scale

MISSING = {"", "na", "nan", "null", "none"}


def read_human(
    path: str | Path, group_by: str | None, scale: Scale = SCALE
) -> tuple[RatingMatrix, dict[str, str]]:
    """The ratings as a raters x items matrix, and each item's group (with ``group_by``)."""
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
            score = parse_score(row["score"], scale)
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


def read_judge(path: str | Path, scale: Scale = SCALE) -> tuple[dict[str, list[float]], int]:
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
            samples[item].append(parse_score(row["score"], scale))
        except ValueError as exc:
            problems.append((number, str(exc)))
    if problems:
        raise RatingsError(f"{path} has problems; fix these lines:", problems)
    return dict(samples), unscored


@dataclass(frozen=True)
class ItemCounts:
    """How the items of the two files pair up."""

    paired: int
    human_only: int
    judge_only: int
    judge_unscored_items: int
    judge_unscored_rows: int


@dataclass(frozen=True)
class JudgeFileAgreement:
    """The judge file against the human file on the paired items."""

    items: ItemCounts
    agreement: PairAgreement
    kappa_per_annotator: list[PerRaterAgreement]
    self_consistency: SelfConsistency | None  # when some item has several judge samples
    grouped: GroupedCorrelation | None  # with ``group_by``


@dataclass(frozen=True)
class FileAgreement:
    """The agreement report for external files; ``judge`` is None without a judge file."""

    n_items: int  # items of the human file, or the paired items with a judge file
    human_vs_human: RaterAgreement
    options: BootstrapOptions
    human_score: str
    group_by: str | None
    judge: JudgeFileAgreement | None = None
    scale: Scale = SCALE

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n_items": self.n_items,
            "human_vs_human": self.human_vs_human.to_dict(),
            "settings": {
                "bootstrap": self.options.n_bootstrap,
                "seed": self.options.seed,
                "human_score": self.human_score,
                "confidence": self.options.confidence,
                "group_by": self.group_by,
                "scale": str(self.scale),
            },
        }
        if self.judge is None:
            return out
        out["items"] = asdict(self.judge.items)
        out["judge_vs_human"] = self.judge.agreement.to_dict()
        out["judge_vs_human"]["kappa_per_annotator"] = [
            e.to_dict() for e in self.judge.kappa_per_annotator
        ]
        if self.judge.self_consistency is not None:
            out["judge_self_consistency"] = self.judge.self_consistency.to_dict()
        if self.judge.grouped is not None:
            out["grouped"] = self.judge.grouped.to_dict()
        return out

    def coefficient_groups(self) -> dict[str, dict[str, Coefficient]]:
        """The single coefficients by report part (human_vs_human, human_pairs: Cohen's kappa
        of every pair of raters, judge_vs_human, grouped)."""
        hh = self.human_vs_human
        out = {
            "human_vs_human": {**hh.alphas, "fleiss_kappa": hh.fleiss_kappa},
            "human_pairs": {
                f"{name} ({pair.raters[0]}, {pair.raters[1]})": c
                for pair in hh.pairwise
                for name, c in pair.coefficients.items()
            },
        }
        if self.judge is not None:
            out["judge_vs_human"] = self.judge.agreement.coefficients
            if self.judge.grouped is not None:
                out["grouped"] = self.judge.grouped.coefficients
        return out


def _nothing_paired(
    human_csv: str | Path,
    judge_csv: str | Path,
    human_items: list[str],
    samples: dict[str, list[float]],
) -> str:
    """Why no item has both a human and a judge score, and what to do."""
    if not any(samples.values()):
        return (
            f"every score in {judge_csv} is empty or NA, so there is nothing to compare; "
            "give the judge's scores or leave out --judge"
        )
    common = [i for i in human_items if i in samples]
    if common:
        return (
            f"none of the {len(common)} item(s) in both {human_csv} and {judge_csv} has a "
            "judge score (all NA); give the judge's scores for those items"
        )
    judge_example = next(iter(samples))
    return (
        f"no item_id of {judge_csv} is in {human_csv} (e.g. {judge_example!r} vs "
        f"{human_items[0]!r}); both files must use the same item ids"
    )


def compute(
    human_csv: str | Path,
    judge_csv: str | Path | None = None,
    *,
    group_by: str | None = None,
    options: BootstrapOptions = DEFAULT_OPTIONS,
    human: str = "mean",
    scale: Scale = SCALE,
) -> FileAgreement:
    """The agreement report for external files on ``scale`` (see the module docstring)."""
    labels = scale.labels
    matrix, groups = read_human(human_csv, group_by, scale)
    hh = human_vs_human(matrix, options=options, labels=labels, warn=False)
    if judge_csv is None:
        return FileAgreement(len(matrix.items), hh, options, human, group_by, scale=scale)
    samples, unscored_rows = read_judge(judge_csv, scale)
    human_scores = dict(zip(matrix.items, matrix.item_scores(human), strict=True))
    paired = [i for i in matrix.items if samples.get(i)]
    counts = ItemCounts(
        paired=len(paired),
        human_only=len([i for i in matrix.items if i not in samples]),
        judge_only=len([i for i in samples if i not in human_scores]),
        judge_unscored_items=len([i for i in matrix.items if i in samples and not samples[i]]),
        judge_unscored_rows=unscored_rows,
    )
    if not paired:
        raise RatingsError(_nothing_paired(human_csv, judge_csv, matrix.items, samples))
    jx = np.array([np.mean(samples[i]) for i in paired])
    hy = np.array([human_scores[i] for i in paired])
    consistency = None
    most = max((len(samples[i]) for i in paired), default=0)
    if most > 1:
        grid = np.full((len(paired), most), np.nan)
        for row, item in enumerate(paired):
            grid[row, : len(samples[item])] = samples[item]
        consistency = self_consistency(grid, options=options, labels=labels, warn=False)
    grouped = None
    if group_by:
        keys = [groups[i] for i in paired]
        grouped = grouped_correlations(jx, hy, keys, options=options, warn=False)
    judge = JudgeFileAgreement(
        counts,
        judge_vs_human(jx, hy, options=options, labels=labels, warn=False),
        kappa_per_annotator(jx, matrix.columns(paired), options=options, labels=labels, warn=False),
        consistency,
        grouped,
    )
    return FileAgreement(len(paired), hh, options, human, group_by, judge, scale)
