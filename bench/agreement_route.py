"""The agreement route under load (issue 26): ``GET /api/v1/judge-runs/ID/agreement`` on a
run of 10,000 judgments rated by 3 people, from a real ``fairjudge serve``.

Set-up (not timed): 10,000 S1 items imported with the CLI, their answers posted as produced
elsewhere, judged by a server job against the stub (no latency), and 3 raters' scores for
every item posted to ``/api/v1/ratings`` (seeded, so every run rates alike). One request is
timed alone; then CLIENTS clients send REQUESTS requests each with the route's defaults
(1,000 bootstrap resamples): p50 and p99 latency, and the reply's n checked against the
10,000 rated items.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from bench import wire
from bench.server import timed_gets
from tests.support.factories import FAIRJUDGE, write_config
from tests.support.live import LiveServer

N_ITEMS = 10_000
RATERS = ("rater-a", "rater-b", "rater-c")
BATCH = 5_000
CLIENTS = 2
REQUESTS = 3
DATASET = "agreement_bench"


def _post(server: LiveServer, path: str, body: Any) -> Any:
    status, reply = server.post(path, body)
    if status not in (200, 201):
        raise RuntimeError(f"{path}: {status} {str(reply)[:300]}")
    return reply


def bench_agreement_route(tmp: Path) -> dict[str, Any]:
    stub = wire.Stub(0.0)
    try:
        db_url = f"sqlite:///{tmp / 'agreement.db'}"
        config = write_config(tmp / "agreement.toml", stub.url, db_url, concurrency=32)
        base = [*FAIRJUDGE, "--config", str(config)]
        items = tmp / f"{DATASET}.jsonl"
        with items.open("w", encoding="utf-8") as f:
            for i in range(N_ITEMS):
                item = {k: v.format(i=i) for k, v in wire.S1_ITEM.items()}
                f.write(json.dumps({"id": f"s1-{i}", **item}) + "\n")
        subprocess.run([*base, "db", "upgrade"], check=True, capture_output=True)
        subprocess.run(
            [*base, "dataset", "import", str(items), "--name", DATASET],
            check=True,
            capture_output=True,
        )
        with LiveServer(config) as server:
            rows = [
                {"item_id": f"s1-{i}", "part": "answer", "text": f"Answer {i}: no."}
                for i in range(N_ITEMS)
            ]
            run = 0
            for start in range(0, N_ITEMS, BATCH):
                body = {"dataset": DATASET, "model": "bench", "rows": rows[start : start + BATCH]}
                run = _post(server, "/api/v1/responses", body)["generation_run_id"]
            params = {"generation_run_id": run}
            job = _post(server, "/api/v1/jobs", {"kind": "judge", "params": params})
            job = server.wait_job(job["id"], timeout=900)
            if job["status"] != "finished":
                raise RuntimeError(f"the judge job did not finish: {job}")
            judge_run = job["result"]["judge_run_id"]
            rng = random.Random(26)
            ratings = [
                {"item_id": f"s1-{i}", "rater": rater, "rubric": "ICS", "score": rng.randint(1, 5)}
                for i in range(N_ITEMS)
                for rater in RATERS
            ]
            for start in range(0, len(ratings), BATCH):
                _post(
                    server,
                    "/api/v1/ratings",
                    {"generation_run": run, "rows": ratings[start : start + BATCH]},
                )
            path = f"/api/v1/judge-runs/{judge_run}/agreement"
            alone = time.perf_counter()
            status, first = server.get(path)
            alone = time.perf_counter() - alone
            if status != 200:
                raise RuntimeError(f"{path}: {status} {str(first)[:300]}")
            (row,) = first["rubrics"]["ICS"]["judges"]
            if row["n"] != N_ITEMS:
                raise RuntimeError(f"{path}: n = {row['n']}, not {N_ITEMS}")

            latencies = timed_gets(server, path, CLIENTS, REQUESTS)
    finally:
        stub.stop()
    # Inclusive: with a handful of requests the exclusive method extrapolates past the maximum.
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    result = {
        "judgments": N_ITEMS,
        "raters": len(RATERS),
        "clients": CLIENTS,
        "requests": len(latencies),
        "first_alone_ms": round(alone * 1000, 1),
        "p50_ms": round(cuts[49] * 1000, 1),
        "p99_ms": round(cuts[98] * 1000, 1),
        "max_ms": round(latencies[-1] * 1000, 1),
    }
    print(
        f"agreement route, 10,000 judgments x 3 raters, {CLIENTS} clients: "
        f"p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms",
        flush=True,
    )
    return result
