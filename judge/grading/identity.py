"""A judge run's identity: the hash of its settings at its server (the same settings at the
same server resume the same run), and the run found or created by it."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, select

from judge.config import JudgeConfig
from judge.endpoint_url import identity_url
from judge.grading.rubrics import BUILTIN_SET, RubricSet
from judge.hashing import content_hash
from judge.models.client import ModelClient
from judge.prompts import PromptBook
from judge.store.lifecycle import get_or_create_run
from judge.store.queries import get_generation_run
from judge.store.tables import JudgeRun


def judge_config_hash(
    client: ModelClient,
    config: JudgeConfig,
    template_version: str,
    rubrics: RubricSet | None = None,
    rubric_template_version: str = "",
    swap_order: bool = False,
) -> str:
    """The judge run's identity: its settings (``settings_hash``) at its server. The same
    model name at another base_url is another judge run (two servers' judgments never mix
    in one run); cosmetic differences of the URL (``identity_url``) are the same run."""
    settings = settings_hash(
        client, config, template_version, rubrics, rubric_template_version, swap_order
    )
    return server_hash(settings, client.config.base_url)


def server_hash(settings: str, base_url: str) -> str:
    """A settings hash joined with the server it ran at. Judge runs made before the server
    was part of their identity held ``settings`` alone; migration 0010 turned each into
    this from the run's own stored base_url, so they resume at their own server."""
    return content_hash({"settings": settings, "server": identity_url(base_url)})[:16]


def settings_hash(
    client: ModelClient,
    config: JudgeConfig,
    template_version: str,
    rubrics: RubricSet | None = None,
    rubric_template_version: str = "",
    swap_order: bool = False,
) -> str:
    """The hash of a judge run's settings (no server). The built-in set adds nothing to the
    hashed settings (its rubric file is in ``template_version`` already), so runs made
    before rubric sets existed keep their hash and resume; any other set adds its name, each
    rubric's version and definition hash, and the version of the templates registered
    rubrics use. Judging pairs in both orders (``swap_order``) adds itself, so the runs of
    before keep their hash."""
    body: dict[str, object] = {
        "model": client.model,
        "variant": config.prompt_variant,
        "temperature": config.temperature,
        "samples": config.samples,
        "aggregation": config.aggregation,
        "max_tokens": config.max_tokens,
        "template": template_version,
    }
    if rubrics is not None and rubrics.name != BUILTIN_SET:
        body["rubric_set"] = rubrics.name
        body["rubrics"] = rubrics.identity()
        if any(r.registered for r in rubrics):
            body["rubric_template"] = rubric_template_version
    if swap_order:
        body["swap_order"] = True
    return content_hash(body)[:16]


def run_with_hash(session: Session, generation_run_id: int, digest: str) -> JudgeRun | None:
    """The judge run of a generation run with this identity hash, if there is one."""
    return session.exec(
        select(JudgeRun).where(
            JudgeRun.generation_run_id == generation_run_id, JudgeRun.config_hash == digest
        )
    ).first()


def get_or_create_judge_run(
    session: Session,
    generation_run_id: int,
    client: ModelClient,
    config: JudgeConfig,
    book: PromptBook,
    rubrics: RubricSet | None = None,
    swap_order: bool = False,
) -> JudgeRun:
    """The judge run of these settings and rubric set (default: the built-in one), created
    if needed; its identity is its generation run and ``judge_config_hash``."""
    get_generation_run(session, generation_run_id)
    digest = judge_config_hash(
        client, config, book.judge_version, rubrics, book.rubric_judge_version, swap_order
    )
    return get_or_create_run(
        session,
        JudgeRun,
        {"generation_run_id": generation_run_id, "config_hash": digest},
        fields=run_settings(client, config, rubrics, swap_order),
    )


def run_settings(
    client: ModelClient, config: JudgeConfig, rubrics: RubricSet | None, swap_order: bool
) -> dict[str, Any]:
    """A new judge run's columns besides its identity."""
    return {
        "endpoint_name": client.name,
        "base_url": client.config.base_url,
        "model": client.model,
        "prompt_variant": config.prompt_variant,
        "temperature": config.temperature,
        "samples": config.samples,
        "aggregation": config.aggregation,
        "max_tokens": config.max_tokens,
        "rubric_set": rubrics.name if rubrics is not None else BUILTIN_SET,
        "swap_order": swap_order,
    }
