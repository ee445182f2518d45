"""Jobs on real Celery workers: two `fairjudge worker` processes on Redis (127.0.0.1:6379)
and a fresh PostgreSQL database, judging through the scripted stub.

Expected values come from elsewhere than the code under test: the judgments a run must hold
are those the same judge run makes in one process on its own SQLite store (the plain,
unsplit path), and the stub's grade for a prompt is its own hash rule (``grade_for``), so
both paths must store the same (item, rubric, sample) keys with the same scores.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from judge.config import Settings, load_settings
from judge.data.datasets import import_items
from judge.store.engine import make_engine, session_scope
from judge.store.tables import Judgment
from server import create_app, usecases
from server.auth import create_key
from server.jobs import queue
from server.tables import Job, JobPart, WorkerBeat
from tests.support.factories import SAMPLE, make_settings
from tests.support.kills import requests_of
from tests.support.redis_server import PrivateRedis
from tests.support.stub_openai import StubServer

ITEMS = 60
"""The sample's first 60 items: its 18 S1 items and 42 of later stages."""
CHUNK = 8
CONCURRENCY = 8
"""The endpoint's quota (calls in flight), shared by the workers through Redis."""
PER_TASK = 2
"""Calls one task keeps in flight ([workers] task_concurrency)."""


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[PrivateRedis]:
    if shutil.which("redis-server") is None:
        why = "redis-server is not installed (Debian's redis-server package)"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"{why}; CI must run the Celery tests")
        pytest.skip(why)
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.stop()


def _config(tmp_path: Path, stub: StubServer, pg_url: str, broker: str) -> Path:
    path = tmp_path / "fairjudge.toml"
    path.write_text(f"""
database_url = "{pg_url}"
state_dir = "{tmp_path / "state"}"
[endpoints.test]
base_url = "{stub.base_url}"
model = "stub-model"
structured_output = "json_object_schema"
concurrency = {CONCURRENCY}
max_retries = 1
max_backoff_s = 0.1
[generation]
endpoint = "test"
max_tokens = 32
[judge]
endpoint = "test"
[server]
job_lease_s = 3
[workers]
broker_url = "{broker}"
chunk_size = {CHUNK}
task_concurrency = {PER_TASK}
""")
    return path


class Workers:
    """`fairjudge worker` processes on one config, stopped at the end."""

    def __init__(self, config: Path, log_dir: Path) -> None:
        self.config, self.log_dir, self.procs = config, log_dir, []  # type: ignore[var-annotated]

    def start(self) -> subprocess.Popen[bytes]:
        log = (self.log_dir / f"worker{len(self.procs)}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "--config", str(self.config), "worker",
             "--concurrency", "1"],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.procs.append(proc)
        return proc

    def logs(self) -> str:
        return "\n".join(p.read_text() for p in sorted(self.log_dir.glob("worker*.log")))

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def _beating(engine: Engine, pids: set[int]) -> bool:
    with Session(engine) as session:
        names = session.exec(select(WorkerBeat.worker)).all()
    return pids <= {int(n.rsplit(":", 1)[1]) for n in names}


def _wait(condition, what: str, workers: Workers, timeout: float = 90.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout} s; workers' logs:\n"
                        f"{workers.logs()[-4000:]}")  # fmt: skip
        time.sleep(0.1)


def _job_over(engine: Engine, job_id: int | None) -> bool:
    with Session(engine) as session:
        got = session.get(Job, job_id)
        assert got is not None
        return got.status in ("finished", "failed", "cancelled")


def _answer(engine: Engine, settings: Settings) -> None:
    """The sample imported and its first ``ITEMS`` items answered (generation run 1)."""
    with session_scope(engine) as session:
        import_items(session, SAMPLE, "sample")
    usecases.generate(engine, settings, usecases.GenerateRequest(dataset="sample", limit=ITEMS))


def _answered_store(
    tmp_path: Path, stub: StubServer, pg_url: str, broker: str
) -> tuple[Path, Settings, Engine]:
    """The workers' config (``_config``), its settings, and the PostgreSQL store answered."""
    config = _config(tmp_path, stub, pg_url, broker)
    settings = load_settings(config)
    engine = make_engine(pg_url, migrate=True)
    _answer(engine, settings)
    return config, settings, engine


def _expected(tmp_path: Path, stub: StubServer) -> dict[tuple[int, str, int], int | None]:
    """The judgments of the same run made in one process, unsplit, on SQLite."""
    url = f"sqlite:///{tmp_path / 'plain.db'}"
    engine = make_engine(url, migrate=True)
    settings = make_settings(stub.base_url, url)
    _answer(engine, settings)
    summary = usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=1))
    assert summary.run_id
    with Session(engine) as session:
        rows = session.exec(select(Judgment)).all()
        # Item ids are the same on both stores: the same file imported into an empty store.
        return {(j.item_id, j.rubric, j.sample_index): j.score for j in rows}


def _page_kept_within(engine: Engine, settings: Settings, run_id: int, seconds: float) -> bool:
    """Whether the judge run's report page is kept at the run's version within ``seconds``."""
    from server.usecases.dashboard import page_key, run_version
    from server.usecases.figures import read, signing_key, version_text

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with Session(engine) as session:
            version = version_text(run_version(session, run_id), settings)
            key = page_key("judge-run", run_id, ())
            if read(session, key, version, signing_key(settings)) is not None:
                return True
        time.sleep(0.2)
    return False


def test_two_workers_split_a_run_and_survive_a_kill_and_a_redis_restart(
    tmp_path: Path, pg_url: str, broker: PrivateRedis
) -> None:
    """SIGKILL one of two workers mid-part, then restart Redis (its queued tasks lost, as
    it keeps nothing on disk): the run still ends with every judgment, once each."""
    with StubServer(latency=0.05) as stub:
        expected = _expected(tmp_path, stub)
        judged_plain = requests_of(stub, "judge")
        assert judged_plain == len(expected)  # one call per judgment on the plain path

    with StubServer(latency=0.05) as stub:
        config, settings, engine = _answered_store(tmp_path, stub, pg_url, broker.url)
        workers = Workers(config, tmp_path)
        try:
            first, second = workers.start(), workers.start()
            _wait(lambda: _beating(engine, {first.pid, second.pid}), "both workers beating",
                  workers)  # fmt: skip
            with stub.state.lock:  # the answers above were asked 8 at a time, in this process
                stub.state.max_in_flight = 0
            job = queue.submit(engine, "judge", {"generation_run_id": 1}, settings=settings)
            assert job.id is not None

            def mid_part_on_first() -> bool:
                with Session(engine) as session:
                    rows = session.exec(select(JobPart).where(JobPart.job_id == job.id)).all()
                return any(
                    p.status == "running"
                    and p.worker
                    and p.worker.endswith(f":{first.pid}")
                    and p.done > 0
                    for p in rows
                )

            _wait(mid_part_on_first, "a part running on the first worker", workers)
            first.send_signal(signal.SIGKILL)
            first.wait()
            broker.stop()  # the parts still queued are lost with it
            broker.start()

            _wait(lambda: _job_over(engine, job.id), "the job's end", workers, timeout=120)
            with Session(engine) as session:
                ended = session.get(Job, job.id)
                run_id = (ended.result or {}).get("judge_run_id") if ended else None
            # The worker that finished the run has its report page computed at the run's
            # version, on its warmer's thread (server.usecases.figures): while it runs, so
            # this is waited for before the workers stop (a stopped worker's warmer stops).
            page_kept = isinstance(run_id, int) and _page_kept_within(engine, settings, run_id, 240)
        finally:
            workers.stop()

        with Session(engine) as session:
            done = session.get(Job, job.id)
            assert done is not None
            assert done.status == "finished", (done.error, workers.logs()[-3000:])
            rows = session.exec(select(Judgment)).all()
            parts = session.exec(select(JobPart).where(JobPart.job_id == job.id)).all()
        got = {(j.item_id, j.rubric, j.sample_index): j.score for j in rows}
        # Exactly one judgment per item x rubric x sample, the same as the unsplit run.
        assert len(rows) == len(got) == len(expected)
        assert got == expected
        # 60 items in parts of 8: 8 parts (7 full, one of 4), all done.
        assert len(parts) == 8 and all(p.status == "done" for p in parts)
        assert sorted(len(p.item_ids) for p in parts) == [4] + [8] * 7
        # Paid calls: one per judgment, plus at most the killed worker's calls in flight
        # (one part at a time, PER_TASK calls each) whose replies it never stored.
        paid = requests_of(stub, "judge")
        assert len(expected) <= paid <= len(expected) + PER_TASK
        # Two workers, one task each, PER_TASK calls a task: never more than 4 in flight,
        # below the endpoint's quota of 8 (each task would run 8 threads without the setting).
        assert stub.state.max_in_flight <= 2 * PER_TASK
        assert done.result is not None and done.result["status"] == "finished"
        assert page_kept, "the finished run's report page was not computed ahead within 240 s"
        # The API shows the job's parts as the store holds them.
        app = create_app({"SETTINGS": settings})
        _, key = create_key(engine, "reader", "member")
        shown = app.test_client().get(
            f"/api/v1/jobs/{job.id}", headers={"Authorization": f"Bearer {key}"}
        )
        assert shown.status_code == 200, shown.json
        assert [(p["number"], p["items"], p["status"]) for p in shown.json["parts"]] == [
            (n, 4 if n == 7 else 8, "done") for n in range(8)
        ]
        app.extensions["fairjudge_engine"].dispose()
        # Both recoveries happened: the killed worker's part was sent again, and so were
        # the parts Redis lost (at least one was still queued: 8 parts, 2 workers).
        logs = workers.logs()
        assert "parts left by workers that stopped beating, sent again" in logs
        assert "the broker's Redis lost its data" in logs
        engine.dispose()


def test_worker_refuses_unreachable_broker_and_database(tmp_path: Path, pg_url: str) -> None:
    with StubServer() as stub:
        config = _config(tmp_path, stub, pg_url, "redis://:secret@127.0.0.1:1/0")
        make_engine(pg_url, migrate=True).dispose()
        got = subprocess.run(
            [sys.executable, "-m", "server.cli", "--config", str(config), "worker"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert got.returncode != 0
        assert "broker at redis://:***@127.0.0.1:1/0 cannot be reached" in got.stderr
        assert "secret" not in got.stderr + got.stdout

        down = "postgresql+psycopg://postgres@127.0.0.1:1/nothing"
        config.write_text(config.read_text().replace(pg_url, down))
        got = subprocess.run(
            [sys.executable, "-m", "server.cli", "--config", str(config), "worker"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert got.returncode != 0
        assert "127.0.0.1:1" in got.stderr and "database" in got.stderr.lower()
