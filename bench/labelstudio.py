"""Annotation campaigns at FairMonitor's scale against a real Label Studio, timed as users run
them (whole ``fairjudge campaign`` commands, timed from outside):

- push: ``campaign create`` of 12,632 tasks (FairMonitor's item count; target <= 30 s);
- pull: ``campaign pull`` of 9,882 ratings of 2,234 items by 5 annotators (the size of the
  campaign whose pulls timed out, issue 41; target
  <= 30 s) with the default ``[labelstudio]`` settings (no raised ``timeout_s``), beside
  Label Studio's own time to export the same project in the same run (its synchronous export,
  timed alone), then the same pull again with nothing new (target <= 5 s);
- scoped: a second campaign of the same size over the same judge run (another seed, so it
  shares about a sixth of its items with the first) is pulled after the first: ratings are
  scoped by campaign, so it adds its own ratings and touches none of the first's (the
  benchmark counts the first campaign's ratings before and after, and the history rows).

The 9,882 annotations are not clicked in one by one (Label Studio has no bulk annotation
endpoint, and one call takes ~80 ms): the benchmark imports the pull campaign's tasks with
their three annotations attached, each credited to its annotator (``completed_by``), which is
what Label Studio stores for submitted work too.
"""

from __future__ import annotations

import subprocess
import time
import zlib
from pathlib import Path
from typing import Any

from annotation.labelstudio import interface
from annotation.labelstudio.campaigns import create_campaign
from annotation.labelstudio.client import LabelStudioClient
from annotation.labelstudio.service import LabelStudioService
from bench import wire
from judge import paths
from judge.config import LabelStudioConfig
from judge.grading.rubrics import load_rubrics
from judge.store.engine import make_engine, session_scope
from tests.support.factories import FAIRJUDGE, free_port

N_PUSH = 12_632
N_PULL = 2_234
PEOPLE = tuple(f"b{n}@example.org" for n in range(1, 6))
N_RATINGS = 9_882
"""The ratings of the campaign the issue pulled (2,234 tasks): four annotators on every task
and a fifth on the first 946 (4 x 2,234 + 946), one rubric a task."""


class _Annotated(LabelStudioClient):
    """Imports each task with one annotation per annotator already attached."""

    def __init__(self, url: str, token: str, people: dict[str, int], n_pull: int) -> None:
        super().__init__(url, token)
        self.people = people
        self.imported = 0
        # The last annotator rates only as many tasks as N_RATINGS needs beyond the others'.
        self.last_takes = max(0, N_RATINGS - (len(people) - 1) * n_pull)

    def import_tasks(self, project_id: int, tasks: list[dict[str, Any]]) -> list[int]:
        ids: list[int] = []
        for start in range(0, len(tasks), 1000):
            batch = [
                {"data": data, "annotations": self._annotations(data)}
                for data in tasks[start : start + 1000]
            ]
            response = self._sdk.projects.import_tasks(
                project_id, request=batch, return_task_ids=True
            )
            ids.extend(int(i) for i in response.task_ids or [])
        return ids

    def _annotations(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        self.imported += 1
        people = list(self.people.values())
        if self.imported > self.last_takes:
            people = people[:-1]
        for n, uid in enumerate(people):
            result = [
                {
                    "from_name": interface.control_name(interface.SCORE, rubric),
                    "to_name": _target(rubric),
                    "type": "choices",
                    "value": {
                        "choices": [str(1 + zlib.crc32(f"{data['fj_item']}{n}".encode()) % 5)]
                    },
                }
                for rubric in data["fj_rubrics"]
            ]
            out.append({"result": result, "completed_by": uid, "lead_time": 10.0 + n})
        return out


def _target(rubric: str) -> str:
    import xml.etree.ElementTree as ET

    config = interface.label_config([load_rubrics(paths.prompts_dir())[rubric]])
    name = interface.control_name(interface.SCORE, rubric)
    return next(e.get("toName", "") for e in ET.fromstring(config).iter() if e.get("name") == name)


def _config(tmp: Path, base: Path, service: LabelStudioService) -> Path:
    text = base.read_text(encoding="utf-8") + (
        f'\n[labelstudio]\nhost = "127.0.0.1"\nport = {service.config.port}\n'
        f'home = "{service.home}"\nvenv = "{service.venv}"\n'
    )
    path = tmp / "bench-ls.toml"
    path.write_text(text, encoding="utf-8")
    return path


def bench_labelstudio(
    tmp: Path, venv: Path, n_push: int = N_PUSH, n_pull: int = N_PULL
) -> dict[str, Any]:
    stub = wire.Stub(0.0)
    gen = wire.Stub(0.0)
    try:
        base = wire.prepare(tmp, n_push, 64, gen.url, stub.url)
        subprocess.run([*base, "judge", "1"], check=True, capture_output=True)
    finally:
        stub.stop()
        gen.stop()
    config_path = Path(base[base.index("--config") + 1])
    service = LabelStudioService(
        LabelStudioConfig(port=free_port(), home=str(tmp / "ls")), tmp, venv=venv
    )
    service.install(print)
    started = time.perf_counter()
    service.start(print)
    first_start = time.perf_counter() - started
    try:
        cli = [*FAIRJUDGE, "--config", str(_config(tmp, config_path, service))]
        push = wire.timed(
            [*cli, "campaign", "create", "--judge-run", "1", "--size", "1.0", "--name", "push"]
        )
        found = service.connection()
        admin = LabelStudioClient(found.url, found.token)
        people = {email: admin.create_user(email) for email in PEOPLE}
        engine = make_engine(f"sqlite:///{tmp / 'wire.db'}")  # the store wire.prepare made
        for name, seed in (("pull", 3), ("overlap", 4)):
            with session_scope(engine) as session:
                create_campaign(
                    session,
                    _Annotated(found.url, found.token, people, n_pull),
                    load_rubrics(paths.prompts_dir()),
                    judge_run_id=1,
                    size=n_pull,
                    seed=seed,
                    name=name,
                )
        pull = wire.timed([*cli, "campaign", "pull", "pull"])
        own_export_s = _own_export_s(admin, _project_of(engine, "pull"))
        again = wire.timed([*cli, "campaign", "pull", "pull"])
        before = _scoped_counts(engine)
        overlap = wire.timed([*cli, "campaign", "pull", "overlap"])
        after = _scoped_counts(engine)
        engine.dispose()
    finally:
        service.stop()
    return {
        "first_start_s": round(first_start, 1),
        "push_tasks": n_push,
        "push_wall_s": round(push.wall_s, 2),
        "pull_annotations": after["pull"],
        "pull_wall_s": round(pull.wall_s, 2),
        "labelstudio_own_export_s": round(own_export_s, 2),
        "pull_said": pull.stdout.strip(),
        "pull_again_wall_s": round(again.wall_s, 2),
        "pull_again_said": again.stdout.strip(),
        "overlap_pull_wall_s": round(overlap.wall_s, 2),
        "overlap_said": overlap.stdout.strip(),
        "shared_items": after["shared_items"],
        "first_campaign_ratings_before_after": [before["pull"], after["pull"]],
        "history_rows_after": after["history"],
    }


def _project_of(engine: Any, name: str) -> int:
    from sqlmodel import Session, select

    from judge.store.tables import Campaign

    with Session(engine) as s:
        project = s.exec(select(Campaign.ls_project_id).where(Campaign.name == name)).one()
    assert project is not None
    return int(project)


def _own_export_s(admin: LabelStudioClient, project: int) -> float:
    """Label Studio's own time to export the project: its synchronous JSON export of every
    task, timed here from the request to the last byte, beside the pull's whole command."""
    started = time.perf_counter()
    chunks = admin._sdk.projects.exports.download_sync(
        project, export_type="JSON", download_all_tasks=True, request_options={"timeout": 600}
    )
    b"".join(chunks)
    return time.perf_counter() - started


def _scoped_counts(engine: Any) -> dict[str, int]:
    """Ratings per campaign, items both campaigns hold, and history rows: the second
    campaign's pull must leave the first's ratings and the history as they were."""
    from sqlmodel import Session, func, select

    from judge.store.tables import Campaign, CampaignTask, HumanRating, RatingChange

    with Session(engine) as s:
        ids = dict(s.exec(select(Campaign.name, Campaign.id)).all())
        count = {
            name: s.exec(
                select(func.count())
                .select_from(HumanRating)
                .where(HumanRating.campaign_id == ids.get(name))
            ).one()
            for name in ("pull", "overlap")
        }
        items = [
            {
                t
                for t in s.exec(
                    select(CampaignTask.item_id).where(CampaignTask.campaign_id == ids[n])
                )
            }
            for n in ("pull", "overlap")
        ]
        history = s.exec(select(func.count()).select_from(RatingChange)).one()
    return {**count, "shared_items": len(items[0] & items[1]), "history": history}
