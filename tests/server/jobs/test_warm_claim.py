"""Warmers in several processes never compute the same judge run's pages at once: each
claims the run first (``server.usecases.figures.CLAIM``, a lease row whose insert fails while
a live process holds it), and one that finds it claimed leaves the run to its holder.

Real processes (``python -c``, each with its own engine on the same SQLite file) start their
warm at the same moment: each waits for a file the test creates once all are ready. The
store is tests/support/two_runs.py's: runs ``a`` and ``b`` of 18 S1 items, one ICS judgment
each; run ``a`` rated by 2 people (6 ratings), run ``b`` by nobody (its agreement JSON is an
error, None, not kept).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from judge.store.tables import RunLease
from server.usecases.figures import CLAIM, warm_claimed
from tests.support.two_runs import TwoRuns, import_ratings, two_runs

WARM = """
import json, sys, time
from pathlib import Path
from judge.config import Settings
from judge.store.engine import make_engine
from server.usecases.figures import warm_claimed

settings = Settings.model_validate_json(Path(sys.argv[1]).read_text())
engine = make_engine(settings.database_url)
run, go = int(sys.argv[2]), Path(sys.argv[3])
Path(sys.argv[4]).touch()  # ready
while not go.exists():
    time.sleep(0.005)
start = time.time()
took = warm_claimed(engine, settings, run)
print(json.dumps({"start": start, "end": time.time(), "took": took}))
"""
"""One process's warm of one run: when it began and ended, and what ``warm_claimed``
returned (seconds per page, or None: the run was claimed by another process)."""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, empty_template: Path) -> Iterator[TwoRuns]:
    with two_runs(tmp_path_factory.mktemp("claim"), empty_template, "claim-admin") as made:
        yield made


def _at_once(t: TwoRuns, folder: Path, runs: list[int]) -> list[dict[str, Any]]:
    """Warm ``runs`` (one process each) starting at the same moment; their reports."""
    folder.mkdir(parents=True, exist_ok=True)
    settings = folder / "settings.json"
    settings.write_text(t.settings.model_dump_json())
    go = folder / "go"
    procs = []
    for n, run in enumerate(runs):
        ready = folder / f"ready-{n}"
        args = [sys.executable, "-c", WARM, str(settings), str(run), str(go), str(ready)]
        procs.append((ready, subprocess.Popen(args, stdout=subprocess.PIPE, text=True)))
    deadline = time.monotonic() + 120
    while not all(ready.exists() for ready, _ in procs):
        assert time.monotonic() < deadline, "the processes did not start"
        assert all(p.poll() is None for _, p in procs), "a process ended before its start"
        time.sleep(0.05)
    go.touch()
    reports = []
    for _, proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports


def _claims(t: TwoRuns) -> list[RunLease]:
    with Session(t.engine) as session:
        return list(session.exec(select(RunLease).where(RunLease.kind == CLAIM)))


def _computed(took: dict[str, float | None]) -> bool:
    """Every page computed now (seconds > 0), or an error kept as none (None)."""
    return all(s is None or s > 0 for s in took.values()) and any(s for s in took.values())


def test_two_processes_on_two_runs_both_compute(store: TwoRuns, tmp_path: Path) -> None:
    """The clean case first: claims on different runs do not stop each other."""
    a, b = store.runs["a"], store.runs["b"]
    reports = _at_once(store, tmp_path, [a, b])
    assert [r["took"] is not None for r in reports] == [True, True]
    assert all(_computed(r["took"]) for r in reports), reports
    # Nobody rated run b: its agreement JSON is an error, nothing kept (None), by hand.
    assert reports[1]["took"]["agreement-json"] is None
    assert _claims(store) == []  # both claims freed when their pages were done


def test_two_processes_on_one_run_compute_it_once(store: TwoRuns, tmp_path: Path) -> None:
    a = store.runs["a"]
    # A third rater's ratings: run a's rows changed, every page of it is stale again.
    import_ratings(store, "a", ("r3",), 3)
    reports = _at_once(store, tmp_path, [a, a])
    done = [r for r in reports if r["took"] is not None]
    left = [r for r in reports if r["took"] is None]
    # Exactly one computed the pages; the other found the run claimed and computed nothing.
    assert (len(done), len(left)) == (1, 1), reports
    assert _computed(done[0]["took"]), done
    # It gave up while the other was computing, not after: the two warms overlapped.
    assert done[0]["start"] <= left[0]["end"] <= done[0]["end"], reports
    assert _claims(store) == []
    # The claim is freed: a warm now claims the run and finds every page kept (0 s each).
    again = warm_claimed(store.engine, store.settings, a)
    assert again is not None and all(s in (0.0, None) for s in again.values()), again
