"""The job worker watched: ``fairjudge serve`` restarts a worker that dies, ``/api/v1/health``
tells when no worker is left, and ``attempts`` counts only real starts of a job.

- a worker SIGKILLed under a live server mid-job: another one is started (its pid new, the
  log says so), health is 200 with the new worker beating, and the job is taken over from
  its lease: every judgment stored once, ``attempts`` 2, ``error`` naming the stopped worker,
  and progress counted over the whole run (``total`` 108, never only what was left);
- ``serve --no-worker``: healthy while no job waits, 503 once one does, healthy again with a
  ``fairjudge worker`` beating, and 503 once that worker has been silent for the stale time;
- a job whose judge run another process holds waits in the queue, tried again at every poll,
  with ``attempts`` 0 all along; once the run is free it runs once (``attempts`` 1);
- a worker stopped with SIGTERM marks its heartbeat stopped: neither live nor silent.

These are what docs/server.md promises under "Progress and attempts" and "Workers", checked
against real processes because the supervisor, the heartbeat and the leases only meet there.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine
from sqlmodel import Session, select

from judge.runs import run_lease
from judge.store.engine import make_engine
from server.auth import create_key
from server.tables import WorkerBeat
from server.usecases.jobs import worker_health
from tests.support.factories import FAIRJUDGE, write_config
from tests.support.kills import requests_of
from tests.support.live import LiveServer, answered_sample, stored_judgment_keys
from tests.support.stub_openai import StubServer

# The sample's judgments (samples = 1): 18 items in each of S1..S4; S1 and S4 are judged with
# ICS (36), S2 with TCS, PCS and ETCS (54), S3 with SBAS (18): 108, as counted in
# tests/server/test_live.py and tests/judge/test_durability.py.
JUDGMENTS = 108
CONCURRENCY = 4
POLL_S = 0.2  # [server] job_poll_s: the worker looks at the queue this often
LEASE_S = 3  # [server] job_lease_s
# Health takes a worker for dead after max(job_lease_s, 10) s without a beat
# (server/api/health.py, stale_after_s), and a worker beats every 2 s
# (server/usecases/jobs.py, BEAT_EVERY_S) plus at most one poll of its loop.
STALE_S = max(LEASE_S, 10.0)
BEAT_S = 2.0 + POLL_S
# Supervised restarts a dead worker 1 s after it sees the end (it looks every 0.5 s); the
# new worker then imports the judging code. 10 s leaves room for a loaded machine.
RESTART_WITHIN_S = 10.0
# Killed once this many judge calls were sent: well into the run (108 calls) and well before
# its end, so that part of the run is stored and part is left for the next worker.
KILL_AFTER_CALLS = 30
# The stub's answer time while judging: 108 calls, 4 at a time, take about 2.7 s, so the
# part left after the kill (about 75 calls) runs long enough for several progress reports
# (one every 0.5 s, server/jobs/running.py PROGRESS_EVERY_S).
SLOW_S = 0.1
HOST = socket.gethostname()


def _config(tmp: Path, stub: StubServer, url: str) -> Path:
    """The stub as model under test and judge; jobs are polled every 0.2 s and held with a
    3 s lease, so that a killed worker's job is taken over quickly."""
    return write_config(
        tmp / "fairjudge.toml",
        stub.base_url,
        url,
        concurrency=CONCURRENCY,
        server={"job_poll_s": POLL_S, "job_lease_s": LEASE_S},
    )


@contextmanager
def _running(server: LiveServer, url: str) -> Iterator[LiveServer]:
    """``server`` started with a member key, stopped (the whole process group) however the
    block ends, a failed start included. The key is made in this process: two ``keys
    create`` commands (LiveServer.make_keys) would add seconds to each test."""
    try:
        server.start()
        engine = make_engine(url)
        try:
            server.member_key = create_key(engine, "member", "member")[1]
        finally:
            engine.dispose()
        yield server
    finally:
        server.stop()


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 60) -> float:
    """Poll ``condition`` until it holds; the seconds it took."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout, f"{what}: not within {timeout} s"
        time.sleep(0.05)
    return time.monotonic() - start


def _job_workers(server: LiveServer) -> list[int]:
    """The pids of the job workers ``serve`` started: children of its master (the process
    it was started as) run as ``worker --exit-with-parent``. A worker that died and was
    not reaped yet is a zombie with an empty command line, so it is not listed."""
    assert server.proc is not None
    found = []
    for pid in server.pids():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:  # ended meanwhile
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if ppid == server.proc.pid and b"worker" in args and b"--exit-with-parent" in args:
            found.append(pid)
    return found


def _post_judge_job(server: LiveServer) -> int:
    status, job = server.post("/api/v1/jobs", {"kind": "judge", "params": {"generation_run_id": 1}})
    assert status == 201, job
    return int(job["id"])


def _job(server: LiveServer, job_id: int) -> dict[str, Any]:
    status, job = server.get(f"/api/v1/jobs/{job_id}")
    assert status == 200, job
    return dict(job)


def _health(server: LiveServer) -> tuple[int, dict[str, Any]]:
    status, body = server.get("/api/v1/health", key=None)
    assert status in (200, 503), body
    return status, dict(body)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _beat_rows(url: str) -> dict[str, WorkerBeat]:
    """The heartbeat rows, by worker name (host:pid), read with SQL."""
    engine = create_engine(url)
    try:
        with Session(engine) as s:
            return {row.worker: row for row in s.exec(select(WorkerBeat)).all()}
    finally:
        engine.dispose()


# -- a worker killed under a live server ------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """One reading of the job over the API while it ran."""

    status: str
    attempts: int
    done: int
    total: int | None
    error: str | None


def test_a_killed_worker_is_restarted_and_its_job_resumed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fairjudge.db'}"
    with StubServer() as stub:
        config = _config(tmp_path, stub, url)
        answered_sample(config)
        stub.state.latency = SLOW_S
        with _running(LiveServer(config), url) as server:
            [old] = _job_workers(server)  # serve starts exactly one
            job_id = _post_judge_job(server)
            _wait_for(lambda: requests_of(stub, "judge") >= KILL_AFTER_CALLS, "judging began")
            os.kill(old, signal.SIGKILL)
            killed = time.monotonic()
            stored_at_kill = len(stored_judgment_keys(url))  # the killed worker writes no more
            assert 0 < stored_at_kill < JUDGMENTS

            seen: list[Seen] = []
            new: list[int] = []
            restarted_after = None
            deadline = killed + 60
            while True:
                job = _job(server, job_id)
                seen.append(
                    Seen(job["status"], job["attempts"], job["done"], job["total"], job["error"])
                )
                if restarted_after is None:
                    new = [pid for pid in _job_workers(server) if pid != old]
                    if new:
                        restarted_after = time.monotonic() - killed
                if job["status"] in ("finished", "failed", "cancelled"):
                    break
                assert time.monotonic() < deadline, f"job {job_id} still {job}"
                time.sleep(0.05)
            assert new, f"no new job worker in {time.monotonic() - killed:.1f} s"
            # The new worker beats at its start: health counts it once its row is there.
            beating = f"{HOST}:{new[0]}"
            _wait_for(lambda: beating in _beat_rows(url), "the new worker beat", timeout=10)
            status, health = _health(server)
            workers_now = _job_workers(server)
        log = server.log.read_text(encoding="utf-8", errors="replace")
        paid = requests_of(stub, "judge")

    # A new worker, not the old one, and soon.
    assert len(new) == 1 and new[0] != old, (old, new)
    assert restarted_after is not None and restarted_after < RESTART_WITHIN_S, restarted_after
    assert workers_now == new  # one worker again, the new one
    # Its exit status is not checked: serve reports it as 0 (gunicorn's arbiter reaps every
    # child, the job worker included, so Popen.poll() finds it gone: ECHILD -> 0).
    assert f"job worker pid {old} ended; starting another" in log, log[-3000:]
    assert f"job worker restarted: pid {new[0]}" in log, log[-3000:]
    assert status == 200 and health["status"] == "ok", health
    assert health["worker"]["live"] >= 1 and health["worker"]["healthy"] is True, health

    # The job: taken over once, every judgment stored once, paid at most once more for the
    # calls in flight at the kill (at most the concurrency).
    assert job["status"] == "finished", job
    assert job["attempts"] == 2, job  # started once, taken over once
    resumed_note = f"resumed: its worker {HOST}:{old} stopped; attempt 2"
    assert job["error"] == resumed_note, job
    assert (job["done"], job["total"]) == (JUDGMENTS, JUDGMENTS), job
    assert job["counts"]["by_status"] == {"scored": JUDGMENTS}, job  # the stub always grades
    keys = stored_judgment_keys(url)
    assert len(keys) == len(set(keys)) == JUDGMENTS
    assert JUDGMENTS <= paid <= JUDGMENTS + CONCURRENCY, paid

    # Progress while the new worker ran the job: over the whole run, never only the part
    # left. Readings from the resumed pass are told apart by `done` beyond what was stored
    # when the old worker died (the old pass reported only what it had stored).
    resumed = [s for s in seen if s.status == "running" and s.attempts == 2]
    assert resumed, seen
    assert all(s.error == resumed_note for s in resumed), resumed
    assert all(s.total == JUDGMENTS for s in resumed), resumed
    dones = [s.done for s in resumed]
    assert dones == sorted(dones), dones
    assert any(s.done > stored_at_kill for s in resumed), (stored_at_kill, resumed)


# -- health without a worker ------------------------------------------------------------------


def test_health_says_when_no_worker_runs_the_jobs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fairjudge.db'}"
    with StubServer() as stub:
        config = _config(tmp_path, stub, url)
        answered_sample(config)
        worker: subprocess.Popen[bytes] | None = None
        worker_log = tmp_path / "worker.log"
        try:
            with _running(LiveServer(config, extra=("--no-worker",)), url) as server:
                assert _job_workers(server) == []
                # Nothing waits, nothing runs: healthy.
                status, body = _health(server)
                assert status == 200 and body["status"] == "ok", body
                assert body["worker"] == {
                    "healthy": True,
                    "live": 0,
                    "silent": 0,
                    "last_beat_at": None,
                    "last_beat_age_s": None,
                    "waiting_jobs": 0,
                    "reason": "no job worker runs, and no job waits for one",
                    "queued_jobs": 0,
                    "running_jobs": 0,
                    "oldest_wait_s": None,
                    "degraded": False,
                }

                # A job waits and nothing will run it: unhealthy.
                job_id = _post_judge_job(server)
                status, body = _health(server)
                assert status == 503 and body["status"] == "unhealthy", body
                assert body["worker"]["healthy"] is False
                assert (body["worker"]["live"], body["worker"]["silent"]) == (0, 0), body
                assert body["worker"]["waiting_jobs"] == 1, body
                assert body["worker"]["reason"].startswith("1 job(s) wait and no job worker runs")
                assert _job(server, job_id)["status"] == "queued"

                # A worker of our own: it beats, health is 200 again, and it runs the job.
                with worker_log.open("wb") as log:
                    worker = subprocess.Popen(
                        [*FAIRJUDGE, "--config", str(config), "worker"],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                _wait_for(lambda: _health(server)[0] == 200, "health 200 with a worker", 30)
                status, body = _health(server)
                assert body["worker"]["live"] == 1 and body["worker"]["silent"] == 0, body
                assert body["worker"]["reason"] == "1 job worker(s) beating", body
                job = server.wait_job(job_id, timeout=60)
                assert job["status"] == "finished" and job["attempts"] == 1, job
                assert len(set(stored_judgment_keys(url))) == JUDGMENTS
                assert set(_beat_rows(url)) == {f"{HOST}:{worker.pid}"}

                # SIGKILLed, it never says it stopped: health still counts it live until
                # its last beat (read from the store: the dead worker writes no other) is
                # STALE_S old, then says it went silent.
                worker.send_signal(signal.SIGKILL)
                worker.wait(timeout=10)
                last_beat = _beat_rows(url)[f"{HOST}:{worker.pid}"].beat_at
                last_beat = last_beat if last_beat.tzinfo else last_beat.replace(tzinfo=UTC)
                readings = []  # (status, body, seconds since the last beat, by our clock)
                deadline = time.monotonic() + 2 * STALE_S + BEAT_S
                while not readings or readings[-1][0] == 200:
                    assert time.monotonic() < deadline, readings[-1]
                    status, body = _health(server)
                    readings.append((status, body, (_utcnow() - last_beat).total_seconds()))
                    time.sleep(0.1)
        finally:
            if worker is not None and worker.poll() is None:
                worker.kill()
                worker.wait(timeout=10)
    # Healthy (the dead worker still counted live) while its last beat was at most STALE_S
    # old; the kill came within BEAT_S of that beat, so at least one such reading was made.
    *before, (status, body, age) = readings
    assert before and before[0][2] <= STALE_S, readings[:1]
    for code, seen, seen_age in before:
        assert code == 200 and seen["worker"]["live"] == 1, seen
        assert seen_age <= STALE_S + 0.5, (seen_age, seen)  # 0.5: a request's own time
    # Then 503 as soon as it was older (within a poll and a request), and never earlier.
    assert STALE_S < age <= STALE_S + 2, (age, body)
    assert status == 503 and body["status"] == "unhealthy", body
    w = body["worker"]
    assert (w["healthy"], w["live"], w["silent"], w["waiting_jobs"]) == (False, 0, 1, 0), body
    assert STALE_S < w["last_beat_age_s"] <= age + 0.5, (w, age)
    assert abs(datetime.fromisoformat(w["last_beat_at"]) - last_beat) < timedelta(seconds=0.01)
    assert w["reason"].startswith("no job worker has beaten for"), w
    assert f"more than {STALE_S:g} s" in w["reason"], w


# -- attempts while a job waits ---------------------------------------------------------------

WAIT_S = 4.5  # how long the job is watched while it waits
# A worker leaves a job whose run is busy for WAIT_RETRY_S (2 s, server/jobs/queue.py) before it
# tries it again: in WAIT_S it tries at least twice (at the start, then 2 s + a poll later).
MIN_TRIES = 2


def test_attempts_do_not_climb_while_a_job_waits_for_its_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fairjudge.db'}"
    with StubServer() as stub:
        config = _config(tmp_path, stub, url)
        answered_sample(config)
        engine = make_engine(url)
        try:
            with _running(LiveServer(config), url) as server:
                # The store is new: the judge run the job makes is judge run 1. This process
                # holds its lease before the run exists, as another judging process would.
                with run_lease(engine, "judge", 1, seconds=30):
                    job_id = _post_judge_job(server)

                    def waiting() -> bool:
                        return (_job(server, job_id)["error"] or "").startswith("waiting:")

                    _wait_for(waiting, "the job met the run's lease", 30)
                    seen = []
                    until = time.monotonic() + WAIT_S
                    while time.monotonic() < until:
                        seen.append(_job(server, job_id))
                        time.sleep(0.02)
                    paid_while_waiting = requests_of(stub, "judge")
                job = server.wait_job(job_id, timeout=60)
        finally:
            engine.dispose()

    # It was tried again and again (each try stamps started_at) and never counted.
    tries = {j["started_at"] for j in seen}
    assert len(tries) >= MIN_TRIES, tries
    counted = [(j["status"], j["attempts"], j["error"]) for j in seen if j["attempts"]]
    assert not counted, f"{len(counted)} of {len(seen)} readings count an attempt: {counted[:3]}"
    busy = f"waiting: judge run 1 is being run by process {os.getpid()} on host {HOST}"
    assert all((j["error"] or busy).startswith(busy) for j in seen), seen
    assert paid_while_waiting == 0
    # Once the run was free: one real start, the whole run judged, the waiting note gone.
    assert job["status"] == "finished", job
    assert job["attempts"] == 1, job
    assert job["error"] is None, job
    assert job["result"]["judge_run_id"] == 1, job
    assert job["result"]["summary"]["model_calls"] == JUDGMENTS, job
    assert (job["done"], job["total"]) == (JUDGMENTS, JUDGMENTS), job
    assert len(set(stored_judgment_keys(url))) == JUDGMENTS


# -- a worker stopped cleanly ----------------------------------------------------------------


def test_a_worker_stopped_with_sigterm_is_neither_live_nor_silent(tmp_path: Path) -> None:
    """SIGTERM is how ``serve`` stops its worker (Supervised.close) and how a service manager
    stops ``fairjudge worker``: the worker marks its heartbeat stopped on the way out, so
    health counts it neither as beating nor as gone quiet (which would be a 503 for good once
    STALE_S had passed, on a ``serve --no-worker`` or any server whose workers are all gone)."""
    url = f"sqlite:///{tmp_path / 'fairjudge.db'}"
    with StubServer() as stub:  # no job runs: the endpoint is never called
        config = _config(tmp_path, stub, url)
        subprocess.run(
            [*FAIRJUDGE, "--config", str(config), "db", "upgrade"], check=True, capture_output=True
        )
        worker = subprocess.Popen(
            [*FAIRJUDGE, "--config", str(config), "worker"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        name = f"{HOST}:{worker.pid}"
        try:
            _wait_for(lambda: name in _beat_rows(url), "the worker's first beat", 60)
            worker.send_signal(signal.SIGTERM)
            _, stderr = worker.communicate(timeout=30)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.communicate(timeout=10)
    assert b"Traceback" not in stderr, stderr.decode()
    row = _beat_rows(url)[name]
    assert row.stopped_at is not None, (row, stderr.decode()[-2000:])
    engine = make_engine(url)
    try:
        health = worker_health(engine, stale_after_s=STALE_S)
    finally:
        engine.dispose()
    assert (health.healthy, health.live, health.silent, health.waiting_jobs) == (True, 0, 0, 0)
    assert health.reason == "no job worker runs, and no job waits for one", health
