"""The ``[audits]`` section of the config (``judge.config.Settings.audits``): input files the
audit suites read when they are started over HTTP or from the dashboard, where a request may
name no file of its own. Its own module so that ``judge/config.py`` stays one reading."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class AuditsConfig(BaseModel):
    """Where the server finds the audit suites' data that FairJudge does not bundle."""

    model_config = ConfigDict(extra="forbid")

    bbq_data: str = Field(
        default="",
        description="BBQ's items (Parrish et al. 2022): a .jsonl(.gz) file or a folder of "
        "them, read by an audit job of the bbq suite (POST /api/v1/audits, the job API, the "
        "dashboard's job form); '' (unset): such a job is refused with a 400 saying to set "
        "it. A relative path is read from the config file's folder. The CLI's `audit bbq "
        "run --data PATH` reads its own.",
    )
