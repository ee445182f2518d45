"""The fairjudge command: errors that say what to fix, JSON output, interrupt and resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from server.cli import cli
from tests.conftest import SAMPLE, free_port
from tests.stub_openai import StubServer

FAIRJUDGE = [sys.executable, "-m", "server.cli"]


def write_config(
    path: Path,
    base_url: str,
    db_url: str,
    *,
    port: int = 8765,
    model: str = "stub-model",
    concurrency: int = 1,
) -> Path:
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
[generation]
endpoint = "test"
max_tokens = 32
[judge]
endpoint = "test"
""")
    return path


def test_dataset_import_errors_and_json(tmp_path: Path, db_url: str) -> None:
    config = write_config(tmp_path / "c.toml", "http://127.0.0.1:9/v1", db_url)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "stage": "S1"}\n')
    runner = CliRunner()
    result = runner.invoke(cli, ["--config", str(config), "dataset", "import", str(bad)])
    assert result.exit_code != 0
    assert "line 1: 'factor' is missing" in str(result.exception)
    ok = runner.invoke(cli, ["--config", str(config), "dataset", "import", str(SAMPLE), "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output) == {
        "dataset": "fairmonitor_sample",
        "added": 72,
        "unchanged": 0,
        "total": 72,
    }
    listed = runner.invoke(cli, ["--config", str(config), "dataset", "list", "--json"])
    assert json.loads(listed.output)[0]["items"] == 72


def test_user_errors_exit_1_with_one_clear_line(tmp_path: Path, db_url: str) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    config = write_config(tmp_path / "c.toml", url, db_url)
    run = subprocess.run(
        [*FAIRJUDGE, "--config", str(config), "generate", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1
    assert f"error: cannot reach endpoint 'test' at {url}" in run.stderr
    assert "Traceback" not in run.stderr


def test_interrupted_judge_run_resumes_without_repaying(tmp_path: Path, db_url: str) -> None:
    with StubServer(latency=0.25) as stub:
        config = write_config(tmp_path / "c.toml", stub.base_url, db_url)
        base = [*FAIRJUDGE, "--config", str(config)]
        subprocess.run(
            [*base, "dataset", "import", str(SAMPLE)], check=True, capture_output=True, timeout=60
        )
        subprocess.run(
            [*base, "generate", "fairmonitor_sample", "--limit", "18", "--json"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        judge_requests_before = stub.state.requests
        proc = subprocess.Popen(
            [*base, "judge", "1", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(3.0)  # the first 18 sample items are S1: 18 ICS judgments, 0.25 s each
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 130, stderr
        assert "interrupted: finished work is stored" in stderr
        first_calls = stub.state.requests - judge_requests_before
        assert 0 < first_calls < 18
        rerun = subprocess.run(
            [*base, "judge", "1", "--json"], capture_output=True, text=True, timeout=120, check=True
        )
        summary = json.loads(rerun.stdout)
        total_calls = stub.state.requests - judge_requests_before
    # The rerun does only what is missing; at most the one call in flight at the interrupt
    # (concurrency 1) is paid twice.
    assert summary["model_calls"] + summary["cached"] == summary["tasks"]
    assert 18 <= total_calls <= 19
    assert summary["flags"] == {"scored": summary["tasks"]}


@pytest.mark.embedded
def test_model_serve_status_stop(tmp_path: Path, db_url: str) -> None:
    pytest.importorskip("llama_cpp")
    port = free_port()
    config = write_config(tmp_path / "c.toml", f"http://127.0.0.1:{port}/v1", db_url, port=port)
    base = [*FAIRJUDGE, "--config", str(config), "model"]
    env = {**os.environ}
    try:
        served = subprocess.run(
            [*base, "serve", "--json"], capture_output=True, text=True, timeout=120, env=env
        )
        assert served.returncode == 0, served.stderr
        status = json.loads(
            subprocess.run(
                [*base, "status", "--json"], capture_output=True, text=True, timeout=60
            ).stdout
        )
        assert status["answers"] and status["models"] == ["smollm2-135m-instruct"]
        assert status["url"] == f"http://127.0.0.1:{port}/v1"
        assert status["model_file"].endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    finally:
        stopped = subprocess.run([*base, "stop"], capture_output=True, text=True, timeout=60)
    assert "stopped" in stopped.stdout
    after = json.loads(
        subprocess.run(
            [*base, "status", "--json"], capture_output=True, text=True, timeout=60
        ).stdout
    )
    assert not after["answers"] and after["pid"] is None
