"""What each kind of job does: its parameters (a pydantic model, also the API's request
schema) and the use case it runs. The one registry of job kinds: the local worker runs these
functions, and a Celery binding would run the same ones.

A job function resumes by construction: the use cases it calls (``usecases.generate``,
``usecases.judge``, a campaign pull, ``audits.run_audit``, ``audits.classify_followups``)
store each result as it arrives and, run again, do only what is missing, so rerunning a job
whose worker died costs nothing already stored. (So an audit job has no ``new``: run again
after a crash, it would start yet another run instead of resuming its own.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from judge.errors import InvalidInputError

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

    from judge.config import Settings

Progress = Callable[[int, int], None]
Note = Callable[[dict[str, Any]], None]
"""Records part of a running job's result (its run's id) before the job ends."""


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JudgeParams(_Params):
    """Judge a generation run's answers (resumes the judge run with the same settings)."""

    generation_run_id: int = Field(ge=1, le=2**63 - 1, description="The answers to judge.")
    endpoint: str | None = Field(
        default=None, description="Judge endpoint's name (default: [judge] endpoint)."
    )
    prompt_variant: Literal["plain", "cot"] | None = Field(
        default=None, description="Judge prompt variant (default: [judge] prompt_variant)."
    )
    temperature: float | None = Field(default=None, ge=0, le=2)
    samples: int | None = Field(default=None, ge=1, le=20, description="Judge samples per item.")
    rubric_set: str | None = Field(
        default=None,
        description="'fairmonitor' (the default) or registered rubric names, comma-separated.",
    )
    swap_order: bool | None = Field(
        default=None,
        description="Judge every pair (TCS, PCS, ETCS, SBAS) in both orders (order bias).",
    )


class GenerateParams(_Params):
    """Ask the model under test for a dataset's answers (resumes a run with these settings)."""

    dataset: str = Field(min_length=1, description="The dataset's name.")
    endpoint: str | None = Field(
        default=None, description="Model under test (default: [generation] endpoint)."
    )
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=16, le=32_768)
    limit: int | None = Field(default=None, ge=1, description="Only the first N items.")
    accepted_only: bool = Field(default=False, description="Only items experts accepted.")
    include_drafts: bool = Field(
        default=False,
        description="Also generated items waiting for review (drafts); rejected items are "
        "never asked.",
    )


class PullParams(_Params):
    """Bring a Label Studio campaign's ratings into the store."""

    campaign: str = Field(min_length=1, description="The campaign's name.")


class AwardOptions(_Params):
    """The award audit's design (the bundled item bank and names)."""

    levels: list[int] | None = Field(
        default=None,
        min_length=1,
        max_length=21,
        description="Performance levels: correct answers out of the bank's items (default "
        "5, 10, 15, 20).",
    )
    pairs_per_level: int | None = Field(
        default=None, ge=1, le=500, description="Response-vector pairs per level (default 125)."
    )
    seed: int | None = Field(
        default=None, ge=0, le=2**31 - 1, description="Seed of the design's draws (0)."
    )
    followup: bool | None = Field(
        default=None, description="Also ask why, after every answer that chose a student."
    )


class NamesOptions(_Params):
    """The name-based advice audit's design (the bundled design file)."""

    repeats: int | None = Field(
        default=None, ge=1, le=1000, description="Answers per name and template (default 100)."
    )


class BbiOptions(_Params):
    """The BBI audit's design (the bundled StereoSet and CrowS-Pairs samples)."""

    per_type: int | None = Field(
        default=None, ge=1, le=1000, description="Items of each bias type per prompt (20)."
    )
    repeats: int | None = Field(
        default=None, ge=1, le=100, description="Times each batch is asked (5)."
    )
    seed: int | None = Field(
        default=None, ge=0, le=2**31 - 1, description="Seed of the shuffles (0)."
    )
    bias_types: list[str] | None = Field(
        default=None,
        min_length=1,
        max_length=20,
        description="Bias types (default: gender, race, religion, as in seed 004).",
    )
    max_per_type: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="At most N items of each dataset and bias type, drawn with the seed.",
    )


SUITE_OPTIONS: dict[str, type[_Params]] = {
    "award": AwardOptions,
    "names": NamesOptions,
    "bbi": BbiOptions,
}
"""The design options a job or the API may set, per suite. Options naming input files (item
banks, name lists, designs, datasets) are the CLI's only: over HTTP they would let any key
holder make the server read a file of its choosing."""


class AuditParams(_Params):
    """Send an audit suite's design to the model under test (resumes the run with the same
    settings and design)."""

    suite: Literal["award", "names", "bbi"] = Field(description="award, names or bbi")
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="The suite's design. award: levels, pairs_per_level, seed, followup; "
        "names: repeats; bbi: per_type, repeats, seed, bias_types, max_per_type. Unset: the "
        "suite's default.",
    )
    endpoint: str | None = Field(
        default=None, description="Model under test (default: [generation] endpoint)."
    )
    temperature: float | None = Field(
        default=None, ge=0, le=2, description="Sampling temperature (default 1.0)."
    )
    max_tokens: int | None = Field(
        default=None,
        ge=1,
        le=32_768,
        description="Longest answer (default: award 300, names 200, bbi 2048).",
    )
    limit: int | None = Field(default=None, ge=1, description="Only the design's first N prompts.")

    @field_validator("options")
    @classmethod
    def _suite_options(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        suite = info.data.get("suite")
        if suite not in SUITE_OPTIONS:  # the suite itself is wrong: that error says so
            return value
        model = SUITE_OPTIONS[suite]
        try:
            return model.model_validate(value).model_dump(exclude_none=True)
        except ValidationError as exc:
            known = ", ".join(model.model_fields)
            problems = []
            for e in exc.errors():
                where = ".".join(str(p) for p in e["loc"]) or "options"
                if e["type"] == "extra_forbidden":
                    problems.append(f"{where} is not an option of the {suite} suite ({known})")
                else:
                    problems.append(f"{where}: {e['msg']}")
            raise PydanticCustomError(
                "audit_options", "{problems}", {"problems": "; ".join(problems)}
            ) from None


class AuditClassifyParams(_Params):
    """Have the judge classify an award audit run's follow-up explanations (resumable)."""

    run_id: int = Field(ge=1, le=2**63 - 1, description="The award audit run.")
    endpoint: str | None = Field(
        default=None, description="Judge endpoint (default: [judge] endpoint)."
    )


JobKind = Literal["judge", "generate", "pull", "audit", "audit-classify"]


@dataclass(frozen=True)
class Task:
    params: type[_Params]
    run: Callable[[Engine, Settings, Any, Progress, Note], dict[str, Any]]


def _judge(
    engine: Engine, settings: Settings, p: JudgeParams, progress: Progress, note: Note
) -> dict[str, Any]:
    from server import usecases

    overrides = {
        "judge.endpoint": p.endpoint,
        "judge.prompt_variant": p.prompt_variant,
        "judge.temperature": p.temperature,
        "judge.samples": p.samples,
    }
    settings = _with(settings, overrides)
    _ensure_embedded(settings, settings.judge.endpoint)
    summary = usecases.judge(
        engine,
        settings,
        p.generation_run_id,
        rubric_set=p.rubric_set,
        swap_order=bool(p.swap_order),
        progress=progress,
        on_run=lambda run_id: note({"judge_run_id": run_id}),
    )
    return {"judge_run_id": summary.run_id, "summary": asdict(summary)}


def _generate(
    engine: Engine, settings: Settings, p: GenerateParams, progress: Progress, note: Note
) -> dict[str, Any]:
    from judge.store.engine import session_scope
    from judge.store.queries import get_generation_run
    from server import usecases

    overrides = {
        "generation.endpoint": p.endpoint,
        "generation.temperature": p.temperature,
        "generation.max_tokens": p.max_tokens,
    }
    settings = _with(settings, overrides)
    _ensure_embedded(settings, settings.generation.endpoint)
    summary = usecases.generate(
        engine,
        settings,
        p.dataset,
        limit=p.limit,
        accepted_only=p.accepted_only,
        include_drafts=p.include_drafts,
        progress=progress,
        on_run=lambda run_id: note({"generation_run_id": run_id}),
    )
    with session_scope(engine) as session:  # its status line counts the items left out
        detail = get_generation_run(session, summary.run_id).status_detail
    return {
        "generation_run_id": summary.run_id,
        "summary": asdict(summary),
        "status_detail": detail,
    }


def _pull(
    engine: Engine, settings: Settings, p: PullParams, progress: Progress, note: Note
) -> dict[str, Any]:
    from annotation.labelstudio.pull import pull_campaign
    from judge.store.engine import session_scope
    from server import usecases

    client, _ = usecases.labelstudio(settings)
    with session_scope(engine) as session:
        return pull_campaign(session, client, p.campaign).to_dict()


def _audit(
    engine: Engine, settings: Settings, p: AuditParams, progress: Progress, note: Note
) -> dict[str, Any]:
    from server.usecases import audits

    _ensure_embedded(settings, p.endpoint or settings.generation.endpoint)
    summary = audits.run_audit(
        engine,
        settings,
        p.suite,
        p.options,
        endpoint=p.endpoint,
        temperature=p.temperature,
        max_tokens=p.max_tokens,
        limit=p.limit,
        progress=progress,
        on_run=lambda run_id: note({"audit_run_id": run_id}),
    )
    return {"audit_run_id": summary.run_id, "summary": summary.to_dict()}


def _audit_classify(
    engine: Engine, settings: Settings, p: AuditClassifyParams, progress: Progress, note: Note
) -> dict[str, Any]:
    from server.usecases import audits

    _ensure_embedded(settings, p.endpoint or settings.judge.endpoint)
    note({"audit_run_id": p.run_id})
    summary = audits.classify_followups(
        engine, settings, p.run_id, endpoint=p.endpoint, progress=progress
    )
    return {"audit_run_id": p.run_id, "summary": asdict(summary)}


TASKS: dict[str, Task] = {
    "judge": Task(JudgeParams, _judge),
    "generate": Task(GenerateParams, _generate),
    "pull": Task(PullParams, _pull),
    "audit": Task(AuditParams, _audit),
    "audit-classify": Task(AuditClassifyParams, _audit_classify),
}


def check_params(kind: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` validated for ``kind`` (defaults left out), or InvalidInputError listing
    every problem."""
    task = TASKS.get(kind)
    if task is None:
        raise InvalidInputError(f"unknown job kind {kind!r}: use one of {', '.join(TASKS)}")
    try:
        return task.params.model_validate(params).model_dump(exclude_none=True)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in e['loc']) or 'params'}: {e['msg']}" for e in exc.errors()
        ]
        article = "an" if kind[0] in "aeiou" else "a"
        raise InvalidInputError(
            f"bad parameters for {article} {kind} job: " + "; ".join(problems)
        ) from None


def check_targets(
    session: Session, kind: str, params: dict[str, Any], settings: Settings | None = None
) -> None:
    """NotFoundError now, rather than a failed job later, when what the job would work on
    does not exist (a generation run, a dataset, a campaign, an audit run); with
    ``settings``, a ConfigError for an endpoint the config does not name. An audit's design
    is built now too, so options the suite refuses are an InvalidInputError, not a failed
    job; an audit-classify job needs an award run."""
    from judge.store.queries import get_dataset, get_generation_run

    if settings is not None and params.get("endpoint"):
        settings.endpoint(params["endpoint"])
    if kind == "judge":
        get_generation_run(session, params["generation_run_id"])
    elif kind == "generate":
        get_dataset(session, params["dataset"])
    elif kind == "pull":
        from annotation.labelstudio.campaigns import get_campaign

        get_campaign(session, params["campaign"])
    elif kind == "audit":
        from judge.audits.suites import make_suite

        make_suite(params["suite"], **params.get("options", {}))
    elif kind == "audit-classify":
        from judge.audits.runner import get_run

        run = get_run(session, params["run_id"])
        if run.suite != "award":
            raise InvalidInputError(
                f"audit run {run.id} is a {run.suite} audit; only award audits have follow-up "
                "explanations to classify"
            )


def run_task(
    kind: str,
    engine: Engine,
    settings: Settings,
    params: dict[str, Any],
    progress: Progress,
    note: Note,
) -> dict[str, Any]:
    task = TASKS[kind]
    return task.run(engine, settings, task.params.model_validate(params), progress, note)


_EMBEDDED = threading.Lock()


def _ensure_embedded(settings: Settings, endpoint: str) -> None:
    """Start the embedded model's server when the job's endpoint is it and it is not up (the
    default endpoint needs no separate `fairjudge model serve` for jobs)."""
    from judge.models.embedded import EmbeddedServer

    server = EmbeddedServer(settings.embedded, settings.state_dir)
    if settings.endpoint(endpoint).base_url.rstrip("/") != server.base_url:
        return
    with _EMBEDDED:  # two jobs starting at once must not start two servers
        server.start()


def _with(settings: Settings, overrides: Mapping[str, object]) -> Settings:
    """``settings`` with the given dotted overrides, validated as the config file would be."""
    from judge.config import Settings

    data = settings.model_dump()
    for dotted, value in overrides.items():
        if value is None:
            continue
        section, key = dotted.split(".")
        data[section][key] = value
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        raise InvalidInputError("; ".join(problems)) from None
