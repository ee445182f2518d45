"""The server under load, as a team uses it: a real ``fairjudge serve`` (gunicorn, 2 web
workers, and its job worker) on a free port, the scripted stub in a process of its own, and
this process as the client, over HTTP.

1. Ingest: 100,000 answers produced elsewhere through ``POST /api/v1/responses`` in 20
   batches of 5,000 (50,000 S1 items x 1 part and 25,000 S2 items x 2 parts), one after the
   other: wall time (target <= 60 s) and the peak resident memory of the server's whole
   process group, sampled every 50 ms (target <= 500 MB).
2. Judge: 2,000 of those answers (the first 2,000 S1 items, imported again under their own
   model label, so they are a run of their own) judged by a server job against the stub at
   200 ms a call, concurrency 32: judgments per second over the ideal 32 / 0.2 s = 160/s
   (target >= 0.9), from the POST to the job seen finished, and from the job's own start.
3. Read: ``GET /api/v1/judgments?judge_run=N&limit=50`` from 20 concurrent clients, 100
   requests each: p50 and p99 latency.

Items are imported with the CLI before anything is timed; request bodies are encoded before
the clock starts, so the ingest figure is the server's.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from bench import wire
from tests.support.factories import FAIRJUDGE, write_config
from tests.support.live import LiveServer, process_rss

N_S1 = 50_000
N_S2 = 25_000
BATCH = 5_000
N_JUDGE = 2_000
CONCURRENCY = 32
LATENCY = 0.2
CLIENTS = 20
READS_PER_CLIENT = 100
SAMPLE_EVERY_S = 0.05
DATASET = "server_bench"

S2_ITEM = {
    "stage": "S2",
    "factor": "gender",
    "scenario": "advanced_skill_cultivation",
    "story_a": "Story {i}: Lena, a ninth-grade student, joins the robotics team three weeks "
    "before the regional contest and stays late to rewire the robot's arm.",
    "story_b": "Story {i}: Lukas, a ninth-grade student, joins the robotics team three weeks "
    "before the regional contest and stays late to rewire the robot's arm.",
    "changed_factor": "the student's gender (Lena, a girl -> Lukas, a boy)",
}
# About 60 words, the length FairMonitor's prompts ask for.
ANSWER = (
    "Answer {n}: the adviser should take the ambition seriously and say plainly that the "
    "choice belongs to the student, explore what draws them to it, explain the training "
    "routes and the entry requirements, and put them in touch with people who work in the "
    "field, so that the decision rests on interests and strengths, not on expectations "
    "about who usually does such work."
)


def _items(path: Path) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for i in range(N_S1):
            item = {k: v.format(i=i) for k, v in wire.S1_ITEM.items()}
            f.write(json.dumps({"id": f"s1-{i}", **item}) + "\n")
        for i in range(N_S2):
            item = {k: v.format(i=i) for k, v in S2_ITEM.items()}
            f.write(json.dumps({"id": f"s2-{i}", **item}) + "\n")
    return path


def _rows() -> Iterator[dict[str, str]]:
    """The 100,000 answers: one per S1 item, parts A and B of each S2 item."""
    n = 0
    for i in range(N_S1):
        yield {"item_id": f"s1-{i}", "part": "answer", "text": ANSWER.format(n=n)}
        n += 1
    for i in range(N_S2):
        for part in ("A", "B"):
            yield {"item_id": f"s2-{i}", "part": part, "text": ANSWER.format(n=n)}
            n += 1


def _bodies(rows: list[dict[str, str]], model: str) -> list[bytes]:
    return [
        json.dumps({"dataset": DATASET, "model": model, "rows": rows[i : i + BATCH]}).encode()
        for i in range(0, len(rows), BATCH)
    ]


def _post(server: LiveServer, path: str, body: bytes) -> tuple[int, Any]:
    req = urllib.request.Request(
        server.base + path,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Authorization": f"Bearer {server.member_key}",
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=300) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()[:500]


class PeakRss:
    """Samples the server's process group's memory in a thread: the peak of the summed RSS
    (the target's measure; it counts pages the forked workers share once per process) and of
    the summed PSS (shared pages split between their processes: the memory really used)."""

    def __init__(self, server: LiveServer) -> None:
        self.server = server
        self.peak = self.peak_pss = 0
        self.by_role: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            self.peak = max(self.peak, self.server.rss_bytes())
            pids = self.server.pids()
            self.peak_pss = max(self.peak_pss, _pss_bytes(pids))
            for pid in pids:
                role = _role(self.server, pid)
                self.by_role[role] = max(self.by_role.get(role, 0), process_rss(pid))

    @contextmanager
    def phase(self) -> Iterator[PeakRss]:
        self.peak, self.peak_pss = self.server.rss_bytes(), _pss_bytes(self.server.pids())
        self.by_role = {}
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join()


def _role(server: LiveServer, pid: int) -> str:
    """Which of the server's processes ``pid`` is: the arbiter (the ``serve`` process), the
    job worker, or a web worker (named by pid: there are several)."""
    assert server.proc is not None
    if pid == server.proc.pid:
        return "arbiter"
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return f"ended {pid}"
    return "job worker" if b"worker\x00--exit-with-parent" in command else f"web worker {pid}"


def _pss_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:  # ended meanwhile
            continue
        for line in rollup.splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1]) * 1024
    return total


def _mb(n: int) -> float:
    """Bytes in megabytes (10^6 bytes), the unit of the targets."""
    return round(n / 1e6, 1)


def _ingest(server: LiveServer, rss: PeakRss) -> dict[str, Any]:
    rows = list(_rows())
    bodies = _bodies(rows, "external")
    added = 0
    with rss.phase():
        start = time.perf_counter()
        for body in bodies:
            status, reply = _post(server, "/api/v1/responses", body)
            if status not in (200, 201):
                raise RuntimeError(f"a batch was refused: {status} {reply}")
            added += reply["added"]
        wall = time.perf_counter() - start
    if added != len(rows):
        raise RuntimeError(f"{added} answers stored of {len(rows)} sent")
    return {
        "rows": len(rows),
        "batches": len(bodies),
        "batch_rows": BATCH,
        "mean_body_mb": _mb(sum(map(len, bodies)) // len(bodies)),
        "wall_s": round(wall, 2),
        "rows_per_s": round(len(rows) / wall),
        "peak_rss_mb": _mb(rss.peak),
        "peak_pss_mb": _mb(rss.peak_pss),
        "peak_rss_mb_by_process": {k: _mb(v) for k, v in sorted(rss.by_role.items())},
        "target_wall_s": 60,
        "target_peak_rss_mb": 500,
    }


def _judge(server: LiveServer, stub: wire.Stub, rss: PeakRss) -> dict[str, Any]:
    rows = [r for r in _rows() if r["item_id"].startswith("s1-")][:N_JUDGE]
    (body,) = _bodies(rows, "bench-judge")
    status, reply = _post(server, "/api/v1/responses", body)
    if status != 201:
        raise RuntimeError(f"the judge run's answers were refused: {status} {reply}")
    run = reply["generation_run_id"]
    before = stub.requests()
    with rss.phase():
        start = time.perf_counter()
        status, job = server.post(
            "/api/v1/jobs", {"kind": "judge", "params": {"generation_run_id": run}}
        )
        if status != 201:
            raise RuntimeError(f"the job was refused: {status} {job}")
        job = server.wait_job(job["id"], timeout=600)
        wall = time.perf_counter() - start
    calls = stub.requests() - before
    if job["status"] != "finished" or job["result"]["summary"]["tasks"] != N_JUDGE:
        raise RuntimeError(f"the judge job did not judge {N_JUDGE} answers: {job}")
    ran = (
        datetime.fromisoformat(job["finished_at"]) - datetime.fromisoformat(job["started_at"])
    ).total_seconds()
    ideal = CONCURRENCY / LATENCY
    return {
        "judgments": N_JUDGE,
        "concurrency": CONCURRENCY,
        "latency_s": LATENCY,
        "ideal_per_s": ideal,
        "stub_calls": calls,
        "wall_s": round(wall, 2),
        "per_s": round(N_JUDGE / wall, 1),
        "ratio_to_ideal": round(N_JUDGE / wall / ideal, 3),
        "job_running_s": round(ran, 2),
        "job_ratio_to_ideal": round(N_JUDGE / ran / ideal, 3),
        "peak_rss_mb": _mb(rss.peak),
        "peak_pss_mb": _mb(rss.peak_pss),
        "peak_rss_mb_by_process": {k: _mb(v) for k, v in sorted(rss.by_role.items())},
        "judge_run_id": job["result"]["judge_run_id"],
        "target_ratio": 0.9,
    }


def timed_gets(server: LiveServer, path: str, clients: int, each: int) -> list[float]:
    """``clients`` concurrent clients GET ``path`` ``each`` times: every request's seconds,
    sorted; RuntimeError on a reply other than 200."""

    def client(_: int) -> list[float]:
        took = []
        for _ in range(each):
            start = time.perf_counter()
            code, _body = server.get(path)
            took.append(time.perf_counter() - start)
            if code != 200:
                raise RuntimeError(f"{path}: {code}")
        return took

    with ThreadPoolExecutor(clients) as pool:
        return sorted(t for ts in pool.map(client, range(clients)) for t in ts)


def _reads(server: LiveServer, judge_run: int) -> dict[str, Any]:
    path = f"/api/v1/judgments?judge_run={judge_run}&limit=50"
    status, page = server.get(path)
    if status != 200 or page["total"] != N_JUDGE or len(page["items"]) != 50:
        raise RuntimeError(f"{path}: {status} {str(page)[:300]}")

    start = time.perf_counter()
    latencies = timed_gets(server, path, CLIENTS, READS_PER_CLIENT)
    wall = time.perf_counter() - start
    cuts = statistics.quantiles(latencies, n=100)
    return {
        "path": path,
        "clients": CLIENTS,
        "requests": len(latencies),
        "p50_ms": round(cuts[49] * 1000, 1),
        "p99_ms": round(cuts[98] * 1000, 1),
        "max_ms": round(latencies[-1] * 1000, 1),
        "requests_per_s": round(len(latencies) / wall),
    }


def bench_server(tmp: Path) -> dict[str, Any]:
    stub = wire.Stub(LATENCY)
    try:
        db_url = f"sqlite:///{tmp / 'server.db'}"
        config = write_config(tmp / "server.toml", stub.url, db_url, concurrency=CONCURRENCY)
        base = [*FAIRJUDGE, "--config", str(config)]
        subprocess.run([*base, "db", "upgrade"], check=True, capture_output=True)
        items = _items(tmp / f"{DATASET}.jsonl")
        subprocess.run(
            [*base, "dataset", "import", str(items), "--name", DATASET],
            check=True,
            capture_output=True,
        )
        with LiveServer(config) as server:
            rss = PeakRss(server)
            idle = {_role(server, pid): process_rss(pid) for pid in server.pids()}
            ingest = _ingest(server, rss)
            judge = _judge(server, stub, rss)
            reads = _reads(server, judge["judge_run_id"])
    finally:
        stub.stop()
    result = {
        "server_processes": len(idle),
        "idle_rss_mb": _mb(sum(idle.values())),
        "idle_rss_mb_by_process": {k: _mb(v) for k, v in sorted(idle.items())},
        "ingest": ingest,
        "judge": judge,
        "reads": reads,
    }
    _print_table(result)
    return result


def _print_table(r: dict[str, Any]) -> None:
    i, j, q = r["ingest"], r["judge"], r["reads"]
    lines = [
        ("ingest 100,000 answers (20 x 5,000)", f"{i['wall_s']} s", "<= 60 s"),
        ("  peak server RSS (process group)", f"{i['peak_rss_mb']} MB", "<= 500 MB"),
        ("  peak server PSS (process group)", f"{i['peak_pss_mb']} MB", ""),
        (
            "judge 2,000 (job, stub 200 ms, c=32)",
            f"{j['per_s']}/s = {j['ratio_to_ideal']}",
            ">= 0.9",
        ),
        ("  from the job's own start", f"{j['job_ratio_to_ideal']} of ideal", ""),
        ("  peak server RSS while judging", f"{j['peak_rss_mb']} MB", "<= 500 MB"),
        ("list judgments, 20 clients: p50", f"{q['p50_ms']} ms", ""),
        ("                            p99", f"{q['p99_ms']} ms", ""),
    ]
    for name, value, target in lines:
        print(f"{name:<40} {value:>18}   {target}", flush=True)
