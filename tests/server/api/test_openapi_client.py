"""A client generated from the served OpenAPI document works as generated (issue 43).

openapi-python-client (in the test extra) generates a Python client from the document a real
``fairjudge serve`` serves; the generator must report nothing it had to leave out (it used to
drop the success replies of 7 operations, whose schemas were bare references, and give the
alt-test's per-annotator rows Label Studio's annotator model). The test then drives a
workflow with that client alone, its typed models in and out: an admin makes a member key;
the member imports six items, queues a generate job and a judge job with typed parameters,
reads the jobs, the runs and the judgments, asks an award audit's dry run (its options typed
by suite), posts three people's ratings and reads the judge run's alt-test.

Expected values: the six items are the first six S1 items of datasets/fairmonitor_sample.jsonl
(one answer each, judged with ICS alone, as prompts/generation.toml and prompts/rubrics.toml
say for S1: 6 answers, 6 judgments, all scored by the stub, which always answers a valid
grade); the ratings are set by hand below; the alt-test's figures are recomputed with
``judge.stats.alttest.alt_test`` from those ratings and the judge's scores as the plain JSON
of ``GET /judgments`` gives them, so the client's reading is checked against a second one.

Without the generator installed the test is skipped on a developer's machine and fails in
CI (CI=true), where a skip would hide a broken install.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from judge.stats.alttest import alt_test
from tests.support.factories import SAMPLE, write_config
from tests.support.live import LiveServer
from tests.support.stub_openai import StubServer

pytestmark = pytest.mark.timeout(600)

PACKAGE = "fairjudge_client"
CONFIG = (
    f"package_name_override: {PACKAGE}\nproject_name_override: {PACKAGE}\npost_hooks: []\n"
    "content_type_overrides:\n  text/plain: application/octet-stream\n"
    "  application/toml: application/octet-stream\n"
)
"""The generator's settings: a package of our name, none of its formatting steps (ruff on
the generated code: slow, and nothing the test reads), and the text bodies it has no type
for (a gates file posted as itself, ``POST /api/v1/gates``) sent as raw content."""

ITEMS = 6
RATINGS = {
    # item (the n-th S1 item of the sample) -> scores of r1, r2, r3 on ICS (1..5)
    0: (4, 4, 5),
    1: (2, 3, 2),
    2: (5, 5, 4),
    3: (1, 2, 1),
    4: (3, 3, 3),
    5: (4, 5, 5),
}
RATERS = ("r1", "r2", "r3")
EPSILON = 0.2


def generator() -> str:
    """The openapi-python-client command: on PATH, or beside this interpreter."""
    found = shutil.which("openapi-python-client")
    beside = Path(sys.executable).with_name("openapi-python-client")
    if found:
        return found
    if beside.exists():
        return str(beside)
    why = "openapi-python-client is not installed (pip install openapi-python-client)"
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"{why}; CI must install it with the test extra")
    pytest.skip(why)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("client")
    with StubServer() as stub:
        config = write_config(
            folder / "fairjudge.toml",
            stub.base_url,
            f"sqlite:///{folder / 'fairjudge.db'}",
            server={"job_poll_s": 0.2},
        )
        with LiveServer(config) as live:
            yield live


@pytest.fixture(scope="module")
def client(served: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The client package generated from the served document, imported."""
    tool = generator()
    status, document = served.get("/api/v1/openapi.json", key=served.admin_key)
    assert status == 200, document
    folder = tmp_path_factory.mktemp("generated")
    (folder / "openapi.json").write_text(json.dumps(document), encoding="utf-8")
    (folder / "config.yaml").write_text(CONFIG, encoding="utf-8")
    done = subprocess.run(
        [tool, "generate", "--path", "openapi.json", "--config", "config.yaml", "--meta", "none"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    # Nothing left out: the generator warns about each schema or reply it could not read.
    assert "Warning" not in said and "Unable" not in said and "omitted" not in said, said
    sys.path.insert(0, str(folder))
    try:
        package = importlib.import_module(PACKAGE)
        importlib.import_module(f"{PACKAGE}.models")
        yield package
    finally:
        sys.path.remove(str(folder))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def operation(package: ModuleType, tag: str, name: str) -> Any:
    """The generated module of one operation: ``tag``'s module whose name starts ``name``
    (the generator names them after the operation ids, e.g. ``jobs_create_job_jobs_post``)."""
    folder = Path(package.__file__ or "").parent / "api" / tag
    (found,) = [p.stem for p in folder.glob(f"{name}_*.py")]
    return importlib.import_module(f"{PACKAGE}.api.{tag}.{found}")


def sample_s1_items() -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line]
    return [r for r in rows if r["stage"] == "S1"][:ITEMS]


def finished(package: ModuleType, member: Any, job_id: int, timeout: float = 120) -> Any:
    get_job = operation(package, "jobs", "jobs_get_job")
    deadline = time.monotonic() + timeout
    while True:
        job = get_job.sync(job_id, client=member)
        assert isinstance(job, package.models.JobOut), job
        if job.status in ("finished", "failed", "cancelled"):
            assert job.status == "finished", job.error
            return job
        assert time.monotonic() < deadline, f"job {job_id} still {job.status}"
        time.sleep(0.2)


def test_a_generated_client_drives_a_workflow(served: LiveServer, client: ModuleType) -> None:
    models = client.models
    admin = client.AuthenticatedClient(base_url=served.base, token=served.admin_key)

    # A member key, made by the admin.
    made = operation(client, "keys", "keys_create_key").sync(
        client=admin, body=models.KeyCreate(name="client-member", role="member")
    )
    assert isinstance(made, models.KeyCreated) and made.role == "member"
    member = client.AuthenticatedClient(base_url=served.base, token=made.key)

    # A dataset of six items, read back.
    items = sample_s1_items()
    body = models.DatasetCreate(
        name="client", items=[models.DatasetCreateItemsItem.from_dict(i) for i in items]
    )
    imported = operation(client, "datasets", "datasets_create_dataset").sync(
        client=member, body=body
    )
    assert isinstance(imported, models.ImportOut), imported
    assert (imported.added, imported.total) == (ITEMS, ITEMS)
    described = operation(client, "datasets", "datasets_describe_dataset").sync(
        "client", client=member
    )
    assert isinstance(described, models.DatasetDescriptionOut), described
    assert described.items == ITEMS and described.stages.to_dict() == {"S1": ITEMS}

    # The answers, by a generate job with typed parameters.
    create_job = operation(client, "jobs", "jobs_create_job")
    generate = models.GenerateJobCreate(
        kind="generate", params=models.GenerateJobParams(dataset="client"), confirm=True
    )
    queued = create_job.sync(client=member, body=generate)
    assert isinstance(queued, models.JobOut) and queued.kind == "generate", queued
    assert queued.params.to_dict()["dataset"] == "client"
    answered = finished(client, member, queued.id)
    generation_run = answered.result.to_dict()["generation_run_id"]
    run = operation(client, "runs", "runs_generation_run").sync(generation_run, client=member)
    assert isinstance(run, models.GenerationRunOut), run
    assert (run.dataset, run.answers) == ("client", ITEMS)

    # Judged by a judge job: typed parameters, aggregation among them.
    judge = models.JudgeJobCreate(
        kind="judge",
        params=models.JudgeJobParams(
            generation_run_id=generation_run,
            aggregation=models.JudgeJobParamsAggregationType0.MEAN,
            samples=1,
        ),
        confirm=True,
    )
    queued = create_job.sync(client=member, body=judge)
    assert isinstance(queued, models.JobOut), queued
    assert queued.params.to_dict() == {
        "generation_run_id": generation_run,
        "aggregation": "mean",
        "samples": 1,
    }
    judged = finished(client, member, queued.id)
    judge_run = judged.result.to_dict()["judge_run_id"]
    read = operation(client, "runs", "runs_judge_run").sync(judge_run, client=member)
    assert isinstance(read, models.JudgeRunOut), read
    assert (read.generation_run, read.scored, read.unscored) == (generation_run, ITEMS, 0)
    assert "ICS" in read.standing.to_dict()

    # The judge's scores, read by the client and as plain JSON.
    page = operation(client, "judgments", "judgments_judgments").sync(
        client=member, judge_run=judge_run, limit=50
    )
    assert isinstance(page, models.PageJudgmentOut) and page.total == ITEMS
    status, plain = served.get(f"/api/v1/judgments?judge_run={judge_run}&limit=50", key=made.key)
    assert status == 200
    judged_by_item = {j["item_key"]: j["score"] for j in plain["items"]}
    assert {j.item_key: j.score for j in page.items} == judged_by_item
    assert {j.rubric for j in page.items} == {"ICS"}

    # An award audit's dry run, its options typed by suite: the client sends what a body
    # written by hand sends (the wire format the API has always taken), so the same figures.
    audit = models.AuditJobCreate(
        kind="audit",
        params=models.AwardAuditJobParams(
            suite="award", options=models.AwardAuditOptions(levels=[5], pairs_per_level=2)
        ),
    )
    sent = {"suite": "award", "options": {"levels": [5], "pairs_per_level": 2}}
    assert audit.to_dict() == {"kind": "audit", "params": sent, "confirm": False}
    dry = operation(client, "jobs", "jobs_dry_run").sync(client=member, body=audit)
    assert isinstance(dry, models.DryRunOut) and dry.kind == "audit", dry
    status, plain_dry = served.post(
        "/api/v1/jobs/dry-run", {"kind": "audit", "params": sent}, key=made.key
    )
    assert status == 200, plain_dry
    assert dry.calls_to_send == plain_dry["calls_to_send"] and dry.calls_to_send > 0

    # Three people's ratings, then the alt-test and its per-annotator rows.
    keys = [i["id"] for i in items]
    rows = [
        models.RatingRow(item_id=keys[n], rubric="ICS", rater=rater, score=score)
        for n, scores in RATINGS.items()
        for rater, score in zip(RATERS, scores, strict=True)
    ]
    stored = operation(client, "ratings", "ratings_import_ratings").sync(
        client=member, body=models.RatingsIn(generation_run=generation_run, rows=rows)
    )
    assert isinstance(stored, models.RatingsOut), stored
    assert (stored.added, stored.raters, stored.items) == (ITEMS * 3, 3, ITEMS)
    verdict = operation(client, "agreement", "alttest_run_alt_test").sync(
        judge_run, client=member, epsilon=EPSILON, min_items=ITEMS - 1
    )
    assert isinstance(verdict, models.AltTestOut), verdict
    (ics,) = verdict.rubrics
    assert (ics.rubric, ics.n_items, ics.n_annotators, ics.refused) == ("ICS", ITEMS, 3, None)
    assert all(isinstance(a, models.AltTestAnnotatorOut) for a in ics.annotators)

    table = np.array([RATINGS[n] for n in range(ITEMS)], dtype=float)
    scores = np.array([judged_by_item[k] for k in keys], dtype=float)
    expected = alt_test(table, scores, epsilon=EPSILON, annotators=RATERS, min_items=ITEMS - 1)
    assert ics.omega == pytest.approx(expected.omega)
    assert ics.rho == pytest.approx(expected.rho)
    got = [(a.annotator, a.n_items, a.rejected) for a in ics.annotators]
    assert got == [(c.annotator, ITEMS, c.rejected) for c in expected.annotators]
    assert [a.p_corrected for a in ics.annotators] == pytest.approx(
        [c.p_corrected for c in expected.annotators]
    )
