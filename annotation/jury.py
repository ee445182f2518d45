"""A jury of judge runs (issue 44): several judges of the same answers, combined per item and
rubric, against the people who rated some of those answers, beside each single judge.

The runs must judge the same generation run (the same answers) on the same rubrics, each
rubric in one version on one scale; otherwise the jury is refused with one line saying
which runs differ. Per rubric, the items used are the rated items (``drawn_ratings``: gold
items left out, the newest campaign or batch winning) that *every* judge scored, so the
jury and each judge are measured on the same items; the rated items some judge left
unscored are counted, never filled in. The statistics are ``judge.stats.jury``'s.

Cost: the jury costs the sum of its runs' costs (``judge.costs.judge_run_cost``, at the
prices the caller passes); beside it, the best judge's own run, so the gain is shown
against what it costs. A run without prices makes the jury's cost unknown, said so.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlmodel import Session, col, select

from annotation.errors import RatingsError
from annotation.estimates import drawn_ratings, load_run_data
from annotation.reliability import judge_label
from judge.costs import judge_run_cost
from judge.errors import InvalidInputError
from judge.prices import Prices
from judge.stats.baseline import Flag
from judge.stats.coefficient import DEFAULT_OPTIONS, BootstrapOptions, Coefficient
from judge.stats.jury import (
    COMBINES,
    FOLDS,
    STATISTICS,
    CrossFit,
    VersusBest,
    combine,
    cross_fit,
    pair_alpha,
    versus_best,
)
from judge.stats.pairs import judge_vs_human
from judge.store.queries import get_judge_run
from judge.store.tables import JudgeRun, Judgment
from judge.vocab import Scale

SHOWN = ("spearman", "pearson", "kendall", "kappa_quadratic", "mean_difference")
"""The judge-human coefficients shown for the jury and each judge (``judge.stats.pairs``),
with Krippendorff's alpha (interval) beside them."""
BESIDE_CHANCE = ("exact_agreement", "majority_baseline", "kappa", "ac1")
"""Raw agreement beside what always answering the people's most frequent category scores,
kappa and Gwet's AC1, with the flags (``judge.stats.baseline``), as ``judge_vs_human`` gives
them: a jury of judges that always say "fair" must not look good on a skewed rubric."""
JURY = "jury"


@dataclass(frozen=True)
class Member:
    """The jury or one of its judges on one rubric's items: its agreement with people."""

    label: str
    judge_run: int | None  # None for the jury itself
    coefficients: dict[str, Coefficient]
    flags: list[Flag] = field(default_factory=list)  # when the agreement flatters it
    majority_category: int | None = None  # the people's most frequent category

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "judge_run": self.judge_run,
            "coefficients": {k: c.to_dict() for k, c in self.coefficients.items()},
            "majority_category": self.majority_category,
            "flags": [f.to_dict() for f in self.flags],
        }


@dataclass(frozen=True)
class Weights:
    """Learnt weights, per judge run: averaged over the folds (what the held-out scores
    used), each fold's, and learnt on every rated item (for judging new answers)."""

    folds: int
    mean: dict[int, float]
    per_fold: list[dict[int, float]]
    all_items: dict[int, float]

    @classmethod
    def of(cls, runs: Sequence[int], fit: CrossFit) -> Weights:
        def named(w: np.ndarray) -> dict[int, float]:
            return {r: float(v) for r, v in zip(runs, w, strict=True)}

        return cls(
            len(fit.fold_weights), named(fit.mean_weights),
            [named(w) for w in fit.fold_weights], named(fit.weights),
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {
            "folds": self.folds,
            "held_out": "each fold's jury scores use weights learnt on the other folds",
            "mean": {str(k): v for k, v in self.mean.items()},
            "per_fold": [{str(k): v for k, v in w.items()} for w in self.per_fold],
            "all_items": {str(k): v for k, v in self.all_items.items()},
        }


@dataclass(frozen=True)
class RubricJury:
    """One rubric: the jury and its judges on the same rated items, the paired comparison
    with the best judge, and (combine learnt) the weights."""

    rubric: str
    scale: Scale
    n_rated: int
    n_used: int
    unscored: dict[int, int]  # judge run -> rated items it left unscored (left out for all)
    jury: Member
    judges: list[Member]
    versus: VersusBest
    weights: Weights | None = None
    same_as: int | None = None  # a judge run whose scores the jury's equal on every item

    @property
    def best(self) -> Member | None:
        return None if self.versus.best is None else self.judges[self.versus.best]

    def to_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "scale": str(self.scale),
            "n_rated_items": self.n_rated,
            "n_items": self.n_used,
            "left_out_unscored": {str(k): v for k, v in self.unscored.items()},
            "jury": self.jury.to_dict(),
            "judges": [m.to_dict() for m in self.judges],
            "versus_best": {
                **self.versus.to_dict(),
                "best_judge_run": best.judge_run if best else None,
            },
            "weights": self.weights.to_dict() if self.weights else None,
            "same_as_judge_run": self.same_as,
        }


@dataclass(frozen=True)
class JuryCost:
    """The jury's cost (the sum of its runs'), each run's, and the note on how they were
    counted; None where a run's endpoint has no prices."""

    runs: dict[int, float | None]
    total: float | None
    note: str

    def to_dict(self) -> dict[str, Any]:
        return {"runs": {str(k): v for k, v in self.runs.items()}, "total": self.total,
                "note": self.note}  # fmt: skip


@dataclass(frozen=True)
class Jury:
    """A jury of judge runs on one generation run, per rubric (sorted by name)."""

    generation_run: int
    runs: dict[int, str]  # judge run -> label
    combine: str
    statistic: str
    human: str
    options: BootstrapOptions
    rubrics: dict[str, RubricJury]
    cost: JuryCost
    ratings_note: str
    ratings_used: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "generation_run": self.generation_run,
            "judge_runs": [{"id": k, "label": v} for k, v in self.runs.items()],
            "combine": self.combine,
            "statistic": self.statistic,
            "human_score": self.human,
            "n_bootstrap": self.options.n_bootstrap,
            "seed": self.options.seed,
            "confidence": self.options.confidence,
            "ratings_used": dict(self.ratings_used),
            "ratings_note": self.ratings_note,
            "cost": self.cost.to_dict(),
            "rubrics": {name: r.to_dict() for name, r in self.rubrics.items()},
        }


# -- reading and checking ------------------------------------------------------------------


def jury_runs(session: Session, run_ids: Sequence[int]) -> list[JudgeRun]:
    """The runs, checked: two or more distinct ones, all of one generation run, on the same
    rubrics, each rubric in one version. InvalidInputError says which runs differ."""
    ids = list(dict.fromkeys(run_ids))
    if len(ids) < 2:
        got = f"only judge run {ids[0]}" if ids else "no judge run"
        raise InvalidInputError(
            f"a jury needs two judge runs or more of the same answers, got {got}; name "
            "several runs (`fairjudge runs` lists them)"
        )
    runs = [get_judge_run(session, i) for i in ids]
    first = runs[0]
    for run in runs[1:]:
        if run.generation_run_id != first.generation_run_id:
            raise InvalidInputError(
                f"judge runs {first.id} and {run.id} judged different answers (generation "
                f"runs {first.generation_run_id} and {run.generation_run_id}): a jury "
                "combines judges of the same answers"
            )
    versions: dict[int, dict[str, set[str | None]]] = defaultdict(lambda: defaultdict(set))
    for run_id, rubric, version in session.exec(
        select(Judgment.judge_run_id, Judgment.rubric, Judgment.rubric_version)
        .where(col(Judgment.judge_run_id).in_(ids))
        .distinct()
    ):
        versions[run_id][rubric].add(version)
    _same_rubrics(runs, versions)
    return runs


def _same_rubrics(runs: Sequence[JudgeRun], versions: Mapping[int, Mapping[str, set[Any]]]) -> None:
    first = runs[0]
    names = {r.id: sorted(versions.get(int(r.id or 0), {})) for r in runs}
    for run in runs[1:]:
        if names[run.id] != names[first.id]:
            raise InvalidInputError(
                f"judge runs {first.id} and {run.id} judged different rubrics "
                f"({', '.join(names[first.id]) or 'none'} vs "
                f"{', '.join(names[run.id]) or 'none'}): "
                "a jury combines judges of the same rubrics"
            )
    for rubric in names[first.id]:
        seen = {int(r.id or 0): versions[int(r.id or 0)][rubric] - {None} for r in runs}
        found = set().union(*seen.values())
        if len(found) > 1:
            said = "; ".join(f"run {k}: {', '.join(sorted(map(str, v)))}" for k, v in seen.items())
            raise InvalidInputError(
                f"the judge runs judged rubric {rubric} in different versions ({said}), "
                "whose definitions or scales may differ: a jury combines judges of one version"
            )


def _check_scale(run: int, rubric: str, values: Sequence[float], scale: Scale) -> None:
    outside = [v for v in values if not scale.within(v)]
    if outside:
        raise RatingsError(
            f"judge run {run}'s {rubric} scores lie outside the rubric's {scale} scale (e.g. "
            f"{outside[0]:g}): the runs are not on one scale, so they cannot be combined"
        )


# -- the jury ------------------------------------------------------------------------------


def jury(
    session: Session,
    run_ids: Sequence[int],
    *,
    how: str = "mean",
    statistic: str = "spearman",
    folds: int = FOLDS,
    human: str = "mean",
    campaigns: Sequence[str] = (),
    options: BootstrapOptions = DEFAULT_OPTIONS,
    prices: Mapping[int, Prices | None] | None = None,
) -> Jury:
    """The jury of ``run_ids`` combined by ``how`` (see ``judge.stats.jury``), per rubric
    with ratings; ``prices`` per judge run for the cost (None: unknown)."""
    if how not in COMBINES:
        raise InvalidInputError(f"combine must be one of {', '.join(COMBINES)}, got {how!r}")
    if statistic not in STATISTICS:
        raise InvalidInputError(
            f"statistic must be one of {', '.join(STATISTICS)}, got {statistic!r}"
        )
    runs = jury_runs(session, run_ids)
    ids = [int(r.id or 0) for r in runs]
    generation = runs[0].generation_run_id
    selection = drawn_ratings(session, generation, campaigns)
    if not selection.ratings:
        raise InvalidInputError(
            f"generation run {generation} (the answers these judges scored) has no human "
            f"ratings, so no judge can be checked against people; import some with "
            f"`fairjudge ratings import FILE --run {generation}`"
        )
    data = [load_run_data(session, i, campaigns, human, selection=selection) for i in ids]
    judged = {s.rubric for s in data[0].scores}
    both = sorted(judged & set(data[0].human))
    if not both:
        raise InvalidInputError(
            f"the ratings of generation run {generation} are of rubric(s) "
            f"{', '.join(sorted(data[0].human))}, which the jury's runs did not judge "
            f"({', '.join(sorted(judged)) or 'none'}); rate the rubrics the judges scored"
        )
    rubrics: dict[str, RubricJury] = {}
    for rubric in both:
        scores = [
            {
                s.item_id: float(s.score)
                for s in d.scores
                if s.rubric == rubric and s.score is not None
            }
            for d in data
        ]
        scale = data[0].scale(rubric)
        for run_id, found in zip(ids, scores, strict=True):
            _check_scale(run_id, rubric, list(found.values()), scale)
        rubrics[rubric] = _rubric(
            rubric, scale, data[0].human[rubric], scores, ids, [judge_label(r) for r in runs],
            how=how, statistic=statistic, folds=folds, options=options,
        )  # fmt: skip
    if all(r.n_used == 0 for r in rubrics.values()):
        raise InvalidInputError(
            f"no rated item of generation run {generation} was scored by every judge of the "
            "jury; rate items these runs scored"
        )
    return Jury(
        generation, {i: judge_label(r) for i, r in zip(ids, runs, strict=True)}, how, statistic,
        human, options, rubrics, _cost(session, ids, prices or {}), selection.describe(),
        selection.to_dict(),
    )  # fmt: skip


def _rubric(
    rubric: str,
    scale: Scale,
    rated: Mapping[int, float],
    scores: Sequence[Mapping[int, float]],
    ids: Sequence[int],
    labels: Sequence[str],
    *,
    how: str,
    statistic: str,
    folds: int,
    options: BootstrapOptions,
) -> RubricJury:
    """One rubric's jury on the rated items every judge scored."""
    items = [i for i in sorted(rated) if all(i in s for s in scores)]
    unscored = {r: sum(1 for i in rated if i not in s) for r, s in zip(ids, scores, strict=True)}
    h = np.array([rated[i] for i in items])
    matrix = np.array([[s[i] for s in scores] for i in items]).reshape(len(items), len(ids))
    weights = None
    if not items:
        keys = (*SHOWN, "alpha_interval", *BESIDE_CHANCE)
        empty = dict.fromkeys(keys, Coefficient.undefined(0, "no items"))
        members = [Member(lab, r, dict(empty)) for r, lab in zip(ids, labels, strict=True)]
        versus = VersusBest(statistic, 0, math.nan, [math.nan] * len(ids), None, math.nan,
                            math.nan, math.nan, options.confidence, options.n_bootstrap,
                            "undefined", "no rated item was scored by every judge")  # fmt: skip
        return RubricJury(rubric, scale, len(rated), 0, unscored,
                          Member(JURY, None, dict(empty)), members, versus)  # fmt: skip
    labels_ = scale.labels
    if how == "learnt":
        try:
            fit = cross_fit(matrix, h, folds=folds, seed=options.seed, labels=labels_)
        except ValueError as exc:
            raise InvalidInputError(f"rubric {rubric}: {exc}") from None
        combined, weights = fit.predictions, Weights.of(ids, fit)
    else:
        combined = combine(matrix, how, labels=labels_)
    members = [
        _member(lab, r, matrix[:, k], h, labels_, options)
        for k, (r, lab) in enumerate(zip(ids, labels, strict=True))
    ]
    versus = versus_best(combined, matrix, h, statistic=statistic, options=options,
                         labels=labels_)  # fmt: skip
    same = next((r for k, r in enumerate(ids) if np.array_equal(combined, matrix[:, k])), None)
    return RubricJury(
        rubric, scale, len(rated), len(items), unscored,
        _member(f"{JURY} ({how})", None, combined, h, labels_, options), members, versus,
        weights, same,
    )  # fmt: skip


def _member(
    label: str,
    run: int | None,
    x: np.ndarray,
    h: np.ndarray,
    labels: Sequence[int],
    options: BootstrapOptions,
) -> Member:
    agreement = judge_vs_human(x, h, options=options, labels=labels, warn=False)
    coefficients = {k: agreement.coefficients[k] for k in SHOWN}
    coefficients["alpha_interval"] = pair_alpha(x, h, options=options)
    coefficients |= {k: agreement.coefficients[k] for k in BESIDE_CHANCE}
    return Member(label, run, coefficients, list(agreement.flags), agreement.majority_category)


def _cost(session: Session, ids: Sequence[int], prices: Mapping[int, Prices | None]) -> JuryCost:
    costs = {i: judge_run_cost(session, i, prices.get(i)).total.cost for i in ids}
    missing = [i for i, c in costs.items() if c is None]
    if missing:
        note = (
            f"cost unknown: the endpoint of judge run(s) {', '.join(map(str, missing))} has "
            "no prices in the config"
        )
        total = None
    else:
        total = float(sum(c for c in costs.values() if c is not None))
        note = (
            "the jury costs the sum of its runs' costs: tokens the endpoints reported, at "
            "each endpoint's prices now"
        )
    return JuryCost(costs, total, note)


# -- what the CLI prints -------------------------------------------------------------------


def _cell(c: Coefficient) -> str:
    if not math.isfinite(c.value):
        return f"undefined ({c.undefined_reason})" if c.undefined_reason else "undefined"
    if math.isfinite(c.ci_low) and math.isfinite(c.ci_high):
        return f"{c.value:.3f} [{c.ci_low:.3f}, {c.ci_high:.3f}]"
    return f"{c.value:.3f}"


def _money(v: float | None) -> str:
    return "unknown" if v is None else f"{v:.4g}"


def verdict_line(j: Jury, name: str) -> str:
    """One line per rubric: better, not shown better or worse than the best judge, with the
    difference and its interval."""
    r = j.rubrics[name]
    v, best = r.versus, r.best
    who = f"{JURY} ({j.combine})"
    if best is None or v.verdict == "undefined":
        return f"{name}: {who}: no comparison ({v.reason})"
    level = f"{100 * v.confidence:g} %"
    figure = f"{v.statistic} {v.difference:+.3f}"
    if math.isfinite(v.ci_low):
        figure += f", {level} interval [{v.ci_low:+.3f}, {v.ci_high:+.3f}]"
    against = f"its best judge, run {best.judge_run} ({best.label})"
    if r.same_as is not None:
        return (
            f"{name}: the jury's scores equal judge run {r.same_as}'s on every item, so it is "
            f"not better than {against} ({figure})"
        )
    said = {
        "better": "agrees with people better than",
        "worse": "agrees with people worse than",
        "not shown better": "is not shown better than",
    }[v.verdict]
    tail = "; the interval includes 0" if v.verdict == "not shown better" else ""
    return f"{name}: {who} {said} {against}: {figure}{tail}"


def cost_line(j: Jury) -> str:
    """The jury's cost against its best judge's on each rubric."""
    c = j.cost
    bests = sorted({r.best.judge_run for r in j.rubrics.values() if r.best and r.best.judge_run})
    if c.total is None:
        return f"cost: {c.note}"
    parts = []
    for run in bests:
        own = c.runs.get(run)
        if own:
            parts.append(f"{c.total / own:.1f} x judge run {run}'s {_money(own)}")
    beside = f" ({'; '.join(parts)})" if parts else ""
    return f"cost: the jury {_money(c.total)} for {len(c.runs)} runs{beside}; {c.note}"


def _beside_chance(name: str, r: RubricJury) -> Any:
    """Raw agreement beside the majority baseline, kappa and AC1, and the flags, for the
    jury and each judge (``BESIDE_CHANCE``)."""
    from judge.reports.sections import Table

    rows = [[m.label, str(m.judge_run or "all"),
             *(_cell(m.coefficients[k]) for k in BESIDE_CHANCE),
             "; ".join(f.message for f in m.flags) or "none"]
            for m in (r.jury, *r.judges)]  # fmt: skip
    majority = r.jury.majority_category
    note = "majority_baseline: the exact agreement of always answering the people's most "
    note += "frequent category" + (f" ({majority})" if majority is not None else "")
    return Table(f"{name}: raw agreement beside chance", ["", "judge run", *BESIDE_CHANCE,
                 "flags"], rows, [note], key_columns=2)  # fmt: skip


def jury_tables(j: Jury) -> list[Any]:
    """The agreement table of each rubric, the comparison with the best judge, and (learnt)
    the weights; as ``judge.reports.sections.Table`` for the CLI's printer."""
    from judge.reports.sections import Table

    tables = []
    head = ["", "judge run", *SHOWN, "alpha_interval", "cost"]
    for name, r in j.rubrics.items():
        rows = [[m.label, str(m.judge_run or "all"),
                 *(_cell(m.coefficients[k]) for k in (*SHOWN, "alpha_interval")),
                 _money(j.cost.runs.get(m.judge_run) if m.judge_run else j.cost.total)]
                for m in (r.jury, *r.judges)]  # fmt: skip
        left = {k: v for k, v in r.unscored.items() if v}
        notes = [f"{r.n_used} of {r.n_rated} rated items, scored by every judge"]
        if left:
            notes.append(
                "left out, unscored by: " + ", ".join(f"run {k} ({v})" for k, v in left.items())
            )
        tables.append(Table(f"{name} ({r.scale}): the jury and each judge against people",
                            head, rows, notes, key_columns=2))  # fmt: skip
        tables.append(_beside_chance(name, r))
    rows = []
    for name, r in j.rubrics.items():
        v, best = r.versus, r.best
        interval = f"[{v.ci_low:+.3f}, {v.ci_high:+.3f}]" if math.isfinite(v.ci_low) else ""
        rows.append([name, v.statistic, f"{v.jury:.3f}",
                     f"run {best.judge_run}: {v.judges[v.best or 0]:.3f}" if best else "",
                     f"{v.difference:+.3f} {interval}".strip(), v.verdict])  # fmt: skip
    tables.append(Table(
        "The jury minus its best single judge (paired bootstrap over items)",
        ["rubric", "statistic", "jury", "best judge", "difference", "verdict"], rows,
        [f"the best judge is picked again in every resample (the highest of the judges there); "
         f"the point difference uses the judge best on all items. {j.ratings_note}"],
    ))  # fmt: skip
    for name, r in j.rubrics.items():
        if r.weights is None:
            continue
        w = r.weights
        rows = [[str(run), f"{w.mean[run]:.3f}",
                 f"{min(f[run] for f in w.per_fold):.3f}-{max(f[run] for f in w.per_fold):.3f}",
                 f"{w.all_items[run]:.3f}"] for run in w.mean]  # fmt: skip
        tables.append(Table(
            f"{name}: learnt weights ({w.folds} folds, each fold's jury scores from weights "
            "learnt on the other folds)",
            ["judge run", "mean over folds", "range over folds", "on all rated items"], rows,
        ))  # fmt: skip
    return tables
