"""Factories and paths shared by tests and benchmarks."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from judge import paths
from judge.config import Settings

SAMPLE = paths.sample_dataset()
# Third-party data for tests lives beside the checkout (../shared/data); read by path only.
SHARED_DATA = paths.data_dir().parent / "shared" / "data"
BBQ_PREDICTIONS = SHARED_DATA / "bbq" / "unifiedqa_preds"
"""The BBQ authors' UnifiedQA predictions, one file per category."""


def require_shared(found: object, where: Path, what: str) -> None:
    """Skip a test whose shared data is missing (``found`` false) on a developer's machine;
    in CI (``CI=true``) fail instead, naming the path: there a skip would hide a broken set-up
    (tests/support/summeval_coherence.py does the same for SummEval)."""
    if found:
        return
    why = f"{what} not found at {where} (../shared/data beside the checkout)"
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"{why}; CI must provide it")
    pytest.skip(why)


def embedded_threads() -> int:
    """Threads for an embedded model server that a test starts (``n_threads`` and
    ``n_threads_batch``, which reads the prompt): one while pytest-xdist runs the suite in
    several processes, else two. llama.cpp's threads spin while they wait for each other, so
    two of them on a 2-core machine beside another busy test worker made the model about ten
    times slower (the pipeline test took 343 s instead of 35 s, 2026-11-27)."""
    return 1 if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1 else 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_settings(
    base_url: str, db_url: str, *, model: str = "stub-model", **endpoint: Any
) -> Settings:
    """Settings whose model under test and judge are both the endpoint at ``base_url``.
    A finished job does not compute its run's dashboard pages ahead (``warm_figures``, which
    costs seconds per job): tests/server/jobs/test_queue.py and test_celery.py test that."""
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
            "server": {"warm_figures": False},
        }
    )


FAIRJUDGE = [sys.executable, "-m", "server.cli"]


def write_config(
    path: Path,
    base_url: str,
    db_url: str,
    *,
    port: int = 8765,
    model: str = "stub-model",
    concurrency: int = 1,
    server: Mapping[str, float | int | bool] | None = None,
) -> Path:
    """A config file on the stub at ``base_url``; ``server``: settings of its ``[server]``
    table, where a finished job does not compute its run's dashboard pages ahead unless
    asked (``warm_figures``, as in ``make_settings``)."""
    table = {"warm_figures": False, **(server or {})}
    lines = "".join(
        f"{k} = {str(v).lower() if isinstance(v, bool) else v}\n" for k, v in table.items()
    )
    path.write_text(f"""
database_url = "{db_url}"
state_dir = "{path.parent / "state"}"
[embedded]
port = {port}
[endpoints.test]
base_url = "{base_url}"
model = "{model}"
structured_output = "json_object_schema"
concurrency = {concurrency}
max_retries = 1
max_backoff_s = 0.1
[generation]
endpoint = "test"
max_tokens = 32
[judge]
endpoint = "test"
[server]
{lines}""")
    return path


def wait_until(
    condition: Callable[[], bool], proc: subprocess.Popen[str], *, timeout: float = 60.0
) -> None:
    """Poll ``condition`` until it holds; fail if ``proc`` exits first or the deadline passes."""
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"the command ended before the condition held: {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the condition did not hold within {timeout} s")
        time.sleep(0.02)
