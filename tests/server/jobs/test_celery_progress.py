"""A split run's progress on real Celery workers (Redis, PostgreSQL, the scripted stub):
sampled while two workers share the run, and after one of them is killed mid-part.

The expected counts come from elsewhere than the code under test: the judgments the run
must hold are those the same judge run makes unsplit in one process on SQLite
(``_expected``), and each sample is checked against the judgments the store holds at that
moment, counted by a plain query here, not by the progress code.
"""

from __future__ import annotations

import json
import signal
import time
import tomllib
from collections import Counter
from pathlib import Path

from sqlalchemy import func
from sqlmodel import Session, col, select

from judge.store.tables import Judgment
from server import create_app
from server.auth import create_key
from server.jobs import queue
from server.tables import Job, JobPart
from tests.server.jobs.test_celery import (
    ITEMS,
    Workers,
    _answered_store,
    _beating,
    _expected,
    _wait,
    broker,  # noqa: F401 (the fixture)
)
from tests.support.redis_server import PrivateRedis
from tests.support.stub_openai import StubServer

ROOT = Path(__file__).resolve().parents[3]


def _stored_by_item(session: Session, run_id: int | None) -> Counter[int]:
    if run_id is None:
        return Counter()
    rows = session.execute(
        select(Judgment.item_id, func.count())
        .where(col(Judgment.judge_run_id) == run_id)
        .group_by(col(Judgment.item_id))
    ).all()
    return Counter({int(item): int(n) for item, n in rows})


def _hand_work() -> dict[int, int]:
    """Judgments each of the first ITEMS items ends with, read off the data files, not the
    code under test: rubrics whose ``applies_to`` names the item's stage (prompts/rubrics.toml)
    x 1 sample (the default). Item ids are 1..N in file order (an empty store)."""
    rubrics = tomllib.loads((ROOT / "prompts" / "rubrics.toml").read_text())
    per_stage = Counter(
        stage for r in rubrics.values() if isinstance(r, dict) for stage in r["applies_to"]
    )
    lines = (ROOT / "datasets" / "fairmonitor_sample.jsonl").read_text().splitlines()[:ITEMS]
    return {n: per_stage[json.loads(line)["stage"]] for n, line in enumerate(lines, start=1)}


def test_hand_work_is_the_sample_by_stage() -> None:
    # By hand: 18 S1 x ICS, 18 S2 x (TCS, PCS, ETCS), 18 S3 x SBAS, 6 S4 x ICS = 96.
    assert sum(_hand_work().values()) == 18 + 18 * 3 + 18 + 6 == 96


def test_split_progress_counts_the_runs_judgments_once_through_a_kill(
    tmp_path: Path,
    pg_url: str,
    broker: PrivateRedis,  # noqa: F811
) -> None:
    with StubServer(latency=0.05) as stub:
        expected = _expected(tmp_path, stub)
    # Judgments each item must end with, from the unsplit run; the same by hand.
    slots = Counter(item for item, _, _ in expected)
    hand = _hand_work()
    assert dict(slots) == hand
    whole = sum(hand.values())  # 96

    with StubServer(latency=0.05) as stub:
        config, settings, engine = _answered_store(tmp_path, stub, pg_url, broker.url)
        workers = Workers(config, tmp_path)
        samples: list[tuple[int, int, int]] = []  # (job done, job total, stored) mid-run
        totals: list[int] = []  # the job's total at every sample once its parts exist
        killed = False
        try:
            first, second = workers.start(), workers.start()
            _wait(lambda: _beating(engine, {first.pid, second.pid}), "both workers beating",
                  workers)  # fmt: skip
            job = queue.submit(engine, "judge", {"generation_run_id": 1}, settings=settings)
            deadline = time.monotonic() + 150
            while True:
                assert time.monotonic() < deadline, workers.logs()[-4000:]
                # Progress first, the store after: judgments are only ever added, so what
                # a part says it did can never be more than what the store holds next.
                with Session(engine) as session:
                    row = session.get(Job, job.id)
                    assert row is not None
                    status, done, total = row.status, row.done, row.total or 0
                    parts = session.exec(select(JobPart).where(JobPart.job_id == job.id)).all()
                    seen = [(p.number, p.done, p.total, set(p.item_ids), p.worker, p.status)
                            for p in parts]  # fmt: skip
                    run_id = (row.result or {}).get("judge_run_id")
                with Session(engine) as session:
                    stored = _stored_by_item(session, run_id)
                for number, p_done, p_total, items, _, _ in seen:
                    own = sum(hand[i] for i in items)
                    held = sum(stored[i] for i in items)
                    # Seeded when the parts were opened: the part's whole work from the start.
                    assert p_total == own, f"part {number} says {p_total} of its {own}"
                    assert p_done <= held, f"part {number} says {p_done}, {held} stored"
                # The run's whole work as soon as its parts exist (none before: not opened).
                assert total == (whole if seen else 0), (done, total, whole, len(seen))
                if seen:
                    totals.append(total)
                assert done <= sum(stored.values()), (done, sum(stored.values()))
                if status in ("finished", "failed", "cancelled"):
                    break
                if 0 < done < len(expected):
                    samples.append((done, total, sum(stored.values())))
                if not killed and any(
                    w and w.endswith(f":{first.pid}") and s == "running" and d > 0
                    for _, d, _, _, w, s in seen
                ):
                    first.send_signal(signal.SIGKILL)  # while its part reports progress
                    first.wait()
                    killed = True
                time.sleep(0.05)
        finally:
            workers.stop()

        assert killed, "the first worker never ran a part"
        # The first sample with parts and every later one held the whole total (checked in
        # the loop; here: that there were such samples).
        assert totals and set(totals) == {whole}, totals
        # Several moments seen mid-run (the run takes seconds, sampled every 50 ms).
        assert len(samples) >= 3, samples
        with Session(engine) as session:
            got = session.get(Job, job.id)
            assert got is not None and got.status == "finished", (got, workers.logs()[-3000:])
            parts = session.exec(select(JobPart).where(JobPart.job_id == job.id)).all()
            stored_total = session.exec(select(func.count()).select_from(Judgment)).one()
        # The killed worker's part was run again: its count replaced, not added to.
        assert stored_total == len(expected)
        assert (got.done, got.total) == (len(expected), len(expected))
        for p in parts:
            own = sum(slots[i] for i in p.item_ids)
            assert (p.done, p.total) == (own, own), p.number
        # The API says the same.
        app = create_app({"SETTINGS": settings})
        _, key = create_key(engine, "reader", "member")
        shown = app.test_client().get(
            f"/api/v1/jobs/{job.id}", headers={"Authorization": f"Bearer {key}"}
        )
        assert shown.status_code == 200, shown.json
        assert (shown.json["done"], shown.json["total"]) == (len(expected), len(expected))
        app.extensions["fairjudge_engine"].dispose()
        engine.dispose()
