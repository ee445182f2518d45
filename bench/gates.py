"""Release gates timed: ``fairjudge gate`` on a gates file of 50 gates over 5 judge runs, as a
whole command (process start to exit, imports and the store read included; target <= 2 s).

Set-up (not timed): a fresh SQLite store with one dataset of FairMonitor's four stages x the
nine factors x ``ITEMS_PER_CELL`` items, one generation run and five judge runs of its answers
written as rows (tests/support/gate_runs.py): ICS on S1 and S4, TCS, PCS and ETCS on S2, SBAS
on S3, scores drawn at random (each later run a little shifted from the first). The file: 20
gates on one run's figures (a third of them for every factor, values and interval bounds), 25
paired gates B - A of each later run against the first (values, bounds and the three
verdicts; four paired tables at 2,000 bootstrap resamples), and 5 qualified gates. The
command also writes JUnit XML. One warm-up run, then the median of three is the figure; the
CPU seconds of each run's process are given beside the wall time, since on a shared machine
the wall time measures the other processes too.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

TARGET_S = 2.0
N_RUNS = 5
N_GATES = 50
ITEMS_PER_CELL = 20
FIGURES = ("S1 ICS>=3", "S2 TCS mean", "S2 PCS>=4", "S3 SBAS>=4", "S4 ICS mean")


def build(folder: Path) -> tuple[Path, Path, int]:
    """The config, the gates file and the number of judgments per run."""
    from sqlmodel import Session

    from judge.store.engine import make_engine
    from judge.vocab import FACTORS, STAGES
    from tests.support.factories import write_config
    from tests.support.gate_runs import RUBRICS, plant_runs

    url = f"sqlite:///{folder / 'gates.db'}"
    config = write_config(folder / "config.toml", "http://127.0.0.1:9/v1", url)
    rng = np.random.default_rng(0)
    first = {
        (stage, factor): rng.integers(1, 6, ITEMS_PER_CELL)
        for stage in STAGES
        for factor in FACTORS
    }
    runs = [
        {
            k: [int(x) for x in np.clip(v + rng.integers(-1, 2, v.size) * (n > 0), 1, 5)]
            for k, v in first.items()
        }
        for n in range(N_RUNS)
    ]
    engine = make_engine(url)
    with Session(engine) as session:
        ids = plant_runs(session, runs).judge_run_ids
    engine.dispose()
    per_run = sum(len(RUBRICS[stage]) * ITEMS_PER_CELL for stage, _ in first)
    path = folder / "gates.toml"
    path.write_text(gates_text(ids), encoding="utf-8")
    return config, path, per_run


def gates_text(ids: list[int]) -> str:
    """The 50 gates of the module docstring."""
    lines = ["[runs]", *(f"r{n} = {run}" for n, run in enumerate(ids)), ""]
    gates: list[str] = []
    for n in range(20):
        factor = "every" if n % 3 == 0 else ("all" if n % 3 == 1 else "gender")
        of = ("value", "lower", "upper")[n % 3]
        gates.append(
            f'run = "r{n % N_RUNS}"\nfigure = "{FIGURES[n % len(FIGURES)]}"\n'
            f'factor = "{factor}"\nof = "{of}"\nmin = 10'
        )
    for n in range(25):
        pair = f'compare = ["r0", "r{1 + n % (N_RUNS - 1)}"]\nfigure = "{FIGURES[n % 5]}"\n'
        if n % 5 < 3:
            kind = ("no_worse", "equivalent", "not_flagged")[n % 5]
            gates.append(pair + f'factor = "every"\nrequire = "{kind}"')
        else:
            gates.append(pair + f'of = "{("lower", "upper")[n % 2]}"\nmin = -50\nmax = 50')
    gates += [f'qualified = "r{n}"' for n in range(N_RUNS)]
    assert len(gates) == N_GATES
    for n, body in enumerate(gates, start=1):
        lines += ["[[gate]]", f'name = "gate {n}"', body, ""]
    return "\n".join(lines)


def bench_gates(folder: Path) -> dict[str, Any]:
    """Median wall seconds of the whole command, with what it checked."""
    from tests.support.factories import FAIRJUDGE

    config, path, per_run = build(folder)
    junit = folder / "gates.xml"
    command = [*FAIRJUDGE, "--config", str(config), "gate", str(path), "--junit", str(junit)]
    times, cpu, code = [], [], 0
    for attempt in range(4):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        took = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        code = done.returncode
        if code not in (0, 5):
            raise RuntimeError(f"fairjudge gate exited {code}: {done.stderr.strip()}")
        if attempt:  # the first is the warm-up
            times.append(took)
            cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    median = statistics.median(times)
    failed = junit.read_text(encoding="utf-8").count("<failure ")
    floor = _import_floor("import scipy.stats, sqlmodel")
    command_floor = _import_floor("import scipy.special, sqlmodel")
    return {
        "gates": N_GATES,
        "runs": N_RUNS,
        "judgments_per_run": per_run,
        "exit_code": code,
        "failed_gates": failed,
        "seconds": [round(t, 3) for t in times],
        "median_s": round(median, 3),
        # CPU seconds of the command's process: what the wall time would be on an idle machine
        "cpu_s": [round(t, 3) for t in cpu],
        "target_s": TARGET_S,
        "ok": median <= TARGET_S,
        # The same machine's floors in the same sitting, each the median of three processes
        # that only import libraries: ``command_floor_s`` what the command cannot run
        # without (scipy.special for the interval quantiles and binomial tails, SQLAlchemy
        # through sqlmodel for the store); ``import_floor_s`` the earlier floor with
        # scipy.stats instead of scipy.special, which the command imported until 2026-12-04
        # (kept so that figures before and after compare). Machines here differ up to 2x
        # from day to day; the command's time over a floor is FairJudge's own.
        "command_floor_s": round(command_floor, 3),
        "over_command_floor_s": round(median - command_floor, 3),
        "import_floor_s": round(floor, 3),
        "over_floor_s": round(median - floor, 3),
    }


def _import_floor(imports: str) -> float:
    command = [sys.executable, "-c", imports]
    took = []
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run(command, check=True)
        took.append(time.perf_counter() - start)
    return statistics.median(took)


if __name__ == "__main__":
    import json
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(bench_gates(Path(tmp)), indent=2))
