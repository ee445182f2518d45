"""``kill -9`` of ``fairjudge generate DATASET --batch`` between the batch's creation and its
download, then the same command again: it takes up the same batch (the stub counts one
upload and one creation) and stores every answer. The command is the real CLI in a process
of its own, since only a real process can be killed with SIGKILL; the stub holds its first
look at the batch until the process is dead, so the kill lands exactly there."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from sqlmodel import Session, select

from judge.store.tables import BatchJob
from tests.support.batch_runs import answers_by_key, sample_store, url_of, write_batch_config
from tests.support.cli import fairjudge
from tests.support.factories import FAIRJUDGE
from tests.support.stub_batch import BatchScript, BatchStub

ROOT = Path(__file__).resolve().parents[3]
ANSWERS = 30  # the sample's first 24 items: 18 S1 x 1 part + 6 S2 x 2 parts


def test_generate_batch_killed_while_polling_resumes_the_same_batch(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    # SQLite only: the steps a kill leaves behind are the shared machinery's, which
    # tests/judge/grading/test_batch_kills.py kills on PostgreSQL too.
    engine = sample_store(request, tmp_path / "kill.db")
    with BatchStub(BatchScript(window_s=0.1)) as stub:
        config = write_batch_config(tmp_path / "batch.toml", stub.base_url, url_of(engine))
        stub.hold("poll", "before")  # the batch exists and its id is stored: now it is polled
        command = [
            *FAIRJUDGE, "--config", str(config), "generate", "sample", "--limit", "24", "--batch",
        ]  # fmt: skip
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while not stub.state.held.wait(0.01):
            if proc.poll() is not None:
                out, err = proc.communicate()
                pytest.fail(f"the command ended before polling: {out.decode()} {err.decode()}")
            assert time.monotonic() < deadline, "the command never polled its batch"
        proc.kill()  # SIGKILL: nothing of the command's own runs after this
        proc.communicate(timeout=30)
        stub.release()
        with Session(engine) as session:
            jobs = session.exec(select(BatchJob)).all()
        assert [(j.run_kind, j.state, j.calls) for j in jobs] == [
            ("generation", "submitted", ANSWERS)
        ]
        assert answers_by_key(engine, jobs[0].run_id) == {}  # nothing stored yet

        # The same command again (in this process, looking at the batch every 20 ms).
        again = fairjudge(*command[len(FAIRJUDGE) :], "--poll-every", "0.02", "--json")
        assert again.returncode == 0, again.stderr
        result = json.loads(again.stdout)
    assert (stub.state.uploads, stub.state.creations) == (1, 1)
    assert stub.state.live_chat == 0
    assert result["generation_run_id"] == jobs[0].run_id
    assert result["stored"] == {"ok": ANSWERS} and result["status"] == "finished"
    assert [b["batch_id"] for b in result["batches"]] == [jobs[0].batch_id]
    rows = answers_by_key(engine, jobs[0].run_id)
    assert len(rows) == ANSWERS and {r.flag for r in rows.values()} == {"ok"}
