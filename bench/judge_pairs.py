"""Pairwise judging timed: ``fairjudge judge-pairs`` of two imported runs of the sample
dataset's S1 items, 10 repetitions (2 orders x 10 x the items' count calls) against the stub at
200 ms and concurrency 16, as a ratio to the ideal (calls x latency / concurrency), beside
``judge`` with as many calls (20 samples of one run) in the same process; then the rerun,
which sends nothing. Both commands run in this process after a warm-up dry run, so neither
pays the imports.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from sqlmodel import select

from judge.data.datasets import import_items
from judge.data.responses import import_responses
from judge.store.engine import make_engine, session_scope
from judge.store.tables import Item
from tests.support.cli import fairjudge
from tests.support.factories import SAMPLE, write_config
from tests.support.stub_openai import StubServer

LATENCY, CONCURRENCY, REPEATS = 0.2, 16, 10


def _first(messages: list[dict[str, str]]) -> str:
    return json.dumps({"explanation": "The first reads better.", "verdict": "A"})


def _timed(*args: str) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    done = fairjudge(*args, "--json")
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{args[2]} exited {done.returncode}: {done.stderr}")
    return wall, json.loads(done.stdout)


def bench_judge_pairs(folder: Path) -> dict[str, Any]:
    """Wall seconds and ratios to the ideal of judge-pairs and of judge, and the rerun."""
    db = f"sqlite:///{folder / 'pairs.db'}"
    with StubServer(latency=LATENCY, responder=_first) as stub:
        config = str(write_config(folder / "c.toml", stub.base_url, db, concurrency=CONCURRENCY))
        fairjudge("--config", config, "db", "upgrade")
        engine = make_engine(db)
        try:
            with session_scope(engine) as session:
                import_items(session, SAMPLE, "sample")
                keys = session.exec(select(Item.key).where(Item.stage == "S1")).all()
            runs = []
            for name in ("x", "y"):
                rows = [{"item_id": k, "part": "answer", "text": f"{name} on {k}"} for k in keys]
                runs.append(
                    str(import_responses(engine, "sample", rows, model=name).generation_run_id)
                )
        finally:
            engine.dispose()
        fairjudge("--config", config, "judge-pairs", *runs, "--dry-run")  # imports paid here
        pairs_s, pairs = _timed("--config", config, "judge-pairs", *runs, "--repeats", str(REPEATS))
        calls = pairs["passes"][0]["model_calls"]
        rerun_s, again = _timed("--config", config, "judge-pairs", *runs, "--repeats", str(REPEATS))
        sent = len(stub.state.bodies)
        stub.state.responder = None  # the stub's own judge for `judge`
        judge_s, judged = _timed(
            "--config", config, "judge", runs[0], "--samples", str(2 * REPEATS)
        )
    ideal = calls * LATENCY / CONCURRENCY
    judge_ideal = judged["model_calls"] * LATENCY / CONCURRENCY
    return {
        "calls": calls, "wall_s": round(pairs_s, 2), "ideal_s": ideal,
        "ratio": round(ideal / pairs_s, 3),
        "judge_calls": judged["model_calls"], "judge_wall_s": round(judge_s, 2),
        "judge_ratio": round(judge_ideal / judge_s, 3),
        "rerun_s": round(rerun_s, 2), "rerun_calls": sum(p["model_calls"] for p in again["passes"]),
        "bodies_after_rerun": sent,
    }  # fmt: skip
