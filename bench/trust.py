"""The judge's counterfactual check at the speed of the wire: ``fairjudge checks
counterfactual`` on 2,000 judged answers against the scripted stub (fixed latency), a whole
command timed from outside, as for judging (bench/wire.py). Every answer holds a gendered word,
so every item is copied and judged again: 2,000 judge calls. Its ratio to the ideal
(concurrency / latency) is reported beside ``fairjudge judge``'s on the same answers in the same
run; target: the audit's ratio >= 0.9 of judge's (the audit adds the copy, reading the scores
back and the tests by direction)."""

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
        for step in (["dataset", "import", str(items)], ["generate", "items"]):
            subprocess.run([*base, *step], check=True, capture_output=True)
        # ``judge`` of the same 2,000 answers against the same stub, timed the same way: the
        # audit's ratio is read beside it (target: >= 0.9 of judge's), so that a slow machine
        # or a busy stub shows in both figures
        judged = timed([*base, "judge", "1"])
        before = stub.requests()
        audit = timed(
            [*base, "checks", "counterfactual", "--judge-run", "1", "--swap", "gender",
             "--json"]
        )  # fmt: skip
        calls = stub.requests() - before
        data = json.loads(audit.stdout)
    finally:
        gen.stop()
        stub.stop()
    ideal = concurrency / latency
    judge_ratio = n / judged.wall_s / ideal
    audit_ratio = n / audit.wall_s / ideal
    return {
        "judgments": n,
        "concurrency": concurrency,
        "latency_s": latency,
        "ideal_per_s": ideal,
        "items_copied": data["copy"]["items_copied"],
        "backend_calls": calls,
        "wall_s": round(audit.wall_s, 2),
        "per_s": round(n / audit.wall_s, 1),
        "ratio_to_ideal": round(audit_ratio, 3),
        "cpu_ms_per_judgment": round(audit.cpu_s / n * 1000, 2),
        "judge_wall_s": round(judged.wall_s, 2),
        "judge_ratio_to_ideal": round(judge_ratio, 3),
        "judge_cpu_ms_per_judgment": round(judged.cpu_s / n * 1000, 2),
        "audit_over_judge": round(audit_ratio / judge_ratio, 3),
    }
