"""A whole project is read through an export snapshot that Label Studio builds while we wait
(issue 41): a real Label Studio slowed down mid-export (stopped and let go again, each stop
shorter than ``timeout_s``, as a CPU-starved server answers) is waited for and gives the
same tasks as its own synchronous export; one that stops mid-export (SIGSTOP kept) ends the
pull with one clear line and the store as it was, and the next pull completes.

The session's Label Studio is stopped with SIGSTOP and always let go (SIGCONT) in a
``finally``: the other modules share it.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from annotation.errors import LabelStudioError
from annotation.labelstudio import interface
from annotation.labelstudio.campaigns import create_campaign
from annotation.labelstudio.client import LabelStudioClient, Snapshot
from annotation.labelstudio.pull import pull_campaign
from annotation.labelstudio.service import LabelStudioService
from judge import paths
from judge.grading.rubrics import load_rubrics
from judge.store.engine import session_scope
from judge.store.tables import HumanRating

CONFIG = (
    '<View><Text name="text" value="$text"/>'
    '<Choices name="score" toName="text"><Choice value="1"/><Choice value="2"/></Choices></View>'
)
N_TASKS = 600
FIRST_STOP_AFTER_S = 0.2  # the create request is on its way, Label Studio not done with it


def test_the_limit_is_timeout_s_plus_60_s_per_1000_tasks() -> None:
    client = LabelStudioClient("http://127.0.0.1:9", "x" * 40, timeout_s=30)
    # By hand: 30 + 60 x 2,234 / 1,000 = 164.04 s for the campaign of issue 41, whose export
    # took 48 s on a busy machine (the old 5 s per 1,000 gave 41.2 s and failed 3 pulls in 4);
    # 30 + 60 x 12.632 = 787.92 s for the project of issue 25. The bound holds only while
    # Label Studio answers every status request.
    assert client.export_timeout(2_234) == pytest.approx(164.04)
    assert client.export_timeout(12_632) == pytest.approx(787.92)
    assert client.export_timeout(0) == 30


def _pid(labelstudio: LabelStudioService) -> int:
    pid = labelstudio.status().pid
    assert pid is not None
    return pid


@contextmanager
def _let_go(pid: int) -> Iterator[None]:
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


@pytest.fixture(scope="module")
def big_project(labelstudio: LabelStudioService) -> Iterator[tuple[LabelStudioClient, int]]:
    """A project of N_TASKS tasks, each with one annotation; the last one's is skipped."""
    found = labelstudio.connection()
    admin = LabelStudioClient(found.url, found.token, timeout_s=60)
    project = admin.create_project(
        title="FairJudge export under load", description="", label_config=CONFIG, overlap=1
    )
    me = admin.whoami()["id"]
    tasks = [
        {
            "data": {"text": f"task {n}"},
            "annotations": [
                {
                    "result": [
                        {
                            "from_name": "score",
                            "to_name": "text",
                            "type": "choices",
                            "value": {"choices": [str(1 + n % 2)]},
                        }
                    ],
                    "completed_by": me,
                    "was_cancelled": n == N_TASKS - 1,
                }
            ],
        }
        for n in range(N_TASKS)
    ]
    for start in range(0, N_TASKS, 500):
        admin._sdk.projects.import_tasks(project, request=tasks[start : start + 500])
    try:
        yield admin, project
    finally:
        admin.delete_project(project)


def _own_export(admin: LabelStudioClient, project: int) -> dict[int, list[tuple[int, bool]]]:
    """Label Studio's own synchronous export, read straight through the SDK: task id ->
    (annotation id, skipped) pairs."""
    chunks = admin._sdk.projects.exports.download_sync(
        project, export_type="JSON", download_all_tasks=True, request_options={"timeout": 120}
    )
    return _shape(json.loads(b"".join(chunks)))


def _shape(tasks: list[dict[str, Any]]) -> dict[int, list[tuple[int, bool]]]:
    return {
        int(t["id"]): sorted((int(a["id"]), bool(a.get("was_cancelled"))) for a in t["annotations"])
        for t in tasks
    }


class _Throttled(LabelStudioClient):
    """Stops Label Studio once for longer than ``timeout_s`` just after the export is asked
    for, then for ``stop_s`` and lets it run for ``run_s``, over and over, until it is read:
    a server starved of CPU."""

    def __init__(self, url: str, token: str, pid: int, *, timeout_s: float) -> None:
        super().__init__(url, token, timeout_s=timeout_s)
        self.pid, self.done = pid, threading.Event()
        self.create_timed_out = False
        self.cycles = 0

    def _throttle(self, first_stop_s: float, stop_s: float, run_s: float) -> None:
        # The first stop outlasts timeout_s, so the create request (sent FIRST_STOP_AFTER_S
        # before it) times out whatever the machine's speed: a fast machine builds 600 tasks
        # in about a second, inside a 3 s limit, and the wait by title went untried (CI).
        time.sleep(FIRST_STOP_AFTER_S)
        os.kill(self.pid, signal.SIGSTOP)
        time.sleep(first_stop_s)
        os.kill(self.pid, signal.SIGCONT)
        self.cycles += 1
        self.done.wait(run_s)
        while not self.done.is_set():
            os.kill(self.pid, signal.SIGSTOP)
            time.sleep(stop_s)
            os.kill(self.pid, signal.SIGCONT)
            self.cycles += 1
            self.done.wait(run_s)

    def create_snapshot(self, project_id: int, title: str) -> Snapshot:
        first = self.timeout_s + 0.5
        threading.Thread(target=self._throttle, args=(first, 1.0, 0.5), daemon=True).start()
        try:
            return super().create_snapshot(project_id, title)
        except LabelStudioError:
            self.create_timed_out = True
            raise


def test_a_label_studio_slowed_mid_export_is_waited_for(
    labelstudio: LabelStudioService, big_project: tuple[LabelStudioClient, int]
) -> None:
    admin, project = big_project
    pid = _pid(labelstudio)
    # timeout_s 3 s: the first stop (3.5 s) outlasts the create request; every later stop
    # (1 s) is shorter, so every status request is answered, late.
    slow = _Throttled(admin.url, labelstudio.connection().token, pid, timeout_s=3.0)
    lines: list[str] = []
    with _let_go(pid):
        started = time.monotonic()
        try:
            got = slow.export_tasks(project, tasks=N_TASKS, progress=lines.append)
        finally:
            slow.done.set()
        took = time.monotonic() - started
    # The export outlived one request's limit: the create request, bounded by timeout_s,
    # timed out (Label Studio builds the snapshot inside it) and the wait went on; the old
    # single request, bounded by timeout_s + 5 s per 1,000 tasks (3 + 3 = 6 s by hand), gave
    # up in the same way whenever the export took longer than that.
    # The long first stop counts as a cycle; a fast machine may finish before the next one.
    assert slow.create_timed_out and slow.cycles >= 1
    assert took > slow.timeout_s
    theirs = _own_export(admin, project)
    assert _shape(got) == theirs
    assert len(theirs) == N_TASKS
    # The skipped annotation is in the snapshot, as in the synchronous export.
    assert sum(skipped for anns in theirs.values() for _, skipped in anns) == 1
    assert all(line.startswith("Label Studio is building the export") for line in lines)


class _StopsMidExport(LabelStudioClient):
    """Stops Label Studio (SIGSTOP, kept) the moment the export is asked for."""

    def __init__(self, url: str, token: str, pid: int, *, timeout_s: float) -> None:
        super().__init__(url, token, timeout_s=timeout_s)
        self.pid = pid

    def create_snapshot(self, project_id: int, title: str) -> Snapshot:
        os.kill(self.pid, signal.SIGSTOP)
        return super().create_snapshot(project_id, title)


def _stored(engine: Engine) -> set[tuple[int, str, str, float]]:
    with Session(engine) as s:
        return {(r.item_id, r.rubric, r.rater, r.score) for r in s.exec(select(HumanRating))}


def test_a_label_studio_that_stops_mid_export_ends_the_pull_with_one_line(
    labelstudio: LabelStudioService, store: tuple[Engine, int, int]
) -> None:
    engine, _, judge_run = store
    found = labelstudio.connection()
    admin = LabelStudioClient(found.url, found.token)
    rubrics = load_rubrics(paths.prompts_dir())
    with session_scope(engine) as session:
        made = create_campaign(
            session, admin, rubrics, judge_run_id=judge_run, rubrics=["ICS"], size=3,
            annotators=1, seed=5, name="stops-mid-export",
        )  # fmt: skip
        project = made.campaign.ls_project_id
    assert project is not None
    tasks = sorted(admin.export_tasks(project), key=lambda t: t["id"])
    name = interface.control_name(interface.SCORE, "ICS")
    config = ET.fromstring(admin._sdk.projects.get(project).label_config or "")
    to = next(e.get("toName", "") for e in config.iter() if e.get("name") == name)

    def rate(task: dict[str, Any], value: int) -> None:
        admin.annotate(
            task["id"],
            [{"from_name": name, "to_name": to, "type": "choices",
              "value": {"choices": [str(value)]}}],
        )  # fmt: skip

    rate(tasks[0], 4)
    with session_scope(engine) as session:
        assert pull_campaign(session, admin, "stops-mid-export").added == 1
    before = _stored(engine)
    rate(tasks[1], 2)  # something new: the next pull reads the export
    pid = _pid(labelstudio)
    stopping = _StopsMidExport(found.url, found.token, pid, timeout_s=1.5)
    with _let_go(pid):
        started = time.monotonic()
        with session_scope(engine) as session, pytest.raises(LabelStudioError) as caught:
            pull_campaign(session, stopping, "stops-mid-export")
        took = time.monotonic() - started
    said = str(caught.value)
    assert "\n" not in said
    assert "stopped answering while building the export" in said
    assert "no answer within 1.5 s ([labelstudio] timeout_s)" in said
    assert "nothing was stored" in said
    # The create request (1.5 s), one status request (1.5 s) and the finally's one look for
    # the snapshot to delete (1.5 s) went unanswered, plus the waits between requests: by
    # hand, well under 10 s, not the 60 s bound of 3 tasks.
    assert took < 10
    assert _stored(engine) == before
    # Label Studio answers again: the next pull completes and stores the new rating.
    with session_scope(engine) as session:
        again = pull_campaign(session, admin, "stops-mid-export")
    assert (again.added, again.problems) == (1, [])
    assert len(_stored(engine)) == len(before) + 1
