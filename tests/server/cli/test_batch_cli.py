"""The CLI's doors to the Batch API and the job queue: ``judge RUN --batch`` end to end
(``--no-wait``, then collecting), ``--dry-run --batch`` saying the batch price applies, the
options that contradict each other refused as usage errors, and ``--queue`` storing the job
that ``POST /api/v1/jobs`` (and ``fairjudge jobs submit``) would store, with nothing run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from judge.store.tables import AuditRun, GenerationRun, JudgeRun
from server import usecases
from server.tables import Job
from server.usecases.requests import AuditRequest, GenerateRequest, JudgeRequest
from tests.support.batch_runs import (
    batch_settings,
    judgments_by_key,
    sample_store,
    url_of,
    write_batch_config,
)
from tests.support.cli import Done, fairjudge
from tests.support.stub_batch import BatchScript, BatchStub

# The sample's first 24 items: 18 S1 items judged with ICS and 6 S2 items with TCS, PCS and
# ETCS, so 18 + 3 x 6 = 36 judgments (as tests/judge/grading/test_batch.py counts).
JUDGMENTS = 36


@pytest.fixture
def stub() -> Iterator[BatchStub]:
    with BatchStub(BatchScript(window_s=0.3)) as server:
        yield server


def _answered(engine: Engine, stub: BatchStub) -> int:
    """The sample's first 24 items answered live through the stub: the run's id."""
    settings = batch_settings(stub.base_url, url_of(engine))
    return usecases.generate(
        engine, settings, usecases.GenerateRequest(dataset="sample", limit=24)
    ).run_id


def _cli(config: Path, *args: str) -> Done:
    return fairjudge("--config", config, *args)


def test_judge_batch_through_the_cli_without_waiting_then_collecting(
    request: pytest.FixtureRequest, tmp_path: Path, stub: BatchStub
) -> None:
    engine = sample_store(request, tmp_path / "cli.db")
    gen = _answered(engine, stub)
    config = write_batch_config(tmp_path / "batch.toml", stub.base_url, url_of(engine))
    live_calls = stub.state.live_chat

    # --no-wait: the batch is created and left running; the run says so, the exit code is 0.
    first = _cli(config, "judge", str(gen), "--batch", "--no-wait")
    assert first.returncode == 0, first.stderr
    assert f"batch batch_1: in_progress, {JUDGMENTS} calls, 0 answered" in first.stdout or (
        f"batch batch_1: validating, {JUDGMENTS} calls, 0 answered" in first.stdout
    )
    assert f"note: judge run 1: {JUDGMENTS} judgments wait for batch(es)" in first.stdout

    # The same command collects it (looking every 20 ms), as JSON.
    second = _cli(config, "judge", str(gen), "--batch", "--poll-every", "0.02", "--json")
    assert second.returncode == 0, second.stderr
    got = json.loads(second.stdout)
    assert got["judgments"] == {"scored": JUDGMENTS} and got["status"] == "finished"
    assert [(b["batch_id"], b["answered"]) for b in got["batches"]] == [("batch_1", JUDGMENTS)]
    assert (stub.state.uploads, stub.state.creations) == (1, 1)
    assert stub.state.live_chat == live_calls  # every judge call went through the batch
    # Cost by hand: 36 calls of 10 prompt and 5 completion tokens at 2.00 and 8.00 per
    # million, half off: 36 x 60e-6 x 0.5.
    assert got["cost"] == pytest.approx(JUDGMENTS * 60e-6 * 0.5, rel=1e-12)
    rows = judgments_by_key(engine, got["judge_run_id"])
    assert len(rows) == JUDGMENTS and {j.status for j in rows.values()} == {"scored"}

    # Asked a third time, readable: nothing to do, no batch.
    third = _cli(config, "judge", str(gen), "--batch", "--poll-every", "0.02")
    assert third.returncode == 0, third.stderr
    assert third.stdout.startswith("judge run 1: 0 to do; nothing new; 0 live calls")
    assert stub.state.creations == 1


def test_dry_run_batch_says_the_batch_price_applies(
    request: pytest.FixtureRequest, tmp_path: Path, stub: BatchStub
) -> None:
    engine = sample_store(request, tmp_path / "cli.db")
    config = write_batch_config(tmp_path / "batch.toml", stub.base_url, url_of(engine))
    shown = _cli(config, "generate", "sample", "--limit", "24", "--dry-run", "--batch")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    (batch_line,) = [x for x in lines if x.startswith("cost at the batch price (what --batch")]
    (live_line,) = [x for x in lines if x.startswith("cost live (without --batch; not this")]
    assert lines.index(batch_line) < lines.index(live_line)
    plan = json.loads(
        _cli(config, "generate", "sample", "--limit", "24", "--dry-run", "--batch", "--json").stdout
    )
    assert plan["applies"] == "batch" and plan["calls_to_send"] == 30  # 18 + 2 x 6 parts
    # The batch figure is the live one less the batch discount (0.5 in this config).
    e = plan["estimate"]
    assert e["cost_max_batch"] == pytest.approx(e["cost_max"] * 0.5)
    assert f"at most {e['cost_max_batch']:.4f}" in batch_line
    assert f"at most {e['cost_max']:.4f}" in live_line
    # An endpoint not set up for batches is refused by the dry run too, in one line.
    plain = tmp_path / "plain.toml"
    plain.write_text(config.read_text().replace("batch = true", "batch = false"))
    refused = _cli(plain, "judge", "1", "--dry-run", "--batch")
    assert refused.returncode == 1
    assert refused.stderr.count("\n") == 1 and "set `batch = true`" in refused.stderr
    assert stub.state.uploads == 0 and stub.state.live_chat == 0


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["judge", "1", "--batch", "--max-cost", "1"], "--max-cost cannot be used with --batch"),
        (["generate", "sample", "--batch", "--max-cost", "1"], "--max-cost cannot be used"),
        (["judge", "1", "--retry-live"], "--retry-live only apply with --batch"),
        (["judge", "1", "--batch-repairs", "batch"], "--batch-repairs only apply with --batch"),
        (["audit", "names", "run", "--no-wait"], "--no-wait only apply with --batch"),
        (["generate", "sample", "--queue", "--dry-run"], "--queue cannot be used with --dry-run"),
        (["generate", "sample", "--queue", "--new"], "--queue cannot carry new: a job resumes"),
        (["audit", "names", "run", "--queue", "--design", "x.toml"], "--queue cannot carry inputs"),
    ],
)
def test_options_that_contradict_each_other_are_usage_errors(
    tmp_path: Path, args: list[str], words: str
) -> None:
    config = write_batch_config(tmp_path / "batch.toml", "http://127.0.0.1:9/v1", "sqlite://")
    done = _cli(config, *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert words in done.stderr


def _jobs(engine: Engine) -> list[Job]:
    with Session(engine) as session:
        return list(session.exec(select(Job).order_by(Job.id)))  # type: ignore[arg-type]


def _queued(config: Path, *args: str) -> dict[str, Any]:
    done = _cli(config, *args, "--queue", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_queue_stores_the_jobs_the_api_would_and_runs_nothing(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    stub: BatchStub,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = sample_store(request, tmp_path / "cli.db")
    gen = _answered(engine, stub)
    calls_before = len(stub.state.bodies)
    config = write_batch_config(tmp_path / "batch.toml", stub.base_url, url_of(engine))

    judged = _queued(config, "judge", str(gen), "--samples", "2", "--rubrics", "ICS")
    made = _queued(config, "generate", "sample", "--limit", "5", "--temperature", "0.3")
    audited = _queued(config, "audit", "names", "run", "--repeats", "2", "--limit", "40")
    # What a job stores is its request's to_params(), as POST /api/v1/jobs stores them.
    expected = [
        ("judge", JudgeRequest.build(generation_run_id=gen, samples=2, rubric_set="ICS")),
        ("generate", GenerateRequest.build(dataset="sample", limit=5, temperature=0.3)),
        ("audit", AuditRequest.build(suite="names", options={"repeats": 2}, limit=40)),
    ]
    jobs = _jobs(engine)
    assert [(j.kind, j.params, j.status, j.created_by) for j in jobs] == [
        (kind, r.to_params(), "queued", "cli") for kind, r in expected
    ]
    assert [judged["id"], made["id"], audited["id"]] == [j.id for j in jobs]
    assert {judged["runs_on"], made["runs_on"]} == {"server"}
    # `fairjudge jobs submit` (the API's fields) stores the same parameters.
    submitted = _cli(config, "jobs", "submit", "judge", json.dumps(judged["params"]), "--json")
    assert submitted.returncode == 0, submitted.stderr
    assert _jobs(engine)[-1].params == jobs[0].params

    # Nothing ran: no new run of any kind, no call at the stub.
    assert len(stub.state.bodies) == calls_before
    with Session(engine) as session:
        assert session.exec(select(JudgeRun)).all() == []
        assert session.exec(select(AuditRun)).all() == []
        assert [r.id for r in session.exec(select(GenerationRun))] == [gen]

    # --queue --batch queues the job the API or the dashboard's form stores with transport
    # batch (it was a usage error until issue 43, that row is gone from the test above); the
    # server's own worker runs it, and nothing is sent or uploaded now.
    batched = _queued(config, "judge", str(gen), "--batch", "--poll-every", "0.5")
    want = JudgeRequest.build(generation_run_id=gen, transport={"mode": "batch", "poll_s": 0.5})
    job = _jobs(engine)[-1]
    assert (job.id, job.kind, job.params, job.status) == (
        batched["id"], "judge", want.to_params(), "queued",
    )  # fmt: skip
    assert job.params["transport"]["mode"] == "batch" and batched["runs_on"] == "server"
    assert len(stub.state.bodies) == calls_before and stub.state.uploads == 0

    # With a broker, the job is handed to the Celery workers (send_job recorded here).
    sent: list[int] = []
    monkeypatch.setattr("server.jobs.celery_app.send_job", lambda settings, job: sent.append(job))
    celery = tmp_path / "celery.toml"
    celery.write_text(config.read_text() + '[workers]\nbroker_url = "redis://127.0.0.1:9/0"\n')
    readable = _cli(celery, "generate", "sample", "--limit", "5", "--queue")
    assert readable.returncode == 0, readable.stderr
    job_id = _jobs(engine)[-1].id
    assert sent == [job_id] and readable.stdout.strip() == str(job_id)
    assert f"job {job_id} queued (generate); the Celery workers" in readable.stderr
    assert f"`fairjudge jobs show {job_id}`" in readable.stderr
    # ... except a job through the Batch API: the Celery workers cannot wait off their slots,
    # so it is refused before anything is stored, in one line.
    jobs_before = len(_jobs(engine))
    refused = _cli(celery, "judge", str(gen), "--batch", "--queue")
    assert refused.returncode == 1, (refused.stdout, refused.stderr)
    assert "not on the Celery workers" in refused.stderr and sent == [job_id]
    assert len(_jobs(engine)) == jobs_before
