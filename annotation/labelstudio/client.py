"""The one place that talks to Label Studio's API, through ``label-studio-sdk``.

Everything else in FairJudge calls ``LabelStudioClient`` and gets plain Python values back.
A server that cannot be reached, a token it refuses, or an answer that times out becomes a
``LabelStudioError`` saying what to do; the token is never part of a message or a ``repr``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import httpx

# The SDK's generated client: ``label_studio_sdk.LabelStudio`` only adds helpers we do not use
# (pandas exports, interface parsing) and takes 4 s to import on two cores against 0.7 s.
from label_studio_sdk.base_client import LabelStudioBase
from label_studio_sdk.core.api_error import ApiError

from annotation.errors import LabelStudioError, LabelStudioTimeoutError
from annotation.labelstudio.exports import EXPORT_S_PER_1000_TASKS, Say, Snapshot, export_snapshot

T = TypeVar("T")
IMPORT_BATCH = 1000  # tasks per import request


def _quiet(_: str) -> None:
    pass


def _snapshot(found: Any) -> Snapshot:
    status = getattr(found, "status", None)
    return Snapshot(
        int(found.id),
        str(getattr(found, "title", "") or ""),
        str(getattr(status, "value", status) or "created"),
        getattr(found, "created_at", None),
        getattr(found, "finished_at", None),
    )


def annotations_of(task: dict[str, Any]) -> list[dict[str, Any]]:
    """The annotations of one task of a JSON export."""
    found = task.get("annotations") or []
    return [a for a in found if isinstance(a, dict)]


class LabelStudioClient:
    """A Label Studio server at ``url``, used with ``token`` (an admin's, or an annotator's)."""

    def __init__(self, url: str, token: str, *, timeout_s: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        # No connection is kept open between calls: a client is made per command or request
        # and dropped, never closed, and a kept-alive socket would be closed only by the
        # garbage collector (a ResourceWarning). A fresh local connection costs about 1 ms.
        http = httpx.Client(
            timeout=timeout_s,
            follow_redirects=True,
            limits=httpx.Limits(max_keepalive_connections=0),
        )
        self._sdk = LabelStudioBase(
            base_url=self.url, api_key=token, timeout=timeout_s, httpx_client=http
        )

    def __repr__(self) -> str:
        return f"LabelStudioClient({self.url!r}, token=***)"

    def export_timeout(self, tasks: int) -> float:
        """Seconds an export of a project of ``tasks`` tasks may take (see
        ``EXPORT_S_PER_1000_TASKS``)."""
        return self.timeout_s + EXPORT_S_PER_1000_TASKS * max(tasks, 0) / 1000

    @contextmanager
    def _calling(self, what: str, *, limit: str | None = None) -> Iterator[None]:
        """Turn the SDK's and httpx's errors into one LabelStudioError line; ``limit`` says
        which timeout applies when it is not plain ``timeout_s``."""
        try:
            yield
        except ApiError as exc:
            if exc.status_code in (401, 403):
                raise LabelStudioError(
                    f"Label Studio at {self.url} refused the token while {what} "
                    f"(HTTP {exc.status_code}); check the token (see `fairjudge labelstudio "
                    "status`)"
                ) from None
            body = exc.body if isinstance(exc.body, str) else json.dumps(exc.body)[:300]
            raise LabelStudioError(
                f"Label Studio at {self.url} answered HTTP {exc.status_code} while {what}: {body}"
            ) from None
        except httpx.TimeoutException:
            said = limit or f"{self.timeout_s:g} s ([labelstudio] timeout_s)"
            raise LabelStudioTimeoutError(
                f"Label Studio at {self.url} did not answer within {said} while {what}; "
                "nothing was stored; try again, or raise timeout_s under [labelstudio] in "
                "fairjudge.toml"
            ) from None
        except httpx.TransportError as exc:
            raise LabelStudioError(
                f"Label Studio at {self.url} cannot be reached while {what} "
                f"({type(exc).__name__}); start it with `fairjudge labelstudio start` or "
                "check [labelstudio] url"
            ) from None

    def _call(self, what: str, fn: Callable[[], T], *, limit: str | None = None) -> T:
        with self._calling(what, limit=limit):
            return fn()

    # --- identity and users ---------------------------------------------------------------

    def whoami(self) -> dict[str, Any]:
        """The token's user: id, email, active organization."""
        me = self._call("checking the token", self._sdk.users.whoami)
        return {"id": me.id, "email": me.email, "organization": me.active_organization}

    def users(self) -> dict[int, str]:
        """Every user this token can see: id -> e-mail."""
        found = self._call("listing users", self._sdk.users.list)
        return {u.id: (u.email or u.username or f"user {u.id}") for u in found if u.id is not None}

    def create_user(self, email: str, name: str = "") -> int:
        """A new user in the token's organization (created users start without one)."""
        first, _, last = name.partition(" ")
        user = self._call(
            f"creating user {email}",
            lambda: self._sdk.users.create(
                username=email, email=email, first_name=first, last_name=last
            ),
        )
        assert user.id is not None
        organization = self.whoami()["organization"]
        if getattr(user, "active_organization", None) != organization and organization:
            self._call(
                f"adding {email} to the organization",
                lambda: self._sdk.users.update(user.id, active_organization=organization),
            )
        return int(user.id)

    def name_user(self, user_id: int, email: str, name: str = "") -> None:
        """Give the user ``user_id`` the names ``create_user`` gives: ``email`` as user name
        and ``name`` split into first and last (a user who signed up has the e-mail's local
        part as user name and no name)."""
        first, _, last = name.partition(" ")
        self._call(
            f"naming user {email}",
            lambda: self._sdk.users.update(
                user_id, username=email, first_name=first, last_name=last
            ),
        )

    # --- projects and tasks -----------------------------------------------------------------

    def create_project(
        self, *, title: str, description: str, label_config: str, overlap: int
    ) -> int:
        """A project that asks ``overlap`` annotators per task and hides predictions. Sent
        once: the SDK would send it again after an error answer (a busy Label Studio's
        "database is locked"), and a project Label Studio made before failing would then be
        made twice; the caller looks for it instead (``find_projects``)."""
        project = self._call(
            f"creating project {title!r}",
            lambda: self._sdk.projects.create(
                title=title,
                description=description,
                label_config=label_config,
                maximum_annotations=overlap,
                show_collab_predictions=False,
                show_skip_button=True,
                request_options={"max_retries": 0},
            ),
        )
        assert project.id is not None
        return int(project.id)

    def find_projects(self, title: str, marker: str) -> list[int]:
        """Ids of the projects titled ``title`` whose description holds ``marker``, oldest
        first (a key of ours, so a project whose creation seemed to fail is found again)."""

        def pages() -> list[tuple[int | None, str | None, str | None]]:
            # Page by page: the SDK's pager asks for one page past the last, which Label
            # Studio answers with 404 "Invalid page".
            out: list[tuple[int | None, str | None, str | None]] = []
            for number in range(1, 10_000):
                page: Any = self._sdk.projects.list(title=title, page=number, page_size=100)
                out.extend((p.id, p.title, p.description) for p in page.items or [])
                if not getattr(page.response, "next", None):
                    break
            return out

        found = self._call(f"looking for project {title!r}", pages)
        return sorted(
            int(i)
            for i, name, text in found
            if i is not None and name == title and marker in (text or "")
        )

    def project_exists(self, project_id: int) -> bool:
        try:
            self._call(f"reading project {project_id}", lambda: self._sdk.projects.get(project_id))
        except LabelStudioError as exc:
            if "HTTP 404" in str(exc):
                return False
            raise
        return True

    def import_tasks(self, project_id: int, tasks: list[dict[str, Any]]) -> list[int]:
        """Import tasks (each a ``data`` dict); their Label Studio ids, in order."""
        ids: list[int] = []
        for start in range(0, len(tasks), IMPORT_BATCH):
            batch = [{"data": data} for data in tasks[start : start + IMPORT_BATCH]]
            response = self._call(
                f"importing tasks into project {project_id}",
                lambda batch=batch: self._sdk.projects.import_tasks(  # type: ignore[misc]
                    project_id, request=batch, return_task_ids=True
                ),
            )
            got = list(getattr(response, "task_ids", None) or [])
            if len(got) != len(batch):
                raise LabelStudioError(
                    f"Label Studio imported {len(got)} of {len(batch)} tasks into project "
                    f"{project_id}; run the same command again to finish"
                )
            ids.extend(int(i) for i in got)
        return ids

    def export_tasks(
        self, project_id: int, *, tasks: int | None = None, progress: Say | None = None
    ) -> list[dict[str, Any]]:
        """Every task of the project with its data and annotations, read through an export
        snapshot (``annotation.labelstudio.exports``): Label Studio builds it while we ask
        for its status, as long as it answers and for at most ``export_timeout(tasks)``
        seconds; ``tasks`` (the project's task count) is asked for first when not given.
        ``progress`` hears a line now and then while Label Studio is building."""
        if tasks is None:
            tasks = self.project_counts(project_id)["tasks"]
        return export_snapshot(self, project_id, tasks, progress or _quiet)

    # --- export snapshots (annotation.labelstudio.exports waits on them) ---------------------

    def create_snapshot(self, project_id: int, title: str) -> Snapshot:
        """Ask Label Studio for an export snapshot of every task and every annotation (the
        skipped too), called ``title``. A Label Studio without a job queue builds it before
        it answers: the caller then finds it by ``title`` (``snapshots``) once this times out
        (``timeout_s``), and Label Studio goes on building it."""
        made = self._call(
            f"asking project {project_id} for an export",
            lambda: self._sdk.projects.exports.create(
                project_id,
                title=title,
                task_filter_options={"only_with_annotations": False},
                annotation_filter_options={"usual": True, "ground_truth": True, "skipped": True},
                request_options={"max_retries": 0},
            ),
        )
        return _snapshot(made)

    def snapshots(self, project_id: int) -> list[Snapshot]:
        """The project's export snapshots, newest first."""
        found = self._call(
            f"listing the exports of project {project_id}",
            lambda: self._sdk.projects.exports.list(project_id),
        )
        return [_snapshot(e) for e in found]

    def snapshot(self, project_id: int, snapshot_id: int) -> Snapshot:
        """One export snapshot's status."""
        return _snapshot(
            self._call(
                f"asking for the status of export {snapshot_id} of project {project_id}",
                lambda: self._sdk.projects.exports.get(project_id, snapshot_id),
            )
        )

    def download_snapshot(self, project_id: int, snapshot_id: int) -> list[dict[str, Any]]:
        """A completed snapshot's tasks (its JSON file; each read may take ``timeout_s``)."""

        def download() -> list[dict[str, Any]]:
            chunks = self._sdk.projects.exports.download(
                project_id, snapshot_id, export_type="JSON"
            )
            return list(json.loads(b"".join(chunks)))

        return self._call(f"downloading export {snapshot_id} of project {project_id}", download)

    def delete_snapshot(self, project_id: int, snapshot_id: int) -> None:
        self._call(
            f"deleting export {snapshot_id} of project {project_id}",
            lambda: self._sdk.projects.exports.delete(project_id, snapshot_id),
        )

    def project_counts(self, project_id: int) -> dict[str, int]:
        """Tasks, annotations and skipped annotations Label Studio counts for a project."""
        project = self._call(
            f"reading project {project_id}", lambda: self._sdk.projects.get(project_id)
        )
        return {
            "tasks": int(getattr(project, "task_number", 0) or 0),
            "annotations": int(getattr(project, "total_annotations_number", 0) or 0),
            "skipped": int(getattr(project, "skipped_annotations_number", 0) or 0),
        }

    def tasks_updated_after(self, project_id: int, moment: str) -> int:
        """How many tasks of the project changed after ``moment`` (a task's ``updated_at`` as
        Label Studio wrote it). Label Studio moves a task's ``updated_at`` when one of its
        annotations is created, edited or deleted."""
        query = {
            "filters": {
                "conjunction": "and",
                "items": [
                    {
                        "filter": "filter:tasks:updated_at",
                        "operator": "greater",
                        "type": "Datetime",
                        "value": moment,
                    }
                ],
            }
        }
        page: Any = self._call(
            f"asking project {project_id} for changed tasks",
            lambda: self._sdk.tasks.list(
                project=project_id, query=json.dumps(query), fields="task_only", page_size=1
            ),
        )
        return int(getattr(page.response, "total", 0) or 0)

    def task_ids_by_key(self, project_id: int, key: str = "fj_task") -> dict[str, int]:
        """Our task key (a field of each task's data) -> Label Studio's task id."""
        return {
            str(t["data"][key]): int(t["id"])
            for t in self.export_tasks(project_id)
            if isinstance(t.get("data"), dict) and key in t["data"]
        }

    def annotate(
        self, task_id: int, result: list[dict[str, Any]], *, lead_time: float | None = None
    ) -> int:
        """Submit an annotation as the token's user (tests and scripts simulate annotators so)."""
        extra: dict[str, Any] = {} if lead_time is None else {"lead_time": lead_time}
        ann = self._call(
            f"annotating task {task_id}",
            lambda: self._sdk.annotations.create(task_id, result=result, **extra),
        )
        assert ann.id is not None
        return int(ann.id)

    def update_annotation(self, annotation_id: int, result: list[dict[str, Any]]) -> None:
        self._call(
            f"updating annotation {annotation_id}",
            lambda: self._sdk.annotations.update(annotation_id, result=result),
        )

    def delete_annotation(self, annotation_id: int) -> None:
        self._call(
            f"deleting annotation {annotation_id}",
            lambda: self._sdk.annotations.delete(annotation_id),
        )

    def delete_project(self, project_id: int) -> None:
        self._call(f"deleting project {project_id}", lambda: self._sdk.projects.delete(project_id))
