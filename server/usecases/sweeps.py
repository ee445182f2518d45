"""The paper's judge sweeps: the same answers judged under every temperature x prompt variant,
and their agreement with the humans laid out like FairMonitor's Table 3.

Each configuration is an ordinary judge run (identified by its settings hash, every call
cached), so a sweep resumes where it stopped and a repeated sweep pays for nothing. No Flask
and no click here: the CLI (and later the API or a job) call these functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from annotation.reliability import RunReliability, run_reliability
from annotation.sections import NOTE, table3
from judge.config import Settings
from judge.errors import ConfigError
from judge.progress import Progress
from judge.reports.sections import Table
from judge.runs import RunSummary
from judge.stats.coefficient import DEFAULT_OPTIONS, BootstrapOptions
from judge.store.engine import session_scope
from judge.store.queries import get_generation_run, get_judge_run
from judge.store.tables import HumanRating, Judgment
from server.usecases.requests import JudgeRequest, SweepRequest
from server.usecases.runs import judge

VARIANTS = ("plain", "cot")
# The coefficients a sweep table can show (all on the judge-vs-human pairs, with CIs).
COEFFICIENTS = ("spearman", "pearson", "kendall", "kappa_quadratic")


@dataclass(frozen=True)
class SweepConfig:
    """One judge configuration of a sweep."""

    temperature: float
    prompt_variant: str

    @property
    def label(self) -> str:
        """The column name in the sweep's Table 3, e.g. 'T=0.1 plain'."""
        return f"T={self.temperature:g} {self.prompt_variant}"


@dataclass(frozen=True)
class SweepRun:
    """What the sweep did for one configuration, and where its judge run now stands."""

    config: SweepConfig
    judge_run_id: int
    summary: RunSummary  # this pass only: what was still to do, paid calls, cache hits
    stored: dict[str, int]  # the run's judgments by status, after this pass
    status: str
    status_detail: str | None

    def line(self) -> str:
        """One readable summary line (no Python reprs)."""
        s = self.summary
        work = (
            "nothing left to judge"
            if s.tasks == 0
            else f"{s.tasks} judgments made ({s.model_calls} model calls, {s.cached} from "
            f"cache, {s.http_attempts} HTTP requests)"
        )
        stored = ", ".join(f"{n} {status}" for status, n in sorted(self.stored.items()))
        status = self.status + (f" ({self.status_detail})" if self.status_detail else "")
        return (
            f"{self.config.label}: judge run {self.judge_run_id}, {work}; "
            f"stored {stored or 'no judgments'}; {status}"
        )

    def to_dict(self) -> dict[str, Any]:
        s = self.summary
        return {
            "label": self.config.label,
            "temperature": self.config.temperature,
            "prompt_variant": self.config.prompt_variant,
            "judge_run": self.judge_run_id,
            "tasks": s.tasks,
            "model_calls": s.model_calls,
            "cached": s.cached,
            "http_attempts": s.http_attempts,
            "made": dict(s.flags),
            "stored": dict(self.stored),
            "status": self.status,
            "status_detail": self.status_detail,
        }


@dataclass(frozen=True)
class SweepResult:
    """The judge runs of one sweep over a generation run, in sweep order."""

    generation_run_id: int
    runs: list[SweepRun]

    @property
    def judge_run_ids(self) -> list[int]:
        return [r.judge_run_id for r in self.runs]

    @property
    def model_calls(self) -> int:
        return sum(r.summary.model_calls for r in self.runs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "generation_run": self.generation_run_id,
            "model_calls": self.model_calls,
            "configurations": [r.to_dict() for r in self.runs],
        }


def sweep_configs(temperatures: Sequence[float], variants: Sequence[str]) -> list[SweepConfig]:
    """Every variant x temperature, variants outermost (the paper's column order), each once.

    >>> [c.label for c in sweep_configs([0.1, 1.0], ["plain", "cot"])]
    ['T=0.1 plain', 'T=1 plain', 'T=0.1 cot', 'T=1 cot']
    """
    if not temperatures:
        raise ConfigError("temperatures: give at least one, e.g. 0.1,0.5,1.0")
    if not variants:
        raise ConfigError("prompt variants: give at least one of plain, cot")
    for v in variants:
        if v not in VARIANTS:
            raise ConfigError(f"prompt variants: {v!r} is not one of {', '.join(VARIANTS)}")
    configs = [SweepConfig(float(t), v) for v in variants for t in temperatures]
    return list(dict.fromkeys(configs))


def judge_requests(request: SweepRequest) -> list[tuple[SweepConfig, JudgeRequest]]:
    """Each configuration of a sweep with the judge request that runs it: the sweep's endpoint
    and samples, the configuration's temperature and prompt variant. Every override of a
    sweep thus reaches the settings the way any judge request's does (``apply_overrides``,
    in ``runs.judge``), never by a second path; bounds are checked here, before any call.

    >>> [(c.label, r.temperature) for c, r in judge_requests(SweepRequest(
    ...     generation_run_id=1, temperatures=[0.1], prompt_variants=["cot"]))]
    [('T=0.1 cot', 0.1)]
    """
    return [
        (
            config,
            JudgeRequest.build(
                generation_run_id=request.generation_run_id,
                endpoint=request.endpoint,
                samples=request.samples,
                temperature=config.temperature,
                prompt_variant=config.prompt_variant,
            ),
        )
        for config in sweep_configs(request.temperatures, request.prompt_variants)
    ]


def run_sweep(
    engine: Engine,
    settings: Settings,
    request: SweepRequest,
    *,
    progress_for: Callable[[SweepConfig], Progress | None] | None = None,
) -> SweepResult:
    """Judge a generation run under every temperature x prompt variant, one after another.

    Everything else comes from ``settings.judge`` (endpoint and samples unless the request
    sets them; aggregation, max tokens). Each configuration creates or resumes its own judge
    run; ``progress_for`` gives the progress callback of one configuration (the CLI shows
    one bar each).
    """
    planned = judge_requests(request)
    with session_scope(engine) as session:
        get_generation_run(session, request.generation_run_id)  # missing: fails before a call
    runs = []
    for config, judge_request in planned:
        progress = progress_for(config) if progress_for else None
        summary = judge(engine, settings, judge_request, progress=progress)
        with session_scope(engine) as session:
            jrun = get_judge_run(session, summary.run_id)
            stored = dict(
                session.exec(
                    select(Judgment.status, func.count())
                    .where(Judgment.judge_run_id == summary.run_id)
                    .group_by(Judgment.status)
                ).all()
            )
            runs.append(
                SweepRun(config, summary.run_id, summary, stored, jrun.status, jrun.status_detail)
            )
    return SweepResult(request.generation_run_id, runs)


def has_ratings(session: Session, generation_run_id: int) -> bool:
    """Whether any human ratings are stored for the generation run."""
    found = session.exec(
        select(HumanRating.id).where(HumanRating.generation_run_id == generation_run_id)
    ).first()
    return found is not None


def ratings_hint(generation_run_id: int) -> str:
    """What to do when a sweep has no human ratings to compare with."""
    return (
        f"no human ratings for generation run {generation_run_id} yet, so no agreement table; "
        f"import them with `fairjudge ratings import FILE --run {generation_run_id}` "
        "(CSV: item_id,rubric,rater,score) and run the sweep again (it costs no model calls)"
    )


def sweep_reliability(
    session: Session,
    result: SweepResult,
    *,
    options: BootstrapOptions = DEFAULT_OPTIONS,
    human: str = "mean",
) -> RunReliability:
    """Judge-vs-human agreement of the sweep's judge runs only, in sweep order.

    Raises NotFoundError (saying how to import them) when the run has no human ratings.
    """
    full = run_reliability(session, result.generation_run_id, options=options, human=human)
    order = {run_id: i for i, run_id in enumerate(result.judge_run_ids)}
    rubrics = {
        name: replace(
            entry,
            judges=sorted(
                (j for j in entry.judges if j.judge_run in order),
                key=lambda j: order[j.judge_run],
            ),
        )
        for name, entry in full.rubrics.items()
    }
    return replace(full, rubrics=rubrics)


def layout(reliability: RunReliability, result: SweepResult, coefficient: str) -> Table:
    """FairMonitor's Table 3 for a sweep: rubric rows x 'T=0.1 plain' ... columns, with the
    human ceiling column; cells '0.78 [0.70, 0.85]'."""
    if coefficient not in COEFFICIENTS:
        raise ConfigError(f"coefficient {coefficient!r} is not one of {', '.join(COEFFICIENTS)}")
    head, body = table3(reliability, coefficient)
    names = {}  # judge label (model, variant, T, samples) -> the sweep's column name
    for entry in reliability.rubrics.values():
        for j in entry.judges:
            names[j.label] = _config_of(result, j.judge_run).label
    columns = [names.get(h, h) for h in head]
    runs = ", ".join(f"{r.config.label} = judge run {r.judge_run_id}" for r in result.runs)
    return Table(
        f"Judge vs human: {coefficient} [95 % CI] (generation run {result.generation_run_id})",
        columns,
        body,
        notes=[f"{NOTE}; {reliability.options.n_bootstrap} bootstrap resamples.", runs],
    )


def _config_of(result: SweepResult, judge_run_id: int) -> SweepConfig:
    return next(r.config for r in result.runs if r.judge_run_id == judge_run_id)


def sweep_table(
    session: Session,
    result: SweepResult,
    coefficient: str = "spearman",
    *,
    options: BootstrapOptions = DEFAULT_OPTIONS,
    human: str = "mean",
) -> Table:
    """The sweep's Table 3 for one coefficient (see ``layout``); NotFoundError without
    human ratings."""
    if coefficient not in COEFFICIENTS:  # fail before the bootstrap, not after
        raise ConfigError(f"coefficient {coefficient!r} is not one of {', '.join(COEFFICIENTS)}")
    reliability = sweep_reliability(session, result, options=options, human=human)
    return layout(reliability, result, coefficient)
