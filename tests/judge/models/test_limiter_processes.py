"""One quota per endpoint across real processes, each with a thread pool of its own, as
Celery workers on several machines would call one endpoint: the stub measures the calls in
flight at once and the calls started per window, and a worker killed with SIGKILL gives its
slots back once their lease runs out."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import IO, Any

import pytest

from judge.config import EndpointConfig
from judge.models.limiter import RedisLimiter
from tests.judge.models.conftest import REDIS_URL
from tests.judge.models.quota_workers import Job
from tests.support.stub_openai import StubServer

WORKER = [sys.executable, "-m", "tests.judge.models.quota_workers"]


class Worker:
    """One worker process, spoken to a JSON line at a time."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            WORKER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        return self.proc.stdin, self.proc.stdout

    def send(self, job: Job) -> None:
        stdin, _ = self._pipes()
        stdin.write(job.line() + "\n")
        stdin.flush()

    def answer(self) -> dict[str, Any]:
        _, stdout = self._pipes()
        line = stdout.readline()
        assert line, f"the worker ended (exit {self.proc.poll()})"
        found: dict[str, Any] = json.loads(line)
        return found

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture(scope="module")
def workers() -> Iterator[list[Worker]]:
    """Two worker processes, started once for the module (imports take a second or two)."""
    started = [Worker(), Worker()]
    try:
        for worker in started:
            assert worker.answer() == {"ready": True}
        yield started
    finally:
        for worker in started:
            worker.stop()


def run_together(workers: list[Worker], **fields: Any) -> list[dict[str, Any]]:
    """The same calls job on every worker, all beginning at one moment."""
    job = Job(**fields, start_at=time.time() + 0.3)
    for worker in workers:
        worker.send(job)
    return [worker.answer() for worker in workers]


CONCURRENCY = 32
LATENCY_S = 0.2


def test_two_processes_never_have_more_calls_in_flight_than_the_quota(
    workers: list[Worker], quota_prefix: str
) -> None:
    # Two processes of 32 threads each, 96 calls each, against concurrency = 32.
    with StubServer(latency=LATENCY_S) as stub:
        answers = run_together(
            workers,
            base_url=stub.base_url,
            concurrency=CONCURRENCY,
            threads=CONCURRENCY,
            calls=96,
            redis_url=REDIS_URL,
            prefix=quota_prefix,
        )
        most = stub.state.max_in_flight
    assert answers == [{"calls": 96, "failed": 0}] * 2
    # The quota (32) is never passed, and is used: a limiter letting fewer through (one at
    # a time, say) would never reach 24 of the 32 the quota allows.
    assert 24 <= most <= CONCURRENCY, most


def test_without_the_shared_quota_the_same_processes_pass_it(workers: list[Worker]) -> None:
    # The check above can fail: each process alone keeps 32 in flight, so two reach ~64.
    with StubServer(latency=LATENCY_S) as stub:
        answers = run_together(
            workers,
            base_url=stub.base_url,
            concurrency=CONCURRENCY,
            threads=CONCURRENCY,
            calls=64,
        )
        most = stub.state.max_in_flight
    assert answers == [{"calls": 64, "failed": 0}] * 2
    assert most > CONCURRENCY, most


# requests_per_minute over a "minute" shortened to 1 s (the limiter's window is a parameter).
PER_WINDOW = 10
WINDOW_S = 1.0
SLACK_S = 0.25
"""The trip from the limiter's clock (Redis's) to the stub's varies by a few ms to tens of ms
on a busy machine, so the stub counts over windows this much shorter than the limiter's.
Calls go out in bursts at the start of each window, so a generous slack hides no excess:
without the shared quota, one burst alone holds both processes' calls."""


def test_two_processes_start_no_more_calls_per_window_than_the_quota(
    workers: list[Worker], quota_prefix: str
) -> None:
    with StubServer() as stub:
        answers = run_together(
            workers,
            base_url=stub.base_url,
            concurrency=CONCURRENCY,
            threads=8,
            calls=15,
            requests_per_minute=PER_WINDOW,
            window_s=WINDOW_S,
            redis_url=REDIS_URL,
            prefix=quota_prefix,
        )
        most = stub.state.most_in_window(WINDOW_S - SLACK_S)
        span = stub.state.starts[-1] - stub.state.starts[0]
    assert answers == [{"calls": 15, "failed": 0}] * 2
    assert most <= PER_WINDOW, most
    # 30 calls at 10 a window start in three windows, at about 0, 1 and 2 s: a limiter
    # letting fewer through per window would need a fourth (3 s or more).
    assert span < 3 * WINDOW_S - SLACK_S, span


def test_each_process_keeping_its_own_rate_would_pass_the_quota(workers: list[Worker]) -> None:
    # The check above can fail: per-process limiters let 10 a window through from each.
    with StubServer() as stub:
        run_together(
            workers,
            base_url=stub.base_url,
            concurrency=CONCURRENCY,
            threads=8,
            calls=10,
            requests_per_minute=PER_WINDOW,
            window_s=WINDOW_S,
        )
        most = stub.state.most_in_window(WINDOW_S - SLACK_S)
    assert most == 2 * PER_WINDOW, most  # both processes' 10 at once


def test_a_killed_holder_s_slots_come_back_after_their_lease(quota_prefix: str) -> None:
    # timeout_s 0.5 s: a lease of 3 x 0.5 = 1.5 s, renewed every 0.5 s while held.
    lease_s = 1.5
    endpoint = EndpointConfig(
        base_url="http://127.0.0.1:9/v1", model="stub-model", concurrency=4, timeout_s=0.5
    )
    limiter = RedisLimiter(REDIS_URL, prefix=quota_prefix)
    holder = Worker()
    try:
        assert holder.answer() == {"ready": True}
        holder.send(
            Job(
                base_url=endpoint.base_url,
                concurrency=4,
                kind="hold",
                timeout_s=0.5,
                redis_url=REDIS_URL,
                prefix=quota_prefix,
            )
        )
        assert holder.answer() == {"held": 4}
        time.sleep(lease_s + 0.5)  # renewals keep a call longer than its lease in its slot
        assert limiter.in_use(endpoint) == 4
        holder.proc.send_signal(signal.SIGKILL)
        holder.proc.wait()
        killed = time.monotonic()
        assert limiter.in_use(endpoint) == 4  # a killed process gives nothing back
        while limiter.in_use(endpoint) > 0 and time.monotonic() - killed < 5:
            time.sleep(0.02)
        back_after = time.monotonic() - killed
    finally:
        holder.stop()
    # At most one lease after its last renewal, which came before the kill (+ one poll).
    assert back_after <= lease_s + 0.1, back_after
    with limiter.hold(endpoint):
        assert limiter.in_use(endpoint) == 1
