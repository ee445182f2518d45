"""Agreement that cannot flatter, timed: Gwet's AC1 and Cohen's kappa with 1,000 bootstrap
resamples on 100,000 judge-human pairs (target <= 1 s).

``judge_vs_human`` computes every coefficient in one call (the correlations, the kappas, AC1
and AC2, the majority baseline and the flags), so the time is that whole call: an upper
bound for AC1 and kappa alone. Two data sets: FairMonitor's 1-5 scale with the human score a
mean of three raters, and a skewed pass/fail rubric (90 % pass) where kappa and AC1 part.
Each is timed three times after a warm-up; the median is the figure.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

TARGET_S = 1.0


def _data(kind: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, tuple]:
    if kind == "scale_1_5":
        judge = rng.integers(1, 6, n).astype(float)
        human = np.clip(judge[:, None] + rng.integers(-2, 3, (n, 3)), 1, 5).mean(axis=1)
        return judge, human, (1, 2, 3, 4, 5)
    human = (rng.random(n) < 0.9).astype(float)
    judge = np.where(rng.random(n) < 0.92, human, 1 - human)
    return judge, human, (0, 1)


def bench_chance(n_pairs: int = 100_000, n_bootstrap: int = 1000) -> dict[str, Any]:
    """Median wall time of ``judge_vs_human`` per data set, with AC1 and kappa found."""
    from judge.stats.coefficient import BootstrapOptions
    from judge.stats.pairs import judge_vs_human

    rng = np.random.default_rng(0)
    options = BootstrapOptions(n_bootstrap, seed=0)
    out: dict[str, Any] = {"pairs": n_pairs, "bootstrap": n_bootstrap, "target_s": TARGET_S}
    for kind in ("scale_1_5", "pass_fail_90"):
        judge, human, labels = _data(kind, n_pairs, rng)
        judge_vs_human(judge, human, options=BootstrapOptions(10), labels=labels)  # warm-up
        times = []
        for _ in range(3):
            start = time.perf_counter()
            result = judge_vs_human(judge, human, options=options, labels=labels)
            times.append(time.perf_counter() - start)
        c = result.coefficients
        out[kind] = {
            "wall_s": round(statistics.median(times), 3),
            "runs_s": [round(t, 3) for t in times],
            "kappa": [
                round(v, 4) for v in (c["kappa"].value, c["kappa"].ci_low, c["kappa"].ci_high)
            ],
            "ac1": [round(v, 4) for v in (c["ac1"].value, c["ac1"].ci_low, c["ac1"].ci_high)],
            "flags": [f.code for f in result.flags],
        }
    out["within_target"] = all(out[k]["wall_s"] <= TARGET_S for k in ("scale_1_5", "pass_fail_90"))
    return out
