"""Reading a whole project out of Label Studio through an export snapshot, waiting as long
as Label Studio is building it and answering.

A pull, ``campaign status`` and ``campaign create`` read every task of a project. Label
Studio builds an export whole before it sends a byte, and on a busy machine that takes long
(2,234 tasks: 48 s), so one request with a fixed time limit failed while Label Studio was
still at work. Instead we ask for a snapshot (``create_snapshot``), and when Label Studio
builds it inside that request (it does without a job queue) and the request times out, we
find the snapshot again by its title and ask for its status until it is completed, then
download its file and delete it.

Two bounds end the wait, each with a line that says which: a status request that gets no
answer within ``timeout_s`` (Label Studio has stopped answering), and Label Studio still
building after ``export_timeout(tasks)`` seconds (it answers, but the export takes longer
than any export should). Nothing is stored before the export is read, so either leaves the
store as it was.

The snapshot is deleted on every way out, read or not (a timeout, a failed export, an error,
an interrupt): each one holds a copy of every task, and a pull that fails again and again
would otherwise leave one behind each time. When the create request timed out before the
snapshot was ever listed, it is looked for once by its title. A delete that fails is logged
and does not hide why the read ended.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from annotation.errors import LabelStudioError, LabelStudioTimeoutError

EXPORT_S_PER_1000_TASKS = 60.0
"""Seconds an export may take per 1,000 tasks on top of ``timeout_s``, while Label Studio
answers every status request (one that goes unanswered for ``timeout_s`` ends the wait at
once). Label Studio builds the whole export before it sends a byte: 12,632 tasks took 21.4 s
(1.7 s per 1,000) on an idle 2-core machine, 2,234 tasks 48 s (21 s per 1,000) on a busy one;
60 s per 1,000 leaves room for a server three times slower than that."""

Say = Callable[[str], None]


@dataclass(frozen=True)
class Snapshot:
    """An export snapshot as Label Studio describes it: created, in_progress, completed or
    failed, with its start and end times as Label Studio wrote them."""

    id: int
    title: str
    status: str
    created_at: datetime | None = None
    finished_at: datetime | None = None


class SnapshotSource(Protocol):
    """What the wait needs of ``annotation.labelstudio.client.LabelStudioClient`` (named
    here, so this module does not import the client that calls it)."""

    url: str
    timeout_s: float

    def export_timeout(self, tasks: int) -> float: ...
    def create_snapshot(self, project_id: int, title: str) -> Snapshot: ...
    def snapshots(self, project_id: int) -> list[Snapshot]: ...
    def snapshot(self, project_id: int, snapshot_id: int) -> Snapshot: ...
    def download_snapshot(self, project_id: int, snapshot_id: int) -> list[dict[str, Any]]: ...
    def delete_snapshot(self, project_id: int, snapshot_id: int) -> None: ...


POLL_FIRST_S = 0.25  # the first wait between status requests; doubled up to POLL_MAX_S
POLL_MAX_S = 4.0
SAY_EVERY_S = 10.0  # a progress line at most this often while Label Studio builds
DONE = ("completed", "failed")

log = logging.getLogger(__name__)


def export_snapshot(
    client: SnapshotSource, project_id: int, tasks: int, progress: Say
) -> list[dict[str, Any]]:
    """Every task of project ``project_id`` (``tasks`` of them, for the bound), with its
    annotations; LabelStudioError with one line when Label Studio stops answering, fails
    the export, or is still building it past the bound (see the module docstring)."""
    title = f"fairjudge export {uuid.uuid4().hex[:16]}"
    started = time.monotonic()
    known: list[Snapshot] = []  # the snapshot once Label Studio has named it, for the finally
    try:
        try:
            snap: Snapshot | None = client.create_snapshot(project_id, title)
        except LabelStudioTimeoutError:
            snap = None  # Label Studio builds it inside the request: found by its title below
        if snap is not None:
            known[:] = [snap]
        snap = _wait(client, project_id, tasks, title, snap, started, progress, known)
        return client.download_snapshot(project_id, snap.id)
    finally:
        _delete(client, project_id, title, known)


def _delete(client: SnapshotSource, project_id: int, title: str, known: list[Snapshot]) -> None:
    """Delete the read's snapshot (see the module docstring); a failure is logged only."""
    try:
        snap = known[-1] if known else _by_title(client, project_id, title)
        if snap is not None:
            client.delete_snapshot(project_id, snap.id)
    except LabelStudioError as exc:
        which = f"export {known[-1].id}" if known else f"the export titled {title!r}"
        log.warning(
            "could not delete %s of project %s in Label Studio (%s); it holds a copy of the "
            "project's tasks: delete it from the project's Export page",
            which,
            project_id,
            exc,
        )


def _wait(
    client: SnapshotSource,
    project_id: int,
    tasks: int,
    title: str,
    snap: Snapshot | None,
    started: float,
    progress: Say,
    known: list[Snapshot],
) -> Snapshot:
    """The snapshot once Label Studio has completed it (see ``export_snapshot``); each
    snapshot seen is kept in ``known``."""
    bound = client.export_timeout(tasks)
    delay, said = POLL_FIRST_S, started
    while snap is None or snap.status not in DONE:
        elapsed = time.monotonic() - started
        if elapsed >= bound:
            raise LabelStudioError(_too_long(client, project_id, tasks, elapsed))
        time.sleep(min(delay, bound - elapsed))
        delay = min(2 * delay, POLL_MAX_S)
        try:
            snap = (
                client.snapshot(project_id, snap.id)
                if snap is not None
                else _by_title(client, project_id, title)
            )
        except LabelStudioTimeoutError:
            raise LabelStudioError(
                f"Label Studio at {client.url} stopped answering while building the export "
                f"of project {project_id}: a status request got no answer within "
                f"{client.timeout_s:g} s ([labelstudio] timeout_s), "
                f"{time.monotonic() - started:.0f} s after the export began; nothing was "
                "stored; check that it runs (`fairjudge labelstudio status`) and try again"
            ) from None
        if snap is not None:
            known[:] = [snap]
        now = time.monotonic()
        if now - said >= SAY_EVERY_S:
            state = "not listed yet" if snap is None else snap.status.replace("_", " ")
            progress(
                f"Label Studio is building the export of project {project_id} "
                f"({tasks:,} tasks): {state} after {now - started:.0f} s"
            )
            said = now
    if snap.status == "failed":
        raise LabelStudioError(
            f"Label Studio at {client.url} failed to build the export of project "
            f"{project_id} (export {snap.id}); nothing was stored; see its log "
            "(`fairjudge labelstudio status` names it) and try again"
        )
    return snap


def _by_title(client: SnapshotSource, project_id: int, title: str) -> Snapshot | None:
    return next((s for s in client.snapshots(project_id) if s.title == title), None)


def _too_long(client: SnapshotSource, project_id: int, tasks: int, elapsed: float) -> str:
    return (
        f"Label Studio at {client.url} was still building the export of project {project_id} "
        f"after {elapsed:.0f} s, past the bound of {client.export_timeout(tasks):.0f} s "
        f"({tasks:,} tasks: [labelstudio] timeout_s {client.timeout_s:g} s + "
        f"{EXPORT_S_PER_1000_TASKS:g} s per 1,000 tasks), though it answered every status "
        "request; nothing was stored; try again when it is less busy, or raise timeout_s "
        "under [labelstudio] in fairjudge.toml"
    )
