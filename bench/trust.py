"""The judge's counterfactual audit at the speed of the wire: ``fairjudge judge-audit
counterfactual`` on 2,000 judged answers against the scripted stub (fixed latency), a whole
command timed from outside, as for judging (bench/wire.py). Every answer holds a gendered word,
so every item is copied and judged again: 2,000 judge calls. Target: >= 0.9 of the ideal
(concurrency / latency)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from bench.wire import S1_ITEM, Stub, timed, write_config
from tests.support.factories import FAIRJUDGE


def bench_trust(
    tmp: Path, n: int = 2000, concurrency: int = 32, latency: float = 0.2
) -> dict[str, Any]:
    gen, stub = Stub(0.0), Stub(latency)
    try:
        db_url = f"sqlite:///{tmp / 'trust.db'}"
        config = write_config(tmp / "trust.toml", gen.url, stub.url, db_url, concurrency)
        base = [*FAIRJUDGE, "--config", str(config)]
        items = tmp / "items.jsonl"
        with items.open("w", encoding="utf-8") as f:
            for i in range(n):
                item = {k: v.format(i=i) for k, v in S1_ITEM.items()}
                # the stub's answer echoes the question: a word for the gender swap
                item["question"] = item["question"].replace("students", "boys", 1)
                f.write(json.dumps({"id": f"t{i}", **item}) + "\n")
        for step in (["dataset", "import", str(items)], ["generate", "items"], ["judge", "1"]):
            subprocess.run([*base, *step], check=True, capture_output=True)
        before = stub.requests()
        audit = timed(
            [*base, "judge-audit", "counterfactual", "--judge-run", "1", "--swap", "gender",
             "--json"]
        )  # fmt: skip
        calls = stub.requests() - before
        data = json.loads(audit.stdout)
    finally:
        gen.stop()
        stub.stop()
    ideal = concurrency / latency
    return {
        "judgments": n,
        "concurrency": concurrency,
        "latency_s": latency,
        "ideal_per_s": ideal,
        "items_copied": data["copy"]["items_copied"],
        "backend_calls": calls,
        "wall_s": round(audit.wall_s, 2),
        "per_s": round(n / audit.wall_s, 1),
        "ratio_to_ideal": round(n / audit.wall_s / ideal, 3),
        "cpu_ms_per_judgment": round(audit.cpu_s / n * 1000, 2),
    }
