"""Judge-assisted estimates at a judge run's size (judge/stats/ppi.py, judge/stats/alttest.py).

1. PPI: 100,000 judged items of which 2,000 carry a human rating (seeded 1-5 scores, a biased
   and noisy judge): the tuned PPI++ mean, the human-only and judge-only means, the same mean
   from a stratified sample (weights and strata: the design variance and its tuning), and a
   gap between two halves of the run. Target: all of them together <= 1 s.
2. Alt-test: 3 annotators x 1,200 items (SummEval's size), the t-test branch. Target <= 1 s.

Each case is timed ``repeats`` times in this process; the median wall time is reported.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from judge.stats.alttest import alt_test
from judge.stats.ppi import Group, classical_mean, judge_only_mean, ppi_gap, ppi_mean


def _median_wall(work: Callable[[], object], repeats: int) -> float:
    walls = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        walls.append(time.perf_counter() - start)
    return round(statistics.median(walls), 4)


def _scores(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
    quality = rng.normal(3.0, 1.0, size)
    human = np.clip(np.rint(quality + rng.normal(0, 0.6, size)), 1, 5)
    judge = np.clip(np.rint(0.8 * quality + 1.0 + rng.normal(0, 0.7, size)), 1, 5)
    return human, judge


def bench_ppi(n_judged: int = 100_000, n_rated: int = 2_000, repeats: int = 5) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    human, judge = _scores(rng, n_judged)
    rated = rng.choice(n_judged, n_rated, replace=False)
    unrated = np.setdiff1d(np.arange(n_judged), rated)
    y, yhat, yhat_u = human[rated], judge[rated], judge[unrated]
    # Stratified: 400 per judge level (all of a smaller level), weights N_h / n_h.
    level = judge  # the judge's 1-5 score is its level
    picked, weights = [], []
    for value in np.unique(level):
        members = np.flatnonzero(level == value)
        take = min(400, members.size)
        picked.append(rng.choice(members, take, replace=False))
        weights.append(np.full(take, members.size / take))
    s_idx, s_w = np.concatenate(picked), np.concatenate(weights)
    half = n_judged // 2
    groups = [
        Group(human[r], judge[r], judge[np.setdiff1d(np.arange(lo, lo + half), r)])
        for lo in (0, half)
        for r in [rated[(rated >= lo) & (rated < lo + half)]]
    ]

    def all_estimates() -> dict[str, Any]:
        return {
            "ppi": ppi_mean(y, yhat, yhat_u),
            "classical": classical_mean(y),
            "judge_only": judge_only_mean(judge),
            "stratified": ppi_mean(
                human[s_idx], judge[s_idx], judge, weights=s_w, strata=level[s_idx].tolist()
            ),
            "gap": ppi_gap(*groups),
        }

    results = all_estimates()
    cases: dict[str, Callable[[], object]] = {
        "ppi_mean": lambda: ppi_mean(y, yhat, yhat_u),
        "stratified_ppi_mean": lambda: ppi_mean(
            human[s_idx], judge[s_idx], judge, weights=s_w, strata=level[s_idx].tolist()
        ),
        "gap": lambda: ppi_gap(*groups),
        "all_five": all_estimates,
    }
    ppi = results["ppi"]
    return {
        "judged": n_judged,
        "rated": n_rated,
        "median_wall_s": {name: _median_wall(work, repeats) for name, work in cases.items()},
        "estimate": round(ppi.estimate, 4),
        "half_width": round(ppi.half_width, 4),
        "human_only_half_width": round(results["classical"].half_width, 4),
        "lam": round(ppi.lam, 3),
        "effective_n": round(ppi.effective_n, 1),
        "true_human_mean": round(float(human.mean()), 4),
        "target_s": 1.0,
    }


def bench_alttest(n_items: int = 1_200, n_annotators: int = 3, repeats: int = 5) -> dict[str, Any]:
    rng = np.random.default_rng(1)
    quality = rng.normal(3.0, 1.0, n_items)
    ratings = np.clip(np.rint(quality[:, None] + rng.normal(0, 0.8, (n_items, n_annotators))), 1, 5)
    ratings[rng.random(ratings.shape) < 0.05] = np.nan  # some ratings missing
    judge = np.clip(np.rint(quality + rng.normal(0, 0.6, n_items)), 1, 5)
    result = alt_test(ratings, judge, epsilon="expert")
    return {
        "items": n_items,
        "annotators": n_annotators,
        "median_wall_s": _median_wall(lambda: alt_test(ratings, judge, epsilon="expert"), repeats),
        "omega": round(result.omega, 3),
        "rho": round(result.rho, 3),
        "tests": sorted({r.test for r in result.annotators}),
        "target_s": 1.0,
    }


def bench_stats_ppi() -> dict[str, Any]:
    return {"ppi": bench_ppi(), "alttest": bench_alttest()}


if __name__ == "__main__":
    import json

    print(json.dumps(bench_stats_ppi(), indent=2))
