"""Ctrl-C (SIGINT) and SIGTERM end `judge`, `generate` and an audit run within a few
seconds, at any moment of the run: exit 130, the results stored are whole and valid, the run
lease is freed, and the next run (started at once) is accepted and finishes the run with no
duplicate (docs/judging.md, "Interrupting a run").

The moments are set by what the command has done (requests the stub has seen, the lease row,
a write lock the test holds on the store), not by the clock. Every interrupted command is
followed at once by the next, which is the "immediate rerun" of the one before: it could not
reach its own moment if the lease had been left held (a second process is refused before
any call).
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.judge.audits.test_runner import always_group_a
from tests.support.cli import fairjudge
from tests.support.factories import FAIRJUDGE, SAMPLE, write_config
from tests.support.kills import Interrupted, interrupt_when, requests_of
from tests.support.stub_openai import StubServer, grade_for

CONCURRENCY = 4
BOUND_S = 10.0  # from the signal to the exit
INT, TERM = signal.SIGINT, signal.SIGTERM
# The sample's 72 items: 18 per stage. S2 and S3 items get two answers (story or question A
# and B), S1 and S4 one: 18 + 36 + 36 + 18 = 108 answers (SPEC.md, section 2). Judgments:
# S2 has three rubrics (TCS, PCS, ETCS), the other stages one: 18 x 3 + 54 = 108.
ANSWERS = 108
JUDGMENTS = 108
# The award audit's design (SPEC.md, section 3): levels x pairs x 4 variants.
AWARD_ARGS = ["audit", "award", "run", "--levels", "5,10", "--pairs", "5"]
AWARD_PROMPTS = 2 * 5 * 4


class Recorder:
    """The stub's planted behaviour: every reply is recorded, so a stored row can be checked
    against what the endpoint really said; with ``hold`` set, judge requests are counted
    and then left unanswered until ``release`` (an endpoint that hangs)."""

    def __init__(self, answer: Callable[[list[dict[str, str]]], Any] | None = None) -> None:
        self.answer = answer
        self.sent: set[str] = set()
        self.lock = threading.Lock()
        self.hold = False
        self.release = threading.Event()
        self.graded = 0  # judge replies given (sent at once when the stub's latency is 0)

    def __call__(self, messages: list[dict[str, str]]) -> str:
        is_judge = messages[0]["role"] == "system"
        if is_judge and self.hold:
            self.release.wait(60)
        with self.lock:
            n = len(self.sent)
            if is_judge:  # a valid grade: the stub's own score, an explanation unique to it
                text = json.dumps({"explanation": f"reply {n}", "score": grade_for(messages)})
                self.graded += 1
            else:
                text = self.answer(messages) if self.answer else f"Answer number {n}."
            self.sent.add(text)
        return str(text)


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


def lease_held(db: Path, kind: str) -> bool:
    try:
        return bool(rows(db, f"SELECT 1 FROM runlease WHERE kind = '{kind}'"))
    except sqlite3.OperationalError:  # the store is being created
        return False


def check_ended(done: Interrupted, db: Path, kind: str) -> None:
    """Exit 130 in time, saying what it kept, with no traceback, and no lease left."""
    assert done.returncode == 130, done.stderr
    assert done.seconds < BOUND_S
    assert "interrupted: finished work is stored" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert not lease_held(db, kind)


def judgments(db: Path, sent: set[str]) -> list[tuple[Any, ...]]:
    """The stored judgments, checked whole: unique per item, rubric and sample, and each the
    reply the stub really sent for it (score and explanation together)."""
    found = rows(
        db,
        "SELECT judge_run_id, item_id, rubric, sample_index, status, score, explanation, "
        "raw_output, cache_key FROM judgment",
    )
    keys = [r[:4] for r in found]
    assert len(keys) == len(set(keys))
    for *_, status, score, explanation, raw, cache_key in found:
        assert status == "scored" and cache_key
        assert raw in sent, raw
        assert json.loads(raw) == {"explanation": explanation, "score": score}
    return found


@pytest.mark.timeout(180)
def test_judge_ends_at_once_on_sigint_or_sigterm_at_any_moment(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    recorder = Recorder()
    with StubServer(latency=0.01, responder=recorder) as stub:
        config = write_config(
            tmp_path / "c.toml", stub.base_url, f"sqlite:///{db}", concurrency=CONCURRENCY
        )
        base = [*FAIRJUDGE, "--config", str(config)]
        for args in (["dataset", "import", str(SAMPLE)], ["generate", "fairmonitor_sample"]):
            made = fairjudge("--config", config, *args)  # set-up: in process
            assert made.returncode == 0, made.stderr
        judge = [*base, "judge", "1"]
        stored = interrupted = 0

        def paid() -> int:
            return requests_of(stub, "judge")

        def moment(n: int | None) -> Callable[[], bool]:
            """None: once the lease is held (calls are starting: the stub has seen none, or
            a few); n: once the stub has seen n requests from this command."""
            if n is None:
                return lambda: lease_held(db, "judge")
            start = paid()
            return lambda: paid() >= start + n

        for sig, n in ((INT, None), (TERM, 1), (INT, 4), (TERM, 10)):
            done = interrupt_when(judge, moment(n), sig, bound=BOUND_S)
            check_ended(done, db, "judge")
            now = len(judgments(db, recorder.sent))
            assert now >= stored  # nothing stored before is lost
            stored, interrupted = now, interrupted + 1

        # The endpoint hangs: four calls in flight that never come back. The command must
        # not wait for them (each could take its 120 s timeout, then a retry).
        recorder.hold = True
        start = paid()
        done = interrupt_when(judge, lambda: paid() >= start + CONCURRENCY, INT, bound=BOUND_S)
        recorder.hold = False
        recorder.release.set()
        check_ended(done, db, "judge")
        assert len(judgments(db, recorder.sent)) == stored  # nothing came back to store
        interrupted += 1

        # While results wait to be stored: the test holds the store's write lock, so every
        # result that comes back waits for it (and no new call starts once CONCURRENCY are
        # unstored). SIGTERM lands there; the lock is freed right after it.
        lock = sqlite3.connect(db, timeout=30, isolation_level=None)
        stub.state.latency = 0  # a reply goes out as soon as the recorder has given it
        start, graded = paid(), recorder.graded
        locked: list[int] = []

        def results_waiting() -> bool:
            if not locked:
                if paid() < start + 2:
                    return False
                lock.execute("BEGIN IMMEDIATE")
                locked.append(lock.execute("SELECT count(*) FROM judgment").fetchone()[0])
            # Every slot is taken by a call whose result cannot be stored, and answered.
            unstored = locked[0] - stored + CONCURRENCY
            if paid() - start < unstored or recorder.graded - graded < unstored:
                return False
            time.sleep(0.3)  # a reply sent reaches the command within milliseconds
            return True

        done = interrupt_when(
            judge, results_waiting, TERM, bound=BOUND_S, after_signal=lock.rollback
        )
        lock.close()
        stub.state.latency = 0.01
        check_ended(done, db, "judge")
        now = len(judgments(db, recorder.sent))
        # The results that were waiting for the store when the signal came were stored:
        # the CONCURRENCY calls answered while the lock was held (slots bound them).
        assert now == locked[0] + CONCURRENCY, (now, locked)
        interrupted += 1

        final = subprocess.run([*judge, "--json"], capture_output=True, text=True, timeout=120)
        assert final.returncode == 0, final.stderr
        assert json.loads(final.stdout)["flags"] == {"scored": JUDGMENTS - now}
        total_paid = paid()
    found = judgments(db, recorder.sent)
    assert len(found) == JUDGMENTS and {row[0] for row in found} == {1}  # one run, resumed
    assert not lease_held(db, "judge")
    # A call in flight at an interrupt is paid again by the next run, and only those: at
    # most CONCURRENCY per interrupt (results that had come back are stored, not repaid).
    assert JUDGMENTS <= total_paid <= JUDGMENTS + CONCURRENCY * interrupted


@pytest.mark.timeout(120)
def test_generate_and_an_audit_end_at_once_on_sigint_or_sigterm(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    recorder = Recorder()
    award = Recorder(always_group_a)
    with StubServer(latency=0.01, responder=recorder) as stub:
        config = write_config(
            tmp_path / "c.toml", stub.base_url, f"sqlite:///{db}", concurrency=CONCURRENCY
        )
        base = [*FAIRJUDGE, "--config", str(config)]
        imported = fairjudge("--config", config, "dataset", "import", SAMPLE)  # in process
        assert imported.returncode == 0, imported.stderr

        def moment(kind: str, n: int | None) -> Callable[[], bool]:
            """None: once the lease is held; n: once the stub has seen n requests more."""
            if n is None:
                return lambda: lease_held(db, kind)
            start = requests_of(stub, "gen")
            return lambda: requests_of(stub, "gen") >= start + n

        generate = [*base, "generate", "fairmonitor_sample"]
        stored = 0
        for sig, n in ((TERM, None), (INT, 6)):
            done = interrupt_when(generate, moment("generation", n), sig, bound=BOUND_S)
            check_ended(done, db, "generation")
            answers = rows(db, "SELECT run_id, item_id, part, raw_text, flag FROM response")
            assert len({a[:3] for a in answers}) == len(answers) >= stored
            assert all(text in recorder.sent and flag == "ok" for *_, text, flag in answers)
            stored = len(answers)
        final = subprocess.run(generate, capture_output=True, text=True, timeout=120)
        assert final.returncode == 0, final.stderr
        answers = rows(db, "SELECT run_id, item_id, part, raw_text FROM response")
        assert len({a[:3] for a in answers}) == len(answers) == ANSWERS
        assert {a[0] for a in answers} == {1}  # every rerun resumed the same run

        stub.state.responder = award  # the model under test now names a student
        audit = [*base, *AWARD_ARGS]
        for sig, n in ((INT, None), (TERM, 8)):
            done = interrupt_when(audit, moment("audit", n), sig, bound=BOUND_S)
            check_ended(done, db, "audit")
        final = subprocess.run([*audit, "--json"], capture_output=True, text=True, timeout=120)
        assert final.returncode == 0, final.stderr
    found = rows(db, "SELECT run_id, key, turn, raw_text, status FROM auditanswer")
    assert len({f[:3] for f in found}) == len(found) == AWARD_PROMPTS
    assert {f[0] for f in found} == {1}
    assert all(text in award.sent and status == "parsed" for *_, text, status in found)
