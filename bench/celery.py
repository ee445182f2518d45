"""Celery workers sharing one judge run (bench part ``celery``), timed as users run them.

10,000 S1 items are answered once by the stub (200 ms), on a fresh PostgreSQL database; then
the same judge job (10,000 judgments, one ICS call each) runs on 1, 2 and 4 ``fairjudge
worker`` processes through a redis-server of the benchmark's own. Each worker's task keeps 32
calls in flight (``[workers] task_concurrency``) and the endpoint's quota, shared through
Redis, is 32 x workers (its ``concurrency``), so
the ideal is 32 x workers / 0.2 s judgments per second. Each configuration judges at
another temperature: another judge run and other cache keys, so nothing is answered from
the cache. Timed from the job's submission to its end (the workers are up and idle
before). Targets: two workers >= 1.8 x one worker's throughput, four >= 3 x. The workers do
not compute the run's dashboard pages when the job ends (``[server] warm_figures = false``):
that comes after the job's end, so outside the timing, but its CPU would count in the
workers' CPU per judgment.

Beside them, the same run measures what the machine allows any client: the bare ``openai``
loop (``bench.bare_openai``, the reference every speed target is a ratio to) sending the same
judge requests as 1, 2 and 4 processes at 32 calls in flight each, the requests dealt out
evenly. Its speed-ups (``bare_openai.speedup_2`` and ``_4``) are the ceiling for the
workers' on this machine (``speedup_2_of_bare`` and ``speedup_4_of_bare``: ours as a share of
them): a process that only sent the calls, storing nothing, shares the
same cores with the stub, PostgreSQL and Redis.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import wire
from tests.support.factories import FAIRJUDGE
from tests.support.redis_server import PrivateRedis

N_ITEMS = 10_000
LATENCY = 0.2
PER_WORKER = 32
SETUPS = ((1, 0.0), (2, 0.1), (4, 0.2))
"""(workers, judge temperature): one judge run each."""


def _config(path: Path, stub_url: str, db_url: str, broker: str | None, *, workers: int,
            temperature: float) -> Path:  # fmt: skip
    celery = (
        f'[workers]\nbroker_url = "{broker}"\nchunk_size = 500\ntask_concurrency = {PER_WORKER}\n'
        if broker
        else ""
    )
    path.write_text(
        f"""
database_url = "{db_url}"
state_dir = "{path.parent / "state"}"
[endpoints.gen]
base_url = "{stub_url}"
model = "stub-model"
concurrency = 128
[endpoints.judge]
base_url = "{stub_url}"
model = "stub-model"
structured_output = "json_object_schema"
concurrency = {PER_WORKER * workers}
[generation]
endpoint = "gen"
max_tokens = 64
[judge]
endpoint = "judge"
temperature = {temperature}
[server]
warm_figures = false
{celery}""",
        encoding="utf-8",
    )
    return path


def _pg_database() -> tuple[str, Any]:
    import uuid

    from sqlalchemy import create_engine, text

    name = f"fairjudge_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(
        "postgresql+psycopg://postgres@127.0.0.1:5432/postgres", isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    return f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}", drop


def _job_seconds(config: Path, db_url: str, workers: int, log_dir: Path) -> tuple[float, float]:
    """Seconds from the job's submission to its end, and the CPU seconds its workers used
    (user + system, their whole lives: start-up included)."""
    from sqlmodel import Session

    from judge.store.engine import make_engine
    from server.tables import Job

    procs = [
        subprocess.Popen(
            [*FAIRJUDGE, "--config", str(config), "worker", "--concurrency", "1"],
            stdout=(log_dir / f"worker{i}.log").open("wb"),
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        for i in range(workers)
    ]
    engine = make_engine(db_url)
    try:
        # Every worker up and idle before timing: its heartbeat row is written just before
        # it connects to the broker, which takes a moment more.
        pids = {p.pid for p in procs}
        deadline = time.monotonic() + 120
        while not pids <= _beating(engine):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the workers did not start; see {log_dir}/worker*.log")
            time.sleep(0.2)
        time.sleep(3)
        start = time.perf_counter()
        job = subprocess.run(
            [*FAIRJUDGE, "--config", str(config), "jobs", "submit", "judge",
             '{"generation_run_id": 1}'],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        while True:
            with Session(engine) as session:
                row = session.get(Job, int(job))
                assert row is not None
                if row.status in ("finished", "failed", "cancelled"):
                    if row.status != "finished":
                        raise RuntimeError(f"job {job} ended {row.status}: {row.error}")
                    break
            time.sleep(0.2)
        wall = time.perf_counter() - start
    finally:
        for proc in procs:
            proc.terminate()
        cpu = 0.0
        for proc in procs:
            _, _, usage = os.wait4(proc.pid, 0)  # the worker's own CPU time
            cpu += usage.ru_utime + usage.ru_stime
        engine.dispose()
    return wall, cpu


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system) a running process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _beating(engine: Any) -> set[int]:
    from sqlmodel import Session, select

    from server.tables import WorkerBeat

    with Session(engine) as session:
        rows = session.exec(
            select(WorkerBeat.worker).where(WorkerBeat.stopped_at == None)  # noqa: E711
        ).all()
    return {int(w.rsplit(":", 1)[1]) for w in rows}


def bare_ceiling(tmp: Path, stub_url: str, config: Path, n: int) -> dict[str, Any]:
    """The bare openai loop as 1, 2 and 4 processes (``PER_WORKER`` in flight each) on the
    judge requests of generation run 1: judgments per second, CPU per call (the processes'
    own, start-up included), and the speed-ups over one process."""
    bodies = tmp / "bodies.jsonl"
    wire.judge_bodies(config, bodies)
    lines = bodies.read_text(encoding="utf-8").splitlines()
    figures: dict[str, Any] = {}
    for processes, _ in SETUPS:
        files = []
        for i in range(processes):
            part = tmp / f"bodies_{processes}_{i}.jsonl"
            part.write_text("\n".join(lines[i::processes]) + "\n", encoding="utf-8")
            files.append(part)
        start = time.perf_counter()
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "bench.bare_openai", stub_url, str(f), str(PER_WORKER)],
                stdout=subprocess.DEVNULL,
            )
            for f in files
        ]
        cpu = 0.0
        for proc in procs:
            _, status, usage = os.wait4(proc.pid, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                raise RuntimeError("a bare openai loop failed")
            cpu += usage.ru_utime + usage.ru_stime
        wall = time.perf_counter() - start
        figures[f"processes_{processes}"] = {
            "per_s": round(len(lines) / wall, 1),
            "cpu_ms_per_call": round(1000 * cpu / len(lines), 2),
        }
        print(f"  bare openai x{processes}: {len(lines) / wall:.0f}/s", flush=True)
    one = figures["processes_1"]["per_s"]
    figures["speedup_2"] = round(figures["processes_2"]["per_s"] / one, 2)
    figures["speedup_4"] = round(figures["processes_4"]["per_s"] / one, 2)
    return figures


def bench_celery(tmp: Path, n_items: int = N_ITEMS) -> dict[str, Any]:
    redis = PrivateRedis(tmp)
    redis.start()
    stub = wire.Stub(LATENCY)
    db_url, drop = _pg_database()
    results: dict[str, Any] = {"judgments": n_items, "latency_s": LATENCY}
    try:
        plain = _config(tmp / "plain.toml", stub.url, db_url, None, workers=4, temperature=0)
        base = [*FAIRJUDGE, "--config", str(plain)]
        subprocess.run([*base, "db", "upgrade"], check=True, capture_output=True)
        items = wire.write_items(tmp / "items.jsonl", n_items)
        subprocess.run([*base, "dataset", "import", str(items), "--name", "bench"], check=True,
                       capture_output=True)  # fmt: skip
        subprocess.run([*base, "generate", "bench"], check=True, capture_output=True)
        for workers, temperature in SETUPS:
            config = _config(tmp / f"w{workers}.toml", stub.url, db_url, redis.url,
                             workers=workers, temperature=temperature)  # fmt: skip
            stub_before = _cpu_of(stub.proc.pid)
            wall, cpu = _job_seconds(config, db_url, workers, tmp)
            stub_cpu = _cpu_of(stub.proc.pid) - stub_before
            ideal = PER_WORKER * workers / LATENCY
            results[f"workers_{workers}"] = {
                "wall_s": round(wall, 1),
                "worker_cpu_ms_per_judgment": round(1000 * cpu / n_items, 2),
                "stub_cpu_ms_per_judgment": round(1000 * stub_cpu / n_items, 2),
                "per_s": round(n_items / wall, 1),
                "ratio_to_ideal": round(n_items / wall / ideal, 3),
            }
            print(f"  {workers} worker(s): {wall:.1f} s, {n_items / wall:.0f}/s", flush=True)
        one = results["workers_1"]["per_s"]
        results["speedup_2"] = round(results["workers_2"]["per_s"] / one, 2)
        results["speedup_4"] = round(results["workers_4"]["per_s"] / one, 2)
        results["targets"] = {"speedup_2": ">= 1.8", "speedup_4": ">= 3"}
        bare = bare_ceiling(tmp, stub.url, plain, n_items)
        results["bare_openai"] = bare
        # FairJudge's workers against the bare loop with as many processes, same run.
        for workers, _ in SETUPS:
            ours = results[f"workers_{workers}"]["per_s"]
            results[f"workers_{workers}"]["share_of_bare"] = round(
                ours / bare[f"processes_{workers}"]["per_s"], 3
            )
        # Our speed-ups as a share of the bare loop's: 1.0 scales as well as the machine allows.
        for workers in (2, 4):
            results[f"speedup_{workers}_of_bare"] = round(
                results[f"speedup_{workers}"] / bare[f"speedup_{workers}"], 2
            )
    finally:
        stub.stop()
        redis.stop()
        drop()
    return results


if __name__ == "__main__":
    import json
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        n = int(sys.argv[1]) if len(sys.argv) > 1 else N_ITEMS
        print(json.dumps(bench_celery(Path(folder), n), indent=2))
        sys.exit(0)
