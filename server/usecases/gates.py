"""A job's size before it is queued: what its dry run (``dry_run``) says it would send
(``JobSize``), checked against ``[server] confirm_calls`` and ``confirm_cost`` (``check_size``;
a job over them needs confirming, ``ConfirmationNeeded``), and the largest audit design a dry
run plans here (``check_design_size``). Each interface says how to confirm in its own words:
the API a ``confirm`` field, the dashboard a button carrying the calls it accepts.

Every kind of job that can call a model is sized (``GATED``); a kind that cannot is named in
``UNGATED`` with the reason, and a kind in neither fails the import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlmodel import Session

from judge.costs import Prices
from judge.errors import InvalidInputError
from server.usecases.audit_requests import AuditClassifyRequest, AuditRequest, suite_inputs
from server.usecases.jobs import check_params, check_targets, job_request
from server.usecases.requests import (
    JOB_REQUESTS,
    CounterfactualRequest,
    GenerateRequest,
    ItemCellRequest,
    ItemPlanRequest,
    JudgePairsRequest,
    JudgeRequest,
    Request,
    SweepRequest,
)
from server.usecases.runs import judge_dry_run

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings

__all__ = [
    "DRY_RUNS",
    "GATED",
    "MAX_PLANNED_PROMPTS",
    "UNGATED",
    "ConfirmationNeeded",
    "JobSize",
    "check_design_size",
    "check_size",
    "dry_run",
    "job_size",
]

DRY_RUNS = (
    "judge", "generate", "audit", "audit-classify", "counterfactual", "item-plan", "item-generate",
    "judge-pairs",
)  # fmt: skip
"""The kinds of job a dry run can estimate."""
GATED = (*DRY_RUNS, "sweep")
"""The kinds of job whose size is checked before they are queued (a sweep: its
configurations' judge dry runs summed)."""
UNGATED = {
    "pull": "a pull reads a campaign's annotations from Label Studio and stores them; it calls "
    "no model, so it costs no model calls and is never sized",
}
"""Kinds of job that cannot cost model calls, and why: queued without a size."""
assert set(GATED) | set(UNGATED) == set(JOB_REQUESTS), "every job kind is GATED or UNGATED"
assert not set(GATED) & set(UNGATED)

MAX_PLANNED_PROMPTS = 200_000
"""The most prompts a dry run plans for an audit queued over HTTP or from the dashboard (the
whole names design, 168,000, fits): planning holds every prompt in memory, so a design of
millions (``repeats`` 1000: 1,680,000, ten times the names design's ~9 s of planning) would
hold a web worker and its memory for a minute or more."""


def check_design_size(request: Any, settings: Settings | None = None) -> None:
    """InvalidInputError, at once, when an audit's design (its first ``limit`` prompts) is
    over MAX_PLANNED_PROMPTS, saying what to change."""
    design_prompts(request.suite, request.options, request.limit, settings)


def design_prompts(
    suite: str, options: Mapping[str, Any], limit: int | None, settings: Settings | None = None
) -> int:
    """How many prompts an audit asks (the design's first ``limit``), read from its design
    without planning it (BBQ's items from ``settings``' ``[audits] bbq_data``);
    InvalidInputError when that is over MAX_PLANNED_PROMPTS."""
    from judge.audits.suites import make_suite

    count = make_suite(suite, **options, **suite_inputs(settings, suite)).count()
    wanted = count if limit is None else min(count, int(limit))
    if wanted > MAX_PLANNED_PROMPTS:
        raise _too_large(suite, count)
    return wanted


def check_items_size(request: ItemPlanRequest | ItemCellRequest) -> None:
    """InvalidInputError, at once, when an item-writing job could make more than
    MAX_PLANNED_PROMPTS first calls: cells x ceil(items per cell / items_per_call), counted
    from the request alone (the cells' stored items could only lower it), so nothing is
    planned to find out (a plan of 360 cells x 100,000 items one per call is 36 million)."""
    from math import ceil

    from server.usecases.datasets import _generation_options, _plan_grid

    k = _generation_options(request).items_per_call
    if isinstance(request, ItemPlanRequest):
        cells, per_cell = len(_plan_grid(request)[1]), request.per_cell
    else:
        cells, per_cell = 1, request.count
    calls = cells * ceil(per_cell / k)
    if calls > MAX_PLANNED_PROMPTS:
        raise InvalidInputError(
            f"this item plan could make up to {calls:,} calls ({cells:,} cells x "
            f"{ceil(per_cell / k):,} calls of {k} items), more than the "
            f"{MAX_PLANNED_PROMPTS:,} a dry run here may plan; lower per_cell, raise "
            "items_per_call or choose fewer stages, factors or scenarios; nothing was queued"
        )


def _too_large(suite: str, count: int) -> InvalidInputError:
    return InvalidInputError(
        f"the {suite} design with these options has {count:,} prompts, more than the "
        f"{MAX_PLANNED_PROMPTS:,} a dry run here may plan; set limit to "
        f"{MAX_PLANNED_PROMPTS:,} or fewer, or choose smaller options; nothing was queued"
    )


@dataclass(frozen=True)
class JobSize:
    """What a job would send, from its dry run: calls (an award audit's follow-up turn at
    most included), prompt tokens, and the cost with every reply at ``max_tokens`` (a bound),
    live and at the batch price (None: the endpoint has no prices)."""

    calls: int
    prompt_tokens: int
    cost_max: float | None
    cost_max_batch: float | None
    reply: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The whole dry run it was read from."""
    bound: bool = False
    """Whether ``calls`` is an upper bound read from an audit's design, not a dry run."""

    @classmethod
    def of(cls, estimate: Mapping[str, Any]) -> JobSize:
        """The size of a dry run's reply (``dry_run``)."""
        parts = [e for e in (estimate.get("estimate"), estimate.get("followup_estimate")) if e]

        def total(key: str) -> float | None:
            values = [e.get(key) for e in parts]
            return None if not values or None in values else float(sum(values))

        return cls(
            calls=sum(int(e.get("calls") or 0) for e in parts),
            prompt_tokens=sum(int(e.get("prompt_tokens") or 0) for e in parts),
            cost_max=total("cost_max"),
            cost_max_batch=total("cost_max_batch"),
            reply=estimate,
        )

    def over(self, settings: Settings) -> list[str]:
        """The limits of ``[server]`` this size passes (``confirm_calls``, ``confirm_cost``)."""
        limits = settings.server
        over = []
        if self.calls > limits.confirm_calls:
            over.append(f"{limits.confirm_calls:,} calls ([server] confirm_calls)")
        if self.cost_max is not None and self.cost_max > limits.confirm_cost:
            over.append(f"a cost of {limits.confirm_cost:g} ([server] confirm_cost)")
        return over

    def describe(self) -> str:
        """E.g. '168,000 calls, about 14.1M prompt tokens, at most 25.2 live or 12.6 at the
        batch price'; for a bound, 'up to 168,000 calls (...)'."""
        if self.bound:
            return (
                f"up to {self.calls:,} calls (the design's prompts, before those already "
                "answered or cached are taken off; a dry run gives the tokens and cost)"
            )
        tokens = (
            f"{self.prompt_tokens / 1e6:.1f}M"
            if self.prompt_tokens >= 1e5
            else (f"{self.prompt_tokens:,}")
        )
        text = f"{self.calls:,} calls, about {tokens} prompt tokens"
        if self.cost_max is None:
            return text + ", cost unknown (the endpoint has no prices)"
        batch = f" or {self.cost_max_batch:.4g} at the batch price" if self.cost_max_batch else ""
        return text + f", at most {self.cost_max:.4g} live{batch}"


class ConfirmationNeeded(InvalidInputError):
    """A job over the server's size limits, queued without confirmation (HTTP 403): ``size``
    says what it would send; each interface says how to confirm in its own words."""

    def __init__(self, kind: str, size: JobSize, over: list[str]) -> None:
        self.kind, self.size, self.over = kind, size, over
        article = "an" if kind[0] in "aeiou" else "a"
        super().__init__(
            f"{article} {kind} job that would send {size.describe()} is over "
            f"{' and '.join(over)}; nothing was queued"
        )

    def add_note_to_message(self, how: str) -> ConfirmationNeeded:
        """The same refusal, its message ending with how to confirm in the caller's words."""
        self.args = (f"{self.args[0]}: {how}",)
        return self


def dry_run(
    engine: Engine, settings: Settings, kind: str, params: Mapping[str, Any]
) -> dict[str, Any]:
    """What a job of ``kind`` with ``params`` would send and cost, nothing sent or stored:
    the same checks as ``submit``, then the dry run of the use case it runs (the CLI's
    ``--dry-run`` where the command has one: the same function, so the numbers are the
    CLI's)."""

    if kind not in DRY_RUNS:
        raise InvalidInputError(
            f"a {kind} job has no dry run; dry runs estimate {', '.join(DRY_RUNS)} jobs"
        )
    checked = check_params(kind, params)
    with Session(engine) as session:
        check_targets(session, kind, checked, settings)
    return {"kind": kind, **_estimate(engine, settings, job_request(kind, checked))}


def _estimate(engine: Engine, settings: Settings, request: Request) -> dict[str, Any]:
    """The dry run of the use case ``request`` asks for (its kind is in DRY_RUNS)."""
    from server.usecases import audits, datasets, followups, pairwise, runs, trust

    if isinstance(request, AuditRequest):
        check_design_size(request, settings)
    if isinstance(request, ItemPlanRequest | ItemCellRequest):
        check_items_size(request)
    estimates: list[tuple[type[Request], Callable[..., dict[str, Any]]]] = [
        (AuditRequest, audits.audit_dry_run),
        (ItemPlanRequest, datasets.plan_items_dry_run),
        (ItemCellRequest, datasets.item_cell_dry_run),
        (JudgeRequest, runs.judge_dry_run),
        (GenerateRequest, runs.generate_dry_run),
        (CounterfactualRequest, trust.counterfactual_dry_run),
        (AuditClassifyRequest, followups.classify_dry_run),
        (JudgePairsRequest, pairwise.judge_pairs_dry_run),
    ]
    for kind, estimate in estimates:
        if isinstance(request, kind):
            return estimate(engine, settings, request)
    raise InvalidInputError(f"a {type(request).__name__} has no dry run")  # not in DRY_RUNS


def job_size(
    engine: Engine, settings: Settings, kind: str, params: Mapping[str, Any]
) -> JobSize | None:
    """What a job would send (``dry_run``; a sweep: its configurations' judge dry runs
    summed), or None for a kind that has neither."""
    if kind == "sweep":
        return _sweep_size(engine, settings, params)
    if kind not in DRY_RUNS:
        return None
    return JobSize.of(dry_run(engine, settings, kind, params))


def _sweep_size(engine: Engine, settings: Settings, params: Mapping[str, Any]) -> JobSize:
    """A sweep judges its run once per temperature x prompt variant, each a judge run of its
    own: the sum of those judge runs' dry runs."""
    from server.usecases.sweeps import judge_requests

    request = job_request("sweep", params)
    assert isinstance(request, SweepRequest)
    parts = [
        JobSize.of(judge_dry_run(engine, settings, judged)) for _, judged in judge_requests(request)
    ]
    costs = [p.cost_max for p in parts]
    batch = [p.cost_max_batch for p in parts]
    total = {
        "calls": sum(p.calls for p in parts),
        "prompt_tokens": sum(p.prompt_tokens for p in parts),
        "cost_max": None if None in costs else sum(c or 0.0 for c in costs),
        "cost_max_batch": None if None in batch else sum(c or 0.0 for c in batch),
    }
    reply = {"kind": "sweep", "configurations": len(parts), "calls_to_send": total["calls"]}
    return JobSize.of({**reply, "estimate": total})


def check_size(
    engine: Engine,
    settings: Settings,
    kind: str,
    params: Mapping[str, Any],
    *,
    confirmed_calls: int | None = None,
    ask: str | None = None,
) -> JobSize | None:
    """The job's size; ConfirmationNeeded when it passes a ``[server]`` limit (or ``ask``
    gives another reason to show it first) and ``confirmed_calls`` (the calls its submitter
    saw and accepted) does not cover it."""
    extra = [ask] if ask else []
    quick = audit_bound(settings, kind, params)
    if quick is not None:  # decided from the design alone, in a fraction of a second
        over = quick.over(settings) + extra
        if over and (confirmed_calls is None or confirmed_calls < quick.calls):
            raise ConfirmationNeeded(kind, quick, over)
        if not _priced(settings, params):
            return quick  # at most that many calls, no cost to bound: within the limits
    size = job_size(engine, settings, kind, params)
    if size is None:
        return None
    over = size.over(settings) + extra
    if over and (confirmed_calls is None or confirmed_calls < size.calls):
        raise ConfirmationNeeded(kind, size, over)
    return size


def audit_bound(settings: Settings, kind: str, params: Mapping[str, Any]) -> JobSize | None:
    """For an audit, the most calls it can send, read from its design without planning it
    (the first ``limit`` prompts, twice with the award audit's follow-ups): planning the
    names design takes seconds, too long for a refusal over HTTP. None for other kinds."""
    if kind != "audit":
        return None
    options = dict(params.get("options") or {})
    calls = design_prompts(str(params["suite"]), options, params.get("limit"), settings)
    if options.get("followup"):
        calls *= 2
    return JobSize(calls=calls, prompt_tokens=0, cost_max=None, cost_max_batch=None, bound=True)


def _priced(settings: Settings, params: Mapping[str, Any]) -> bool:
    """Whether the audit's endpoint has prices (then its cost must be checked too)."""

    name = params.get("endpoint") or settings.generation.endpoint
    return Prices.of(settings.endpoint(str(name))) is not None
