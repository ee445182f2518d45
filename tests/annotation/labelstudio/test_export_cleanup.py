"""The export snapshot is deleted on every way out of a read, not only after a download
(issue 41 review): a bound passed, a failed export, a status request that timed out, an
interrupt. Label Studio cannot fail an export or answer late on demand, so a scripted client
plays it here (the real server's slow and stopped cases are in test_export_timeout.py).

Each test below but the first and the last-but-one failed before the fix (the snapshot was
deleted only after a download, so ``deleted`` stayed empty on every failure path, and a
failed delete was passed over without a word) and passes after it; those two pin what
already worked.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from annotation.errors import LabelStudioError, LabelStudioTimeoutError
from annotation.labelstudio import exports
from annotation.labelstudio.client import LabelStudioClient, Snapshot

PROJECT = 7
SNAP = 41


class _Scripted(LabelStudioClient):
    """A Label Studio whose export answers follow ``statuses`` (a status string, or an
    exception to raise) one status request after another; ``create`` is what the create
    request does (a status string, or an exception)."""

    def __init__(
        self,
        statuses: list[str | BaseException],
        *,
        create: str | BaseException = "created",
        listed: bool = True,
        delete_fails: bool = False,
    ) -> None:
        super().__init__("http://127.0.0.1:9", "x" * 40, timeout_s=0.4)
        self.statuses, self.create, self.listed = statuses, create, listed
        self.delete_fails = delete_fails
        self.title = ""
        self.deleted: list[int] = []

    def create_snapshot(self, project_id: int, title: str) -> Snapshot:
        self.title = title
        if isinstance(self.create, BaseException):
            raise self.create
        return Snapshot(SNAP, title, self.create)

    def _next(self) -> Snapshot:
        got = self.statuses.pop(0) if self.statuses else "in_progress"
        if isinstance(got, BaseException):
            raise got
        return Snapshot(SNAP, self.title, got)

    def snapshot(self, project_id: int, snapshot_id: int) -> Snapshot:
        return self._next()

    def snapshots(self, project_id: int) -> list[Snapshot]:
        return [self._next()] if self.listed else []

    def download_snapshot(self, project_id: int, snapshot_id: int) -> list[dict[str, Any]]:
        return [{"id": 1, "annotations": []}]

    def delete_snapshot(self, project_id: int, snapshot_id: int) -> None:
        if self.delete_fails:
            raise LabelStudioError(f"Label Studio answered HTTP 500 while deleting {snapshot_id}")
        self.deleted.append(snapshot_id)


@pytest.fixture(autouse=True)
def _fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exports, "POLL_FIRST_S", 0.01)
    monkeypatch.setattr(exports, "POLL_MAX_S", 0.02)


def _read(client: _Scripted) -> list[dict[str, Any]]:
    return exports.export_snapshot(client, PROJECT, 0, lambda _: None)


def test_a_read_export_is_deleted() -> None:
    client = _Scripted(["in_progress", "completed"])
    assert _read(client) == [{"id": 1, "annotations": []}]
    assert client.deleted == [SNAP]


def test_an_export_still_building_past_the_bound_is_deleted() -> None:
    # Always "in_progress": the bound of 0 tasks is timeout_s, 0.4 s (client.export_timeout).
    client = _Scripted([])
    with pytest.raises(LabelStudioError, match="still building the export"):
        _read(client)
    assert client.deleted == [SNAP]


def test_a_failed_export_is_deleted() -> None:
    client = _Scripted(["in_progress", "failed"])
    with pytest.raises(LabelStudioError, match="failed to build the export"):
        _read(client)
    assert client.deleted == [SNAP]


def test_an_export_whose_status_request_timed_out_is_deleted() -> None:
    client = _Scripted(["in_progress", LabelStudioTimeoutError("no answer")])
    with pytest.raises(LabelStudioError, match="stopped answering"):
        _read(client)
    assert client.deleted == [SNAP]


def test_an_interrupted_read_deletes_its_export_and_is_still_interrupted() -> None:
    client = _Scripted(["in_progress", KeyboardInterrupt()])
    with pytest.raises(KeyboardInterrupt):
        _read(client)
    assert client.deleted == [SNAP]


def test_an_export_never_named_is_found_by_its_title_and_deleted() -> None:
    # The create request timed out (Label Studio builds inside it) and the read was
    # interrupted before any listing: the finally lists once, finds it by title, deletes it.
    client = _Scripted([], create=LabelStudioTimeoutError("no answer"))
    client.statuses = [KeyboardInterrupt(), "in_progress"]
    with pytest.raises(KeyboardInterrupt):
        _read(client)
    assert client.deleted == [SNAP]


def test_no_export_listed_means_nothing_to_delete() -> None:
    # The create request timed out and Label Studio never listed the export (it had not
    # begun it): the read ends at the bound and deletes nothing, without an error of its own.
    client = _Scripted([], create=LabelStudioTimeoutError("x"), listed=False)
    with pytest.raises(LabelStudioError, match="still building"):
        _read(client)
    assert client.deleted == []


def test_a_delete_that_fails_is_logged_and_hides_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = _Scripted(["failed"], delete_fails=True)
    with caplog.at_level(logging.WARNING, logger=exports.__name__):
        with pytest.raises(LabelStudioError, match="failed to build the export"):
            _read(client)  # the export's own failure, not the delete's
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "\n" not in said[0]
    assert said[0].startswith(f"could not delete export {SNAP} of project {PROJECT}")
    # A read that succeeded still returns its tasks when the delete fails.
    client = _Scripted(["completed"], delete_fails=True)
    assert _read(client) == [{"id": 1, "annotations": []}]
