"""Building a benchmark at the speed of the wire: ``fairjudge dataset plan`` writing 1,000
items with the scripted stub (fixed latency, in a process of its own) as the item writer, a
whole command timed from outside, as for judging (bench/wire.py).

The grid is one factor of our own with N / 20 scenarios (``--taxonomy``), so 4 stages x
N / 20 scenarios x 5 items a cell is N items, one call of 5 items each. The stub answers every
call with 5 valid items that are not near-duplicates of any other, so every call adds 5.

For concurrency C, items per call K and latency L the ideal is C x K / L items per second; the
ratio is (N / wall seconds) / ideal, startup, planning, the near-duplicate index and storing
included. Calls go out in ceil(N / K / C) rounds at best, which bounds the ratio below 1 even
for a client that costs nothing (``rounds_bound``). A dry run (startup and planning, no call)
and a rerun (nothing left to ask) are timed the same way, to show where the time goes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from bench.wire import Stub, timed
from tests.support.factories import FAIRJUDGE

ITEMS_PER_CALL = 5
STAGES = 4


def write_taxonomy(path: Path, scenarios: int) -> Path:
    """A taxonomy extension: the factor ``bench`` tested in ``scenarios`` new scenarios."""
    lines = []
    for i in range(scenarios):
        lines += [
            "[[scenarios]]",
            f'id = "bench_{i:03d}"',
            f'name = "Bench scenario {i}"',
            f'description = "A made-up school situation, number {i}."',
        ]
    ids = ", ".join(f'"bench_{i:03d}"' for i in range(scenarios))
    lines += [
        "[[factors]]",
        'id = "bench"',
        'name = "Bench factor"',
        'description = "A made-up sensitive factor."',
        f"scenarios = [{ids}]",
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_config(path: Path, url: str, db_url: str, concurrency: int) -> Path:
    path.write_text(
        f"""
database_url = "{db_url}"
state_dir = "{path.parent / "state"}"
[endpoints.writer]
base_url = "{url}"
model = "stub-model"
structured_output = "json_object_schema"
concurrency = {concurrency}
[generation]
endpoint = "writer"
[judge]
endpoint = "writer"
""",
        encoding="utf-8",
    )
    return path


def generate_bench(
    tmp: Path | None = None, n: int = 1000, concurrency: int = 32, latency: float = 0.2
) -> dict[str, Any]:
    """Time ``dataset plan`` writing ``n`` items (a multiple of 20) against the stub."""
    import tempfile

    if n % (STAGES * ITEMS_PER_CALL):
        raise ValueError(f"n must be a multiple of {STAGES * ITEMS_PER_CALL}, got {n}")
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(tmp or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        stub = Stub(latency)
        try:
            config = write_config(
                folder / "generate.toml", stub.url, f"sqlite:///{folder / 'generate.db'}",
                concurrency,
            )  # fmt: skip
            taxonomy = write_taxonomy(
                folder / "bench_taxonomy.toml", n // (STAGES * ITEMS_PER_CALL)
            )
            plan = [
                *FAIRJUDGE, "--config", str(config), "dataset", "plan", "--endpoint", "writer",
                "--per-cell", str(ITEMS_PER_CALL), "--items-per-call", str(ITEMS_PER_CALL),
                "--factor", "bench", "--taxonomy", str(taxonomy), "--into", "bench", "--json",
            ]  # fmt: skip
            dry = timed([*plan, "--dry-run"])
            run = timed(plan)
            calls = stub.requests()
            rerun = timed(plan)
        finally:
            stub.stop()
    data = json.loads(run.stdout)
    planned = json.loads(dry.stdout)["calls_planned"]
    if data["added"] != n or calls != n // ITEMS_PER_CALL:
        raise RuntimeError(f"expected {n} items from {n // ITEMS_PER_CALL} calls: {data}")
    ideal = concurrency * ITEMS_PER_CALL / latency
    rounds = math.ceil(planned / concurrency)
    return {
        "items": n,
        "concurrency": concurrency,
        "latency_s": latency,
        "items_per_call": ITEMS_PER_CALL,
        "calls": calls,
        "ideal_items_per_s": ideal,
        "wall_s": round(run.wall_s, 2),
        "items_per_s": round(n / run.wall_s, 1),
        "ratio_to_ideal": round(n / run.wall_s / ideal, 3),
        "rounds_bound": round(n / (rounds * latency) / ideal, 3),
        "cpu_ms_per_item": round(run.cpu_s / n * 1000, 2),
        "dry_run_wall_s": round(dry.wall_s, 2),
        "rerun_wall_s": round(rerun.wall_s, 2),
        # The same command with nothing left to ask costs its startup and planning; what the
        # run takes beyond that is the calls, reading, the near-duplicate index and storing.
        "ratio_past_startup": round(n / max(run.wall_s - rerun.wall_s, 1e-9) / ideal, 3),
        "rerun_calls": json.loads(rerun.stdout)["calls"],
    }


if __name__ == "__main__":  # python -m bench.generate
    print(json.dumps(generate_bench(), indent=2))
