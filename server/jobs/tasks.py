"""What each kind of job does: its parameters (a pydantic model, also the API's request
schema) and the use case it runs. The one registry of job kinds: the local worker runs these
functions, and a Celery binding would run the same ones.

A job function resumes by construction: the use cases it calls (``services.generate``,
``services.judge``, a campaign pull) store each result as it arrives and, run again, do only
what is missing, so rerunning a job whose worker died costs nothing already stored.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

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


class PullParams(_Params):
    """Bring a Label Studio campaign's ratings into the store."""

    campaign: str = Field(min_length=1, description="The campaign's name.")


JobKind = Literal["judge", "generate", "pull"]


@dataclass(frozen=True)
class Task:
    params: type[_Params]
    run: Callable[[Engine, Settings, Any, Progress, Note], dict[str, Any]]


def _judge(
    engine: Engine, settings: Settings, p: JudgeParams, progress: Progress, note: Note
) -> dict[str, Any]:
    from server import services

    overrides = {
        "judge.endpoint": p.endpoint,
        "judge.prompt_variant": p.prompt_variant,
        "judge.temperature": p.temperature,
        "judge.samples": p.samples,
    }
    settings = _with(settings, overrides)
    _ensure_embedded(settings, settings.judge.endpoint)
    summary = services.judge(
        engine,
        settings,
        p.generation_run_id,
        rubric_set=p.rubric_set,
        progress=progress,
        on_run=lambda run_id: note({"judge_run_id": run_id}),
    )
    return {"judge_run_id": summary.run_id, "summary": asdict(summary)}


def _generate(
    engine: Engine, settings: Settings, p: GenerateParams, progress: Progress, note: Note
) -> dict[str, Any]:
    from server import services

    overrides = {
        "generation.endpoint": p.endpoint,
        "generation.temperature": p.temperature,
        "generation.max_tokens": p.max_tokens,
    }
    settings = _with(settings, overrides)
    _ensure_embedded(settings, settings.generation.endpoint)
    summary = services.generate(
        engine,
        settings,
        p.dataset,
        limit=p.limit,
        accepted_only=p.accepted_only,
        progress=progress,
        on_run=lambda run_id: note({"generation_run_id": run_id}),
    )
    return {"generation_run_id": summary.run_id, "summary": asdict(summary)}


def _pull(
    engine: Engine, settings: Settings, p: PullParams, progress: Progress, note: Note
) -> dict[str, Any]:
    from annotation.labelstudio.pull import pull_campaign
    from judge.store.engine import session_scope
    from server import services

    client, _ = services.labelstudio(settings)
    with session_scope(engine) as session:
        return pull_campaign(session, client, p.campaign).to_dict()


TASKS: dict[str, Task] = {
    "judge": Task(JudgeParams, _judge),
    "generate": Task(GenerateParams, _generate),
    "pull": Task(PullParams, _pull),
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
        raise InvalidInputError(
            f"bad parameters for a {kind} job: " + "; ".join(problems)
        ) from None


def check_targets(
    session: Session, kind: str, params: dict[str, Any], settings: Settings | None = None
) -> None:
    """NotFoundError now, rather than a failed job later, when what the job would work on
    does not exist (a generation run, a dataset, a campaign); with ``settings``, a
    ConfigError for an endpoint the config does not name."""
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
