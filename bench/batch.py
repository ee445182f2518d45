"""A judge run through the Batch API (``judge RUN --batch``) of N calls (10,000 by default)
against the batch stub in a process of its own (tests/support/stub_batch.py), the whole
command timed from outside (``bench.wire.timed``): its wall time, the part of it the stub
spent running the batch (its window and its answering the lines), the rest (our own: startup,
planning, writing and uploading the input, polling, downloading, reading the output and
storing every judgment), and the client's CPU per call (user + system of the command's own
process, startup included). A rerun with nothing left is timed the same way.

The command is ``python -m tests.support.batch_command`` (what ``fairjudge judge RUN
--batch`` calls, the same use case) with a 0.05 s poll, so polling adds at most that to the
wall time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from bench.wire import StubProcess, timed, write_items
from tests.support.factories import FAIRJUDGE

POLL_S = 0.05


class BatchStubProcess(StubProcess):
    """The batch stub (``window_s``: how long a batch runs) in a process of its own."""

    def __init__(self, window_s: float) -> None:
        super().__init__("tests.support.stub_batch", str(window_s), name="the batch stub")

    def batches(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.url}/batches", timeout=10) as reply:
            return list(json.load(reply)["data"])


def write_config(path: Path, url: str, db_url: str) -> Path:
    path.write_text(
        f"""
database_url = "{db_url}"
state_dir = "{path.parent / "state"}"
[endpoints.stub]
base_url = "{url}"
model = "stub-model"
structured_output = "json_object_schema"
concurrency = 64
batch = true
input_price_per_mtok = 2.0
output_price_per_mtok = 8.0
batch_discount = 0.5
[generation]
endpoint = "stub"
max_tokens = 64
[judge]
endpoint = "stub"
""",
        encoding="utf-8",
    )
    return path


def batch_bench(tmp: Path | None = None, n: int = 10_000, window_s: float = 2.0) -> dict[str, Any]:
    """Judge ``n`` answered S1 items (one ICS call each) through the batch stub."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(tmp or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        stub = BatchStubProcess(window_s)
        try:
            config = write_config(folder / "batch.toml", stub.url, f"sqlite:///{folder / 'b.db'}")
            base = [*FAIRJUDGE, "--config", str(config)]
            items = write_items(folder / "items.jsonl", n)
            subprocess.run(
                [*base, "dataset", "import", str(items)], check=True, capture_output=True
            )
            subprocess.run([*base, "generate", "items"], check=True, capture_output=True)
            command = [
                sys.executable, "-m", "tests.support.batch_command", str(config), "1", str(POLL_S)
            ]  # fmt: skip
            run = timed(command)
            batches = stub.batches()
            rerun = timed(command)
            after = stub.batches()
        finally:
            stub.stop()
    if len(batches) != 1 or batches[0]["request_counts"]["completed"] != n or len(after) != 1:
        raise RuntimeError(f"expected one batch of {n} calls: {batches}")
    at_stub = float(batches[0]["stub_seconds"])
    ours = run.wall_s - at_stub
    return {
        "calls": n,
        "stub_window_s": window_s,
        "wall_s": round(run.wall_s, 2),
        "at_stub_s": round(at_stub, 2),
        "outside_stub_s": round(ours, 2),
        "cpu_s": round(run.cpu_s, 2),
        "cpu_ms_per_call": round(run.cpu_s / n * 1000, 3),
        "rerun_wall_s": round(rerun.wall_s, 2),
        "rerun_batches": len(after) - len(batches),
        "summary": run.stdout.strip().splitlines()[-3:],
    }


if __name__ == "__main__":  # python -m bench.batch [N] [WINDOW_S]
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    window = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    print(json.dumps(batch_bench(n=n, window_s=window), indent=2))
