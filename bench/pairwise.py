"""Importing published pairwise judgments, timed: ``fairjudge judgments import`` of Shi et
al.'s 27 record files (9 judges x 3 repetitions x 192 judgments = 5,184, each with the judge's
whole reply; ../shared/data/position-bias-shi2024/mtbench_repetition) into a fresh SQLite
store, a whole process as a user runs it (target <= 10 s); then ``judgments position --json``
on what was stored (every judge's figures with 1,000 bootstrap resamples), a whole process
too (no target; reported beside it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.factories import SHARED_DATA

TARGET_S = 10.0
RECORDS = SHARED_DATA / "position-bias-shi2024" / "mtbench_repetition"
EXPECTED = 5184


def _timed(command: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[3:6])} exited {done.returncode}: {done.stderr}")
    return wall, done.stdout


def bench_pairwise(folder: Path) -> dict[str, Any]:
    """Seconds of the import and of the figures, each a whole ``fairjudge`` process."""
    if not RECORDS.is_dir():
        raise RuntimeError(f"Shi et al.'s records not found at {RECORDS}")
    base = [sys.executable, "-m", "server.cli", "--db", f"sqlite:///{folder / 'pairwise.db'}"]
    import_s, out = _timed(
        [*base, "judgments", "import", str(RECORDS), "--format", "shi2024", "--json"]
    )
    summary = json.loads(out)
    if summary["records"] != EXPECTED:
        raise RuntimeError(f"imported {summary['records']} judgments, expected {EXPECTED}")
    position_s, out = _timed([*base, "judgments", "position", "--json"])
    judges = json.loads(out)["judges"]
    print(
        f"pairwise: import of {summary['records']:,} judgments from {summary['files']} files "
        f"{import_s:.2f} s (target {TARGET_S:.0f}); position figures of {len(judges)} judges "
        f"{position_s:.2f} s",
        flush=True,
    )
    return {
        "judgments": summary["records"],
        "files": summary["files"],
        "import_s": round(import_s, 3),
        "position_s": round(position_s, 3),
        "judges": len(judges),
        "target_s": TARGET_S,
        "within_target": import_s <= TARGET_S,
    }
