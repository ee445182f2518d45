"""A judge job whose ``transport`` is batch, queued as ``POST /api/v1/jobs`` queues it: it
submits its batch, goes back to the queue with a "not before" time instead of waiting in a
worker's slot, shows its batches' state in its result, and after ``kill -9`` of its worker
at each step of the batch's life is taken up again and ends with exactly one judgment per
item x rubric, the batch uploaded and created once (the stub counts both).

The worker is a real subprocess (tests/support/batch_job.py, ``run_job`` as the server's
worker calls it); the stub holds its reply at the chosen step until the process is dead,
so the kill lands exactly there (as tests/judge/grading/test_batch_kills.py does for the
CLI)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from judge.config import Settings, load_settings
from judge.errors import ConfigError, InvalidInputError
from judge.store.engine import make_engine
from judge.store.tables import BatchJob
from server import usecases
from server.jobs.queue import Worker, submit
from server.jobs.running import run_job
from server.queries import runnable_job_ids
from server.tables import Job
from tests.support import stores
from tests.support.batch_runs import batch_settings, judgments_by_key, write_batch_config
from tests.support.stub_batch import BatchScript, BatchStub

ROOT = Path(__file__).resolve().parents[3]
LIMIT = 24
JUDGMENTS = 36  # 18 S1 items x ICS + 6 S2 items x (TCS, PCS, ETCS), as in test_batch_kills.py
POLL_S = 0.05
WAITING_POLL_S = 30.0
"""The look-again time of the job that waits in the slot test: longer than the test."""

# (step the stub holds, before or after doing it, the batch job's state the kill leaves)
KILLS = [
    ("create", "before", "uploaded"),  # the file's id written down, no batch yet
    ("poll", "before", "submitted"),  # the batch's id written down, being looked at
    ("download", "after", "submitted"),  # the output read at the provider, never stored
]


@pytest.fixture
def store(sample_template: Path, tmp_path: Path) -> Iterator[tuple[Engine, str]]:
    url = stores.copy_store(sample_template, tmp_path / "jobs.db")
    engine = make_engine(url)
    yield engine, url
    engine.dispose()


def _queue(engine: Engine, settings: Settings, gen: int, poll_s: float = POLL_S) -> int:
    """A judge job of ``gen`` through the Batch API, queued as the job API queues it."""
    params = {"generation_run_id": gen, "transport": {"mode": "batch", "poll_s": poll_s}}
    job = submit(engine, "judge", params, created_by="test", settings=settings)
    assert job.id is not None
    return job.id


def _job(engine: Engine, job_id: int) -> Job:
    with Session(engine) as session:
        job = session.get(Job, job_id)
        assert job is not None
        session.expunge(job)
        return job


def _until_due(engine: Engine, job_id: int) -> None:
    """Wait until the job's "not before" has passed."""
    due = _job(engine, job_id).not_before or 0.0
    time.sleep(max(0.0, due - time.time()) + 0.01)


def _worker(config: Path, job_id: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.batch_job", str(config), "-"],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.write(f"{job_id}\n".encode())
    proc.stdin.flush()
    return proc


def _kill_at_the_held_step(stub: BatchStub, engine: Engine, config: Path, job_id: int) -> None:
    """Workers take the job, one after another as it comes due, until one reaches the step
    the stub holds: that one is SIGKILLed there."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        proc = _worker(config, job_id)
        while proc.poll() is None and not stub.state.held.wait(0.01):
            pass
        if stub.state.held.is_set():
            proc.kill()  # SIGKILL: no cleanup of any kind runs
            proc.communicate(timeout=30)
            stub.release()
            return
        out, err = proc.communicate()
        assert out.decode().split() == ["waiting"], err.decode()[-2000:]
        _until_due(engine, job_id)
    pytest.fail("no worker reached the held step")


def _run_to_the_end(engine: Engine, settings: Settings, job_id: int) -> list[str]:
    """This process's worker takes the job each time it comes due, until it ends."""
    seen: list[str] = []
    for _ in range(200):
        status = run_job(engine, settings, job_id)
        seen.append(status)
        if status != "waiting":
            return seen
        _until_due(engine, job_id)
    pytest.fail(f"the job never ended: {seen[-5:]}")


@pytest.mark.parametrize(("step", "when", "left"), KILLS)
def test_a_queued_batch_job_killed_at_a_step_resumes_and_never_sends_twice(
    tmp_path: Path, store: tuple[Engine, str], step: str, when: str, left: str
) -> None:
    engine, url = store
    with BatchStub(BatchScript(window_s=0.1)) as stub:
        config = write_batch_config(tmp_path / "batch.toml", stub.base_url, url)
        settings = load_settings(config)
        gen = usecases.generate(
            engine, settings, usecases.GenerateRequest(dataset=stores.SAMPLE_DATASET, limit=LIMIT)
        ).run_id
        job_id = _queue(engine, settings, gen)
        stub.hold(step, when)
        _kill_at_the_held_step(stub, engine, config, job_id)
        with Session(engine) as session:
            assert [j.state for j in session.exec(select(BatchJob)).all()] == [left]

        seen = _run_to_the_end(engine, settings, job_id)
        assert (stub.state.uploads, stub.state.creations) == (1, 1)  # one batch, sent once
    assert seen[-1] == "finished"
    job = _job(engine, job_id)
    assert job.status == "finished" and job.not_before is None
    run_id = job.result["judge_run_id"]
    rows = judgments_by_key(engine, run_id)
    # 36 = 18 S1 items x 1 rubric + 6 S2 items x 3 rubrics (the sample's first 24 items).
    assert len(rows) == JUDGMENTS and {j.status for j in rows.values()} == {"scored"}
    batches = job.result["batch"]["batches"]
    assert [(b["status"], b["calls"], b["answered"]) for b in batches] == [
        ("completed", JUDGMENTS, JUDGMENTS)
    ]
    with Session(engine) as session:
        jobs = session.exec(select(BatchJob)).all()
    assert [(j.state, j.calls, j.answered) for j in jobs] == [("collected", JUDGMENTS, JUDGMENTS)]


def test_a_batch_job_waits_in_the_queue_not_in_a_slot_and_shows_its_batch(
    tmp_path: Path, store: tuple[Engine, str]
) -> None:
    engine, url = store
    # A window far longer than the test: the batch is still running at every look.
    with BatchStub(BatchScript(window_s=600)) as stub:
        config = write_batch_config(tmp_path / "batch.toml", stub.base_url, url)
        settings = load_settings(config)
        gen = usecases.generate(
            engine, settings, usecases.GenerateRequest(dataset=stores.SAMPLE_DATASET, limit=LIMIT)
        ).run_id
        job_id = _queue(engine, settings, gen, poll_s=WAITING_POLL_S)
        live = submit(engine, "judge", {"generation_run_id": gen}, settings=settings)

        before = time.time()
        assert run_job(engine, settings, job_id) == "waiting"
        job = _job(engine, job_id)
        # Back in the queue, due poll_s after its look, its batch's state in its result.
        assert job.status == "queued" and job.not_before is not None
        assert before + WAITING_POLL_S <= job.not_before <= time.time() + WAITING_POLL_S
        (batch,) = job.result["batch"]["batches"]
        assert batch["status"] == "in_progress" and batch["calls"] == JUDGMENTS
        assert job.result["batch"]["pending"] == JUDGMENTS
        # Not due: a worker's look at the queue skips it, and takes the live job queued
        # after it; once due, it is taken again.
        with Session(engine) as session:
            assert runnable_job_ids(session, now=job.not_before - 0.001) == [live.id]
            assert runnable_job_ids(session, now=job.not_before) == [job_id, live.id]
        worker = Worker(engine, settings, threading.Event())  # the server's own worker
        assert list(worker._candidates({})) == [live.id]
        # Taken again (the worker's look at the queue, not run_job, heeds not_before), it
        # finds the same batch: nothing is uploaded or created again.
        assert run_job(engine, settings, job_id) == "waiting"
        assert (stub.state.uploads, stub.state.creations) == (1, 1)


# -- over HTTP, and the refusals before anything is queued ----------------------------------


def _api(settings: Settings) -> tuple[Any, dict[str, str]]:
    from server import create_app
    from server.auth import create_key

    engine = make_engine(settings.database_url)
    _, admin = create_key(engine, "admin", "admin")
    engine.dispose()
    app = create_app({"SETTINGS": settings, "TESTING": True})
    return app.test_client(), {"Authorization": f"Bearer {admin}"}


def test_a_batch_generate_job_queued_over_http_ends_with_every_answer_and_its_batch(
    tmp_path: Path, store: tuple[Engine, str]
) -> None:
    from judge.store.tables import Response

    engine, url = store
    with BatchStub(BatchScript(window_s=0.05)) as stub:
        settings = batch_settings(stub.base_url, url)
        client, admin = _api(settings)
        body = {"kind": "generate", "params": {"dataset": stores.SAMPLE_DATASET, "limit": 6,
                "transport": {"mode": "batch", "poll_s": POLL_S}}}  # fmt: skip
        made = client.post("/api/v1/jobs", json=body, headers=admin)
        assert made.status_code == 201, made.get_json()
        job_id = made.get_json()["id"]
        assert made.get_json()["params"]["transport"]["mode"] == "batch"
        seen = _run_to_the_end(engine, settings, job_id)
        assert (stub.state.uploads, stub.state.creations, stub.state.live_chat) == (1, 1, 0)
        shown = client.get(f"/api/v1/jobs/{job_id}", headers=admin).get_json()
    assert seen[-1] == "finished" and shown["status"] == "finished"
    assert shown["not_before"] is None
    # 6 items of the sample: its first six are S1 items, one answer part each (docs/datasets.md).
    with Session(engine) as session:
        flags = session.exec(
            select(Response.flag).where(Response.run_id == shown["result"]["generation_run_id"])
        ).all()
    assert len(flags) == 6 and "error" not in flags
    (batch,) = shown["result"]["batch"]["batches"]
    assert (batch["status"], batch["calls"], batch["answered"]) == ("completed", 6, 6)


@pytest.mark.parametrize(
    ("endpoint", "workers", "said"),
    [
        ({"batch": False}, {}, "`batch = true` under [endpoints.test]"),
        ({}, {"broker_url": "redis://127.0.0.1:1/0"}, "not on the Celery workers"),
    ],
)
def test_a_batch_job_that_could_not_run_so_is_refused_before_it_is_queued(
    tmp_path: Path,
    store: tuple[Engine, str],
    endpoint: dict[str, Any],
    workers: dict[str, Any],
    said: str,
) -> None:
    engine, url = store
    settings = batch_settings("http://127.0.0.1:9", url, **endpoint)
    settings = settings.model_copy(update={"workers": settings.workers.model_copy(update=workers)})
    params = {"dataset": stores.SAMPLE_DATASET, "transport": {"mode": "batch"}}
    # ConfigError (the endpoint) or InvalidInputError (the workers): both a 400 over HTTP.
    with pytest.raises((ConfigError, InvalidInputError)) as refused:
        submit(engine, "generate", params, settings=settings)
    assert said in str(refused.value) and "\n" not in str(refused.value)
    with Session(engine) as session:
        assert session.exec(select(Job)).all() == []  # nothing queued
    if not workers:  # the same job live is queued: the refusal is the transport's
        live = {"dataset": stores.SAMPLE_DATASET}
        assert submit(engine, "generate", live, settings=settings).id is not None


def test_the_job_form_offers_batch_only_where_an_endpoint_has_the_batch_api(
    store: tuple[Engine, str],
) -> None:
    from server.dashboard import job_form
    from server.usecases.transport import transport_choices

    _, url = store
    offered = batch_settings("http://127.0.0.1:9", url)
    plain = batch_settings("http://127.0.0.1:9", url, batch=False)
    assert [v for v, _ in transport_choices(offered)] == ["live", "batch"]
    assert [v for v, _ in transport_choices(plain)] == ["live"]
    choices = {"transport": lambda: transport_choices(offered)}
    (field,) = [f for f in job_form.job_form_fields("judge", choices) if f.name == "transport"]
    assert field.widget == "select"
    assert [v for v, _ in field.choices] == ["", "live", "batch"]  # "": the default (live)
    posted = job_form.parse("judge", {"generation_run_id": "3", "transport": "batch"}, choices)
    assert posted.transport is not None and posted.transport.mode == "batch"  # type: ignore[attr-defined]
    left = job_form.parse("judge", {"generation_run_id": "3"}, choices)
    assert left.transport is None  # type: ignore[attr-defined]


def test_a_transport_refuses_batch_tuning_when_live_and_a_cost_bound_when_batch() -> None:
    from server.usecases.requests import GenerateRequest, JudgeRequest

    with pytest.raises(InvalidInputError, match="retry_live, poll_s only apply with mode"):
        JudgeRequest.build(
            generation_run_id=1, transport={"mode": "live", "retry_live": True, "poll_s": 5}
        )
    with pytest.raises(InvalidInputError, match="--max-cost cannot be used with --batch"):
        GenerateRequest.build(dataset="d", max_cost=1.0, transport={"mode": "batch"})
    with pytest.raises(InvalidInputError, match="repairs"):  # generation has no repairs
        GenerateRequest.build(dataset="d", transport={"mode": "batch", "repairs": "batch"})
    kept = JudgeRequest.build(
        generation_run_id=1, transport={"mode": "batch", "repairs": "batch", "wait": False}
    )
    assert kept.to_params()["transport"] == {
        "mode": "batch", "retry_live": False, "wait": False, "poll_s": 30.0, "repairs": "batch"
    }  # fmt: skip


def test_a_batch_audit_job_stores_every_prompt_answered_through_one_batch(
    tmp_path: Path, store: tuple[Engine, str]
) -> None:
    from judge.store.tables import AuditAnswer

    engine, url = store
    with BatchStub(BatchScript(window_s=0.05)) as stub:
        settings = batch_settings(stub.base_url, url)
        params = {"suite": "names", "options": {"repeats": 1}, "limit": 5,
                  "transport": {"mode": "batch", "poll_s": POLL_S}}  # fmt: skip
        job = submit(engine, "audit", params, settings=settings)
        assert job.id is not None
        seen = _run_to_the_end(engine, settings, job.id)
        assert (stub.state.uploads, stub.state.creations, stub.state.live_chat) == (1, 1, 0)
    # The stub's replies hold no amount, so the names audit reads none of them: the run is
    # unusable and the job ends failed saying so, as a live job on the same replies ends.
    ended = _job(engine, job.id)
    assert seen[-1] == "failed" and "is unusable: 5 of 5 answers unreadable" in (ended.error or "")
    result = ended.result
    assert result is not None
    with Session(engine) as session:
        rows = session.exec(
            select(AuditAnswer).where(AuditAnswer.run_id == result["audit_run_id"])
        ).all()
    # limit 5: the design's first five prompts, one answer each (the names audit has no
    # second turn), every one answered by the batch (read, not a failed call).
    assert [r.status for r in rows] == ["unparsed"] * 5
    (batch,) = result["batch"]["batches"]
    assert (batch["status"], batch["calls"], batch["answered"]) == ("completed", 5, 5)
