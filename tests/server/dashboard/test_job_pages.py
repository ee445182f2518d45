"""The dashboard's job list and job page show who works on a job and where its parts stand,
read from the same model as `fairjudge jobs show` (server.usecases.job_view).

The job and its parts are written here by hand, so the expected counts are read off the rows
below: parts 0 done, 1 running on a:1 (beat 2 s ago), 2 running on b:2 (beat 60 s ago:
silent past the 15 s default), 3 failed with an error; so 1 done, 2 running, 1 left.
"""

from __future__ import annotations

from datetime import timedelta

from flask.testing import FlaskClient
from sqlmodel import Session

from judge.store.tables import utcnow
from server.tables import Job, JobPart, WorkerBeat
from tests.server.dashboard.helpers import Store


def _split_job(store: Store, a: str, b: str) -> int:
    """A running split job; ``a`` and ``b``: the two workers' names (the store is shared by
    the module's tests, and a worker's name is unique)."""
    now = utcnow()
    with Session(store.engine) as session:
        session.add(WorkerBeat(worker=a, started_at=now, beat_at=now - timedelta(seconds=2)))
        session.add(WorkerBeat(worker=b, started_at=now, beat_at=now - timedelta(seconds=60)))
        job = Job(
            kind="judge", params={"generation_run_id": store.generation_run_id},
            status="running", worker="c:3", done=13, total=32,
        )  # fmt: skip
        session.add(job)
        session.commit()
        assert job.id is not None
        rows = [
            ("done", None, 8, 8, None),
            ("running", a, 3, 8, None),
            ("running", b, 2, 8, None),
            ("failed", None, 0, 8, "endpoint down"),
        ]
        for number, (status, worker, done, total, error) in enumerate(rows):
            session.add(
                JobPart(
                    job_id=job.id, number=number, item_ids=list(range(8 * number, 8 * number + 8)),
                    status=status, worker=worker, done=done, total=total, error=error,
                )
            )  # fmt: skip
        session.commit()
        return job.id


def test_the_job_page_shows_workers_parts_and_the_last_error(
    signed_in: FlaskClient, store: Store
) -> None:
    job_id = _split_job(store, "a:1", "b:2")
    for path in (f"/jobs/{job_id}", f"/live/jobs/{job_id}"):
        page = signed_in.get(path).text
        assert 'Workers: <span data-k="workers">a:1, b:2 (silent)</span>' in page, page
        assert '<span data-k="parts_done">1</span> done' in page
        assert '<span data-k="parts_running">2</span> running' in page
        assert '<span data-k="parts_left">1</span> left, of 4' in page
        assert 'last part error: <span data-k="part_error">endpoint down</span>' in page
        assert page.count('<tr data-part="') == 4
        # done of total: the job's own sums (8 + 3 + 2 + 0 of 4 x 8)
        assert '<span data-k="done">13</span> of <span data-k="total">32</span>' in page


def test_the_job_list_shows_workers_and_parts(signed_in: FlaskClient, store: Store) -> None:
    job_id = _split_job(store, "a:11", "b:22")
    for path in ("/jobs", "/live/jobs"):
        page = signed_in.get(path).text
        row = page[page.index(f'<tr data-job="{job_id}">') :]
        row = row[: row.index("</tr>")]
        assert '<td data-k="workers">a:11, b:22 (silent)</td>' in row, row
        assert '<td data-k="parts">1 done, 2 running, 1 left</td>' in row, row


def test_a_job_that_is_not_split_shows_its_own_worker_and_no_parts(
    signed_in: FlaskClient, store: Store
) -> None:
    now = utcnow()
    with Session(store.engine) as session:
        session.add(WorkerBeat(worker="d:4", started_at=now, beat_at=now))
        job = Job(kind="pull", params={"campaign": "x"}, status="running", worker="d:4")
        session.add(job)
        session.commit()
        job_id = job.id
    page = signed_in.get(f"/jobs/{job_id}").text
    assert 'Worker: <span data-k="workers">d:4</span>' in page
    assert 'id="job-parts"' not in page
