"""Does a judge's correction transport across the models it judged? (issue 42)

A judge run judges one generation run, the answers of one model. With two judge runs or more
of the *same judge configuration* (the same ``config_hash``: model, prompt variant,
template, temperature, samples, aggregation, rubrics and server) on different generation
runs, each rated in part by people, ``transport_estimates`` asks, per stage metric and rubric
mean over all items ("all"), whether the judge-human relation is the same on every model's
answers (``judge.stats.transport.relation_by_model``: the regression of the human value on
the judge's with a model interaction, the differences in bias and slope with intervals, and
their joint F-test).

- It **transports** (the F-test does not reject at ``[estimates] transport_alpha``): each
  model also gets the pooled correction (``pooled_calibration``: the line fitted on every
  model's ratings, applied to the model's judge mean), beside its own prediction-powered
  estimate.
- It **does not**: the pooled correction is refused with the numbers, and each model's own
  estimate (its ratings alone, ``annotation.estimates``) is the one to use.

Every run's ratings count (each run's own campaigns and import batches), under the design
``annotation.estimates`` finds for them (``assume_random`` and its check included); a run
whose design is refused makes the test impossible, with that reason. The regression is
unweighted: a design that samples on the judge's scores (stratified by score level) leaves
the relation given the judge's score unbiased.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from sqlmodel import Session

from annotation.estimate_cells import RunData, Target, cell_estimates, targets
from annotation.estimate_results import PPI, Estimate, finite
from annotation.estimates import load_run_data, run_design
from judge.config_estimates import EstimatesConfig
from judge.errors import InvalidInputError
from judge.reports.sections import Table
from judge.stats.ppi import Group
from judge.stats.transport import (
    TransportRefused,
    TransportTest,
    pooled_calibration,
    relation_by_model,
)
from judge.store.queries import get_generation_run, get_judge_run

POOLED = "pooled correction"
SAME_JUDGE = ("model", "prompt_variant", "temperature", "samples", "aggregation", "rubric_set")


@dataclass(frozen=True)
class RunModel:
    """One judge run of the comparison and the model whose answers it judged."""

    judge_run: int
    generation_run: int
    model: str

    @property
    def label(self) -> str:
        return f"{self.model} (judge run {self.judge_run})"


@dataclass(frozen=True)
class ModelEstimates:
    """One model's figure: from its own ratings, and pooled across models (or refused)."""

    run: RunModel
    own: Estimate
    pooled: Estimate


@dataclass(frozen=True)
class TargetTransport:
    """One target's test and each model's estimates (``test`` None: not tested, ``reason``
    says why)."""

    target: str
    label: str
    unit: str
    test: TransportTest | None
    transports: bool | None
    reason: str
    models: list[ModelEstimates]

    def verdict(self, level: float) -> str:
        t = self.test
        if t is None:
            return f"not tested: {self.reason}"
        word = "transports" if self.transports else "does not transport"
        sign = ">=" if self.transports else "<"
        return f"{word} (F p = {t.p_value:.3g} {sign} {level:g})"


@dataclass(frozen=True)
class Transport:
    """Every target's transport test across the runs, and each model's estimates."""

    runs: list[RunModel]
    level: float
    alpha: float
    targets: list[TargetTransport]

    def to_dict(self) -> dict[str, Any]:
        out = []
        for t in self.targets:
            test = None if t.test is None else asdict(t.test)
            models = [
                {"run": {**asdict(m.run), "label": m.run.label}, "own": m.own.to_dict(),
                 "pooled": m.pooled.to_dict()}
                for m in t.models
            ]  # fmt: skip
            entry = {k: getattr(t, k) for k in ("target", "label", "unit", "transports")}
            out.append({**entry, "reason": t.reason, "test": test, "models": models})
        runs = [{**asdict(r), "label": r.label} for r in self.runs]
        return dict(
            finite({"runs": runs, "level": self.level, "alpha": self.alpha, "targets": out})
        )

    def tables(self) -> list[Table]:
        """One table of every target x model, and one of the differences by model."""
        rows, differences = [], []
        for t in self.targets:
            for m in t.models:
                rows.append([t.label, m.run.label, m.own.text(), m.pooled.text(),
                             t.verdict(self.level)])  # fmt: skip
            if t.test is None:
                continue
            for d in t.test.differences:
                differences.append([
                    t.label, f"{d.model} vs {t.test.reference}",
                    f"{d.bias:+.2f} [{d.bias_low:+.2f}, {d.bias_high:+.2f}]",
                    f"{d.slope:+.2f} [{d.slope_low:+.2f}, {d.slope_high:+.2f}]",
                ])  # fmt: skip
        level = f"{100 * (1 - self.alpha):g} %"
        notes = [
            f"pooled only where the judge-human relation is the same on every model: the "
            f"joint F-test of the model terms does not reject at {self.level:g} ([estimates] "
            "transport_alpha); otherwise use each model's own estimate.",
            f"{level} intervals. bias: the difference in the human value at the pooled mean "
            "judge score; slope: in the slope of human on judge (regression with a model "
            "interaction).",
        ]
        return [
            Table(
                "Transport of the judge's correction across models",
                ["figure", "model", f"own ({PPI})", POOLED, "relation"],
                rows, notes, key_columns=2,
            ),
            Table(
                "Judge-human relation by model (difference from the reference)",
                ["figure", "model", "bias", "slope"], differences, key_columns=2,
            ),
        ]  # fmt: skip


def _runs(session: Session, judge_runs: Sequence[int]) -> list[RunModel]:
    """The runs, checked: two or more, distinct, of one judge configuration."""
    ids = list(dict.fromkeys(judge_runs))
    if len(ids) < 2:
        raise InvalidInputError("transport needs two judge runs or more (of different models)")
    found = [get_judge_run(session, i) for i in ids]
    first = found[0]
    for run in found[1:]:
        if run.config_hash != first.config_hash:
            diff = [f for f in SAME_JUDGE if getattr(run, f) != getattr(first, f)]
            what = ", ".join(diff) if diff else "its server or template"
            raise InvalidInputError(
                f"judge runs {first.id} and {run.id} are not the same judge configuration "
                f"(they differ in {what}): a correction transports only within one judge; "
                "compare runs judged with the same settings"
            )
    return [
        RunModel(int(r.id or 0), r.generation_run_id,
                 get_generation_run(session, r.generation_run_id).model)
        for r in found
    ]  # fmt: skip


def _target(
    target: Target, data: list[tuple[RunModel, RunData, Any]], alpha: float, level: float
) -> TargetTransport:
    """One target's test across the runs, and each model's estimates."""
    own, groups, refused = [], {}, ""
    ys: list[float] = []
    xs: list[float] = []
    labels: list[str] = []
    for run, d, design in data:
        judge, human = target.values(d, target.population(d))
        own.append(cell_estimates(judge, human, design, alpha, target.bounds, target.kind)[2])
        if not design.usable:
            refused = refused or f"judge run {run.judge_run}: {design.reason}"
        labelled = [i for i in sorted(human) if i in judge]
        unrated = [v for i, v in judge.items() if i not in human]
        groups[run.label] = Group([human[i] for i in labelled], [judge[i] for i in labelled],
                                  unrated)  # fmt: skip
        ys += [human[i] for i in labelled]
        xs += [judge[i] for i in labelled]
        labels += [run.label] * len(labelled)
    test = None
    if not refused:
        try:
            test = relation_by_model(ys, xs, labels, alpha=alpha)
        except TransportRefused as exc:
            refused = str(exc)
    ok = None if test is None else test.transports(level)
    models = []
    for (run, _, _), estimate in zip(data, own, strict=True):
        pooled = _pooled(groups, run, estimate, test, refused, alpha, level, target.bounds)
        models.append(ModelEstimates(run, estimate, pooled))
    return TargetTransport(target.name, target.label, target.unit, test, ok, refused, models)


def _pooled(
    groups: dict[str, Group],
    run: RunModel,
    own: Estimate,
    test: TransportTest | None,
    refused: str,
    alpha: float,
    level: float,
    bounds: tuple[float, float],
) -> Estimate:
    """The pooled correction for one model, or why it is refused."""
    n = sum(int(np.size(g.y)) for g in groups.values())
    if test is None or not test.transports(level):
        why = refused or (
            f"the judge-human relation differs by model (F p = {test.p_value:.3g} < {level:g}, "
            "[estimates] transport_alpha): no pooled correction; use each model's own estimate"
            if test is not None
            else "not tested"
        )
        return Estimate.refused(POOLED, n, own.N, "pooled", why)
    try:
        m = pooled_calibration(groups, run.label, alpha=alpha)
    except TransportRefused as exc:
        return Estimate.refused(POOLED, n, own.N, "pooled", str(exc))
    return Estimate.of(m, POOLED, own.N, "pooled", bounds)


def transport_estimates(
    session: Session,
    judge_runs: Sequence[int],
    *,
    human: str = "mean",
    assume_random: bool = False,
    accept_unrepresentative: bool = False,
    rules: EstimatesConfig | None = None,
    alpha: float = 0.05,
) -> Transport:
    """The transport test of every stage metric and rubric mean across ``judge_runs`` (the
    first is the reference), and each model's own and pooled estimates (see the module
    docstring). NotFoundError for an unknown run; InvalidInputError for fewer than two runs
    or runs of different judge configurations."""
    rules = rules or EstimatesConfig()
    runs = _runs(session, judge_runs)
    data = []
    for run in runs:
        d = load_run_data(session, run.judge_run, (), human)
        design = run_design(session, d, assume_random, accept_unrepresentative, rules)
        data.append((run, d, design))
    metrics, rubrics = targets(data[0][1])
    found = [
        _target(t, data, alpha, rules.transport_alpha)
        for t in (*metrics, *rubrics)
        if any(t.population(d) for _, d, _ in data)
    ]
    return Transport(runs, rules.transport_alpha, alpha, found)


def rubric_transport(
    session: Session, judge_runs: Sequence[int], rubric: str, *, level: float = 0.05
) -> TargetTransport:
    """The transport test of ``rubric``'s mean alone across ``judge_runs`` (the first the
    reference), on every stored rating of it on each run's answers: what a judge run's
    standing asks of a qualification learnt on another model's answers
    (``server.usecases.standing``). The ratings are taken as they are (assumed random,
    accepted as representative): the test is of the judge-human relation given the judge's
    score, which a design sampling on that score leaves unbiased (the module docstring); the
    per-model estimates it also gives are not used. InvalidInputError as
    ``transport_estimates``, and for a rubric the first run did not judge."""
    runs = _runs(session, judge_runs)
    data = []
    for run in runs:
        d = load_run_data(session, run.judge_run, (), "mean")
        design = run_design(session, d, True, True)
        data.append((run, d, design))
    found = [t for t in targets(data[0][1])[1] if t.name == rubric]
    if not found:
        raise InvalidInputError(f"judge run {runs[0].judge_run} has no scores of rubric {rubric!r}")
    return _target(found[0], data, 0.05, level)
