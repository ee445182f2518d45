"""A worker process for the quota tests: ``python -m tests.judge.models.quota_workers``.

It says ``ready`` once imported, then reads one job a line (JSON, the fields of ``Job``) and
answers each with one JSON line. A ``calls`` job makes chat calls through a ``ModelClient``
from ``threads`` threads of its own, as a judge run does, beginning at the wall-clock moment
``start_at`` (so several workers begin together) and answers ``{"calls": n, "failed": k}``.
A ``hold`` job takes ``concurrency`` slots of the shared quota, answers ``{"held": n}`` and
keeps them until the process is killed.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from judge.config import EndpointConfig
from judge.models.client import CallFailed, ModelClient
from judge.models.limiter import Limiter, LocalLimiter, RedisLimiter


@dataclass(frozen=True)
class Job:
    base_url: str
    concurrency: int
    kind: str = "calls"
    threads: int = 1
    calls: int = 0
    """Calls to make in all (spread over the threads); 0 = until ``seconds`` have passed."""
    seconds: float = 0.0
    requests_per_minute: int | None = None
    redis_url: str = ""
    """The shared quota's Redis; '' = the process's own limiter."""
    prefix: str = ""
    window_s: float = 60.0
    timeout_s: float = 5.0
    start_at: float = 0.0

    def endpoint(self) -> EndpointConfig:
        return EndpointConfig(
            base_url=self.base_url,
            model="stub-model",
            concurrency=self.concurrency,
            requests_per_minute=self.requests_per_minute,
            timeout_s=self.timeout_s,
            max_retries=0,
            check_model=False,
        )

    def limiter(self) -> Limiter:
        if not self.redis_url:
            return LocalLimiter(window_s=self.window_s)
        limiter = RedisLimiter(self.redis_url, prefix=self.prefix, window_s=self.window_s)
        limiter.check()
        return limiter

    def line(self) -> str:
        return json.dumps(asdict(self))


def make_calls(job: Job) -> dict[str, Any]:
    client = ModelClient("quota", job.endpoint(), limiter=job.limiter())
    lock = threading.Lock()
    done = {"calls": 0, "failed": 0}
    busy = [0]  # calls under way
    time.sleep(max(0.0, job.start_at - time.time()))
    until = time.monotonic() + job.seconds

    def more() -> bool:
        with lock:
            if job.calls:
                if done["calls"] + done["failed"] + busy[0] >= job.calls:
                    return False
            elif time.monotonic() >= until:
                return False
            busy[0] += 1
            return True

    def loop(worker: int) -> None:
        n = 0
        while more():
            n += 1
            try:
                client.complete(
                    [{"role": "user", "content": f"Question {worker}.{n}"}],
                    temperature=0.0,
                    max_tokens=8,
                )
                outcome = "calls"
            except CallFailed as exc:
                outcome = "failed"
                print(f"call failed: {exc.reason}", file=sys.stderr, flush=True)
            with lock:
                busy[0] -= 1
                done[outcome] += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(job.threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return done


def hold_slots(job: Job) -> None:
    limiter, endpoint = job.limiter(), job.endpoint()
    held = threading.Semaphore(0)

    def hold() -> None:
        with limiter.hold(endpoint):
            held.release()
            time.sleep(3600)  # until killed

    for _ in range(job.concurrency):
        threading.Thread(target=hold, daemon=True).start()
    for _ in range(job.concurrency):
        held.acquire()
    _answer({"held": job.concurrency})
    time.sleep(3600)


def _answer(value: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


def main() -> None:
    _answer({"ready": True})
    for line in sys.stdin:
        job = Job(**json.loads(line))
        if job.kind == "hold":
            hold_slots(job)
        else:
            _answer(make_calls(job))


if __name__ == "__main__":
    main()
