"""Qualifying a judge, timed: ``checks qualify``'s use case on a judge run of 10,000
judgments (one rubric, 10,000 items) with 2,000 of the items rated by each of 3 raters
(6,000 ratings), the [qualify] defaults (1,000 bootstrap resamples). Target <= 5 s.

Set-up (not timed): the rows written directly (tests/support/planted_judge.py) into a fresh
SQLite store, a judge that follows the people with a little noise. Timed: the whole use case
in a session of its own (``server.usecases.qualify.qualify_in``): reading the run's judgments
and the ratings, every coefficient with its interval, the human ceiling, the alt-test, the
rule and the stored record; also ``run_standing`` of the run (what each report and page
adds). The first call is a warm-up (imports); the median of three more is the figure.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

TARGET_S = 5.0
N_JUDGMENTS = 10_000
N_RATED = 2_000
RATERS = ("r0", "r1", "r2")


def build(folder: Path) -> tuple[str, int]:
    """The store's URL and its judge run (see the module docstring)."""
    from sqlmodel import Session

    from judge.store.engine import make_engine
    from tests.support.planted_judge import plant

    url = f"sqlite:///{folder / 'qualify.db'}"
    engine = make_engine(url)
    rng = np.random.default_rng(42)
    truth = rng.integers(1, 6, N_JUDGMENTS)

    def noisy(p: float) -> np.ndarray:
        step = rng.choice([-1, 0, 1], size=N_JUDGMENTS, p=[p / 2, 1 - p, p / 2])
        return np.clip(truth + step, 1, 5).astype(float)

    judge = noisy(0.1)
    ratings = {}
    for rater in RATERS:
        scores = noisy(0.4)
        scores[N_RATED:] = np.nan  # only the first 2,000 items are rated
        ratings[rater] = scores.tolist()
    with Session(engine) as session:
        planted = plant(session, [int(v) for v in judge], ratings, name="qualify_bench")
    engine.dispose()
    return url, planted.judge_run_id


def bench_qualify(folder: Path) -> dict[str, Any]:
    """Median seconds of one qualification and of one standing look-up."""
    from judge.config_qualify import QualifyConfig
    from judge.store.engine import make_engine
    from server.usecases.qualify import QualifyRequest, qualify_in
    from server.usecases.standing import standing_in

    url, run = build(folder)
    engine = make_engine(url)
    rule = QualifyConfig()
    request = QualifyRequest(judge_run=run, rubric="ICS")
    times, standing_times, line = [], [], ""
    try:
        for attempt in range(4):
            start = time.perf_counter()
            done = qualify_in(engine, request, rule)
            took = time.perf_counter() - start
            start = time.perf_counter()
            standing = standing_in(engine, run)
            standing_took = time.perf_counter() - start
            if attempt:  # the first is the warm-up
                times.append(took)
                standing_times.append(standing_took)
            line = done.record.line
    finally:
        engine.dispose()
    median = statistics.median(times)
    return {
        "judgments": N_JUDGMENTS,
        "ratings": N_RATED * len(RATERS),
        "bootstrap": rule.n_bootstrap,
        "qualify_s": round(median, 3),
        "qualify_runs_s": [round(t, 3) for t in times],
        "standing_s": round(statistics.median(standing_times), 4),
        "target_s": TARGET_S,
        "within_target": median <= TARGET_S,
        "line": line,
        "standing": standing["ICS"].state,
    }
