"""Factories and paths shared by tests and benchmarks."""

from __future__ import annotations

import socket
from typing import Any

from judge import paths
from judge.config import Settings

SAMPLE = paths.sample_dataset()
# Third-party data for tests lives beside the checkout (../shared/data); read by path only.
SHARED_DATA = paths.data_dir().parent / "shared" / "data"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_settings(
    base_url: str, db_url: str, *, model: str = "stub-model", **endpoint: Any
) -> Settings:
    """Settings whose model under test and judge are both the endpoint at ``base_url``."""
    ep = {
        "base_url": base_url,
        "model": model,
        "structured_output": "json_object_schema",
        "timeout_s": 5,
        "max_retries": 2,
        "max_backoff_s": 0.2,
        "concurrency": 4,
        **endpoint,
    }
    return Settings.model_validate(
        {
            "database_url": db_url,
            "endpoints": {"test": ep},
            "generation": {"endpoint": "test", "max_tokens": 32},
            "judge": {"endpoint": "test"},
        }
    )
