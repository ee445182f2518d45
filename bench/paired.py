"""Paired comparison timed: two judge runs of 10,000 judgments each on the same items, every
cell of the paired table (``judge.reports.compare_paired.paired_rows``) with 1,000 bootstrap
resamples (target <= 2 s).

The items spread over FairMonitor's stages and factors as a run of the sample would: S1 and S4
items one ICS judgment each, S2 items three (TCS, PCS, ETCS), S3 one SBAS; B is A moved by
-1, 0 or +1 point at random. The pure computation from item scores already read is timed (the
store read is the same as the plain comparison's); three runs after a warm-up, the median is
the figure.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

TARGET_S = 2.0
RUBRICS = {"S1": ("ICS",), "S2": ("TCS", "PCS", "ETCS"), "S3": ("SBAS",), "S4": ("ICS",)}


def _runs(n_judgments: int, rng: np.random.Generator) -> tuple[list[Any], list[Any]]:
    from judge.metrics import ItemScore
    from judge.vocab import FACTORS

    a: list[ItemScore] = []
    b: list[ItemScore] = []
    item = 0
    while len(a) < n_judgments:
        stage = ("S1", "S2", "S3", "S4")[item % 4]
        factor = FACTORS[item % len(FACTORS)]
        for rubric in RUBRICS[stage]:
            x = int(rng.integers(1, 6))
            y = int(np.clip(x + rng.integers(-1, 2), 1, 5))
            for side, value in ((a, x), (b, y)):
                side.append(
                    ItemScore(item, f"k{item}", stage, factor, "s", rubric, value, 1, 1, (), ())
                )
        item += 1
    return a[:n_judgments], b[:n_judgments]


def bench_paired(n_judgments: int = 10_000, n_bootstrap: int = 1000) -> dict[str, Any]:
    """Median wall time of the whole paired table, with its number of cells."""
    from judge.reports.compare_paired import paired_rows

    a, b = _runs(n_judgments, np.random.default_rng(0))
    paired_rows(a, b, n_bootstrap=n_bootstrap)  # warm-up
    times, cells = [], 0
    for _ in range(3):
        start = time.perf_counter()
        cells = len(paired_rows(a, b, n_bootstrap=n_bootstrap))
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    return {
        "judgments_per_run": n_judgments,
        "bootstrap": n_bootstrap,
        "cells": cells,
        "median_s": round(median, 3),
        "target_s": TARGET_S,
        "ok": median <= TARGET_S,
    }


if __name__ == "__main__":
    print(bench_paired())
