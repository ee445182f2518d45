"""`fairjudge jobs` on a real SQLite store: queue, list, show, cancel and resume, and a
running job whose worker stopped beating marked as such."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from click.testing import CliRunner
from sqlalchemy.engine import Engine
from sqlmodel import Session

from judge.store.tables import utcnow
from server.cli import cli
from server.tables import Job, WorkerBeat
from tests.support.factories import SAMPLE, write_config


def _run(config: Path, *args: str) -> str:
    got = CliRunner().invoke(cli, ["--config", str(config), *args])
    assert got.exit_code == 0, got.output
    return got.stdout


def test_jobs_queue_list_show_cancel_resume(tmp_path: Path, db_url: str, engine: Engine) -> None:
    config = write_config(tmp_path / "f.toml", "http://127.0.0.1:9/v1", db_url)
    _run(config, "dataset", "import", str(SAMPLE), "--name", "sample")
    fields = '{"dataset": "sample", "limit": 3}'
    made = json.loads(_run(config, "jobs", "submit", "generate", fields, "--json"))
    assert made["kind"] == "generate" and made["status"] == "queued"
    listed = json.loads(_run(config, "jobs", "--json"))
    assert [(j["id"], j["kind"], j["status"]) for j in listed] == [
        (made["id"], "generate", "queued")
    ]

    cancelled = json.loads(_run(config, "jobs", "cancel", str(made["id"]), "--json"))
    assert cancelled["status"] == "cancelled"  # queued: cancelled at once
    resumed = json.loads(_run(config, "jobs", "resume", str(made["id"]), "--json"))
    assert resumed["status"] == "queued"
    shown = json.loads(_run(config, "jobs", "show", str(made["id"]), "--json"))
    assert shown["params"]["dataset"] == "sample" and shown["params"]["limit"] == 3
    assert shown["parts"] == []

    base = ["--config", str(config), "jobs", "submit"]
    bad = CliRunner().invoke(cli, [*base, "generate", "[1]"])
    assert bad.exit_code != 0 and "JSON object" in bad.output
    missing = CliRunner().invoke(cli, [*base, "pull", '{"campaign": "c1"}'])
    assert missing.exit_code != 0 and "no campaign named 'c1'" in str(missing.exception)
    assert len(json.loads(_run(config, "jobs", "--json"))) == 1  # nothing more queued


def test_a_running_job_whose_worker_went_quiet_is_marked(
    tmp_path: Path, db_url: str, engine: Engine
) -> None:
    config = write_config(tmp_path / "f.toml", "http://127.0.0.1:9/v1", db_url)
    now = utcnow()
    with Session(engine) as session:
        # One worker beat 2 s ago, one 60 s ago; the default silence limit is 15 s.
        session.add(WorkerBeat(worker="a:1", started_at=now, beat_at=now - timedelta(seconds=2)))
        session.add(WorkerBeat(worker="b:2", started_at=now, beat_at=now - timedelta(seconds=60)))
        session.add(Job(kind="pull", params={"campaign": "x"}, status="running", worker="a:1"))
        session.add(Job(kind="pull", params={"campaign": "y"}, status="running", worker="b:2"))
        session.commit()
    rows = json.loads(_run(config, "jobs", "--json"))
    assert {j["worker"]: j["worker_state"] for j in rows} == {"a:1": "beating", "b:2": "silent"}
    assert "b:2 (silent)" in _run(config, "jobs")


def test_jobs_show_says_who_works_on_a_split_job_and_where_its_parts_stand(
    tmp_path: Path, db_url: str, engine: Engine
) -> None:
    from server.tables import JobPart

    config = write_config(tmp_path / "f.toml", "http://127.0.0.1:9/v1", db_url)
    now = utcnow()
    with Session(engine) as session:
        session.add(WorkerBeat(worker="a:1", started_at=now, beat_at=now - timedelta(seconds=2)))
        session.add(WorkerBeat(worker="b:2", started_at=now, beat_at=now - timedelta(seconds=60)))
        job = Job(kind="judge", params={"generation_run_id": 1}, status="running", worker="c:3")
        session.add(job)
        session.commit()
        assert job.id is not None
        # Parts by hand: 0 done, 1 on a:1, 2 on b:2 (silent), 3 queued: 1 done, 2 running, 1 left.
        for number, (status, worker) in enumerate(
            [("done", None), ("running", "a:1"), ("running", "b:2"), ("queued", None)]
        ):
            session.add(JobPart(job_id=job.id, number=number, item_ids=[number],
                                status=status, worker=worker))  # fmt: skip
        session.commit()
        job_id = job.id
    shown = json.loads(_run(config, "jobs", "show", str(job_id), "--json"))
    assert shown["work"]["workers"] == ["a:1", "b:2 (silent)"]
    assert (shown["work"]["parts_done"], shown["work"]["parts_running"]) == (1, 2)
    assert (shown["work"]["parts_left"], shown["work"]["parts"]) == (1, 4)
    text = _run(config, "jobs", "show", str(job_id))
    assert "parts: 1 done, 2 running, 1 left; workers: a:1, b:2 (silent)" in text
    listed = json.loads(_run(config, "jobs", "--json"))
    assert (listed[0]["parts_running"], listed[0]["workers"]) == (2, ["a:1", "b:2 (silent)"])
