"""What a member key can and cannot do at the API's door (issue 41, part 3), on a real store
(SQLite and PostgreSQL) and the scripted stub as the model (no test sends it a call):

- a job over ``[server] confirm_calls`` or ``confirm_cost`` queued by a member key is a 403
  that says the dry run's figure and the field to set (``confirm``), and stores nothing; the
  same job with ``"confirm": true``, or from an admin key, is queued; one under the limits is
  queued as before;
- an unknown ``rubric_set`` is a 400 when the job is created (it was a 201, then a failed
  job), a known one is queued;
- an item id with ``/`` or any other character is reachable by its URL;
- key names only of invisible characters, or with a direction-changing one, are refused;
  ordinary names (accents, emoji) are kept;
- refusals speak the API's fields, not the CLI's options.

Expected figures: the names audit's bundled design is 168,000 prompts (docs/audits.md: 1,680
name x template cells x 100 repeats), one call each, none cached in a new store; with
``limit`` N the first N of them.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from sqlmodel import Session, func, select

from judge.store.engine import make_engine
from server.tables import ApiKey, Job
from tests.server.api.test_api import SAMPLE_ITEMS, Api, jobs_stored, make_api
from tests.support.stub_openai import StubServer

NAMES_DESIGN = 168_000
"""docs/audits.md: the bundled names design, 1,680 cells x 100 repeats."""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest) -> str:
    name = "migrated_db_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
def api(store_url: str, stub: StubServer, tmp_path: Path) -> Iterator[Api]:
    made = make_api(store_url, stub, tmp_path)
    yield made
    made.close()


@pytest.fixture
def small_limit(migrated_db_url: str, stub: StubServer, tmp_path: Path) -> Iterator[Api]:
    """The API with ``confirm_calls = 100``, so the boundary costs only 100 planned calls."""
    made = make_api(migrated_db_url, stub, tmp_path, confirm_calls=100)
    yield made
    made.close()


def message(reply: Any, status: int) -> str:
    assert reply.status_code == status, (reply.status_code, reply.json)
    assert reply.json["error"]["status"] == status
    return str(reply.json["error"]["message"])


# -- cost before a large job ----------------------------------------------------------------


def test_a_member_names_audit_of_the_whole_design_is_refused_with_its_figure(api: Api) -> None:
    """The issue's case: a names audit with default options from a member key was queued and
    ran to 37,304 of 168,000 calls. Now a 403 says the figure and the field; nothing is
    stored; with ``confirm`` or an admin key it is queued."""
    job = {"kind": "audit", "params": {"suite": "names"}}
    said = message(api.post("/api/v1/jobs", json=job), 403)
    assert f"{NAMES_DESIGN:,} calls" in said  # the dry run's figure, by hand above
    assert "10,000 calls ([server] confirm_calls)" in said  # the default limit
    assert '"confirm": true' in said and "admin key" in said
    assert "--" not in said  # the API's words, not the CLI's
    assert jobs_stored(api) == 0
    queued = api.post("/api/v1/jobs", json={**job, "confirm": True})
    assert queued.status_code == 201, queued.json
    assert queued.json["params"] == {"suite": "names", "options": {}}  # confirm not stored
    by_admin = api.post("/api/v1/jobs", json=job, headers=api.admin)
    assert by_admin.status_code == 201, by_admin.json
    assert jobs_stored(api) == 2


def test_a_member_job_at_the_limit_is_queued_and_one_past_it_is_refused(
    small_limit: Api,
) -> None:
    api = small_limit
    at = {"suite": "names", "limit": 100}  # 100 calls: not over confirm_calls = 100
    past = {"suite": "names", "limit": 101}
    assert api.post("/api/v1/jobs", json={"kind": "audit", "params": at}).status_code == 201
    said = message(api.post("/api/v1/jobs", json={"kind": "audit", "params": past}), 403)
    assert "101 calls" in said and "100 calls ([server] confirm_calls)" in said
    # the audits route is the same door
    said = message(api.post("/api/v1/audits", json=past), 403)
    assert "101 calls" in said and '"confirm": true' in said
    assert api.post("/api/v1/audits", json={**past, "confirm": True}).status_code == 202
    # the field is a JSON boolean: 0 or "yes" is not a confirmation (schema: 422)
    assert api.post("/api/v1/audits", json={**past, "confirm": 0}).status_code == 422
    assert api.post("/api/v1/audits", json=at).status_code == 202
    assert jobs_stored(api) == 3


def test_a_priced_job_over_the_cost_limit_asks_too(
    migrated_db_url: str, stub: StubServer, tmp_path: Path
) -> None:
    api = make_api(migrated_db_url, stub, tmp_path, confirm_cost=0.0)
    try:
        prices = {"input_price_per_mtok": 2.0, "output_price_per_mtok": 8.0}
        ep = api.settings.endpoints["test"].model_copy(update=prices)
        settings = api.settings.model_copy(update={"endpoints": {"test": ep}})
        api.client.application.config["SETTINGS"] = api.settings = settings
        job = {"kind": "generate", "params": {"dataset": "sample", "limit": 6}}
        plan = api.post("/api/v1/jobs/dry-run", json=job).json["estimate"]
        # 6 calls, far under 10,000; their cost bound is above 0: the cost limit alone asks.
        assert plan["calls"] == 6 and plan["cost_max"] > 0
        said = message(api.post("/api/v1/jobs", json=job), 403)
        assert "a cost of 0 ([server] confirm_cost)" in said
        assert f"at most {plan['cost_max']:.4g} live" in said
        assert jobs_stored(api) == 0
        raised = api.settings.server.model_copy(update={"confirm_cost": 1.0})
        api.client.application.config["SETTINGS"] = api.settings.model_copy(
            update={"server": raised}
        )
        assert api.post("/api/v1/jobs", json=job).status_code == 201
    finally:
        api.close()


# -- parameters checked at creation ---------------------------------------------------------


def answered_run(api: Api) -> int:
    """A generation run of two imported answers of the sample (no model call)."""
    rows = [
        {"item_id": SAMPLE_ITEMS[0]["id"], "part": "answer", "text": "An answer."},
        {"item_id": SAMPLE_ITEMS[1]["id"], "part": "answer", "text": "Another answer."},
    ]
    made = api.post("/api/v1/responses", json={"dataset": "sample", "rows": rows})
    assert made.status_code == 201, made.json
    return int(made.json["generation_run_id"])


def test_an_unknown_rubric_set_is_a_400_at_creation_and_a_known_one_is_queued(api: Api) -> None:
    gen = answered_run(api)
    job = {"kind": "judge", "params": {"generation_run_id": gen, "rubric_set": "NOPE"}}
    said = message(api.post("/api/v1/jobs", json=job), 400)
    assert said.startswith("rubric_set: no rubric named NOPE")
    assert "POST /api/v1/rubrics" in said and "fairjudge" not in said
    assert jobs_stored(api) == 0
    ok = {"kind": "judge", "params": {"generation_run_id": gen, "rubric_set": "ICS"}}
    assert api.post("/api/v1/jobs", json=ok).status_code == 201
    # fairmonitor, the built-in set, is known too
    builtin = {"kind": "judge", "params": {"generation_run_id": gen, "rubric_set": "fairmonitor"}}
    assert api.post("/api/v1/jobs", json=builtin).status_code == 201


def test_a_sweep_counts_every_configuration(
    migrated_db_url: str, stub: StubServer, tmp_path: Path
) -> None:
    """A sweep judges the run once per temperature x variant. By hand: two S1 answers, one
    ICS judgment each, under the default 3 temperatures x 2 variants = 6 judge runs, none
    cached: 12 calls."""
    api = make_api(migrated_db_url, stub, tmp_path, confirm_calls=11)
    try:
        gen = answered_run(api)
        job = {"kind": "sweep", "params": {"generation_run_id": gen}}
        said = message(api.post("/api/v1/jobs", json=job), 403)
        assert "a sweep job that would send 12 calls" in said
        assert jobs_stored(api) == 0
        raised = api.settings.server.model_copy(update={"confirm_calls": 12})
        api.client.application.config["SETTINGS"] = api.settings.model_copy(
            update={"server": raised}
        )
        assert api.post("/api/v1/jobs", json=job).status_code == 201
    finally:
        api.close()


def test_refusals_say_the_apis_fields_not_the_clis_options(api: Api) -> None:
    gen = answered_run(api)
    row = {"item_id": SAMPLE_ITEMS[0]["id"], "rubric": "ICS", "rater": "ann", "score": 3}
    first = api.post("/api/v1/ratings", json={"generation_run": gen, "rows": [row]})
    assert first.status_code == 201, first.json
    changed = {**row, "score": 4}
    reply = api.post("/api/v1/ratings", json={"generation_run": gen, "rows": [changed]})
    said = json.dumps(reply.json)
    assert reply.status_code == 400 and '\\"replace\\": true to overwrite' in said, said
    assert "--replace" not in said
    replaced = api.post(
        "/api/v1/ratings", json={"generation_run": gen, "rows": [changed], "replace": True}
    )
    # the other way: with the field set, the changed score replaces the stored one (nothing
    # added, so 200; docs/server.md)
    assert replaced.status_code == 200, replaced.json
    assert (replaced.json["added"], replaced.json["replaced"]) == (0, 1)


def test_no_error_raised_by_an_api_view_names_a_cli_option() -> None:
    """Every message an API module raises, read from its source: none names a ``--option``
    (the docs strings may: they say which CLI command gives the same shape)."""
    found = []
    for path in sorted(Path("server/api").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
                continue
            for text in _message_texts(node.exc.args[0] if node.exc.args else None):
                if " --" in text or text.startswith("--"):
                    found.append((path.name, text))
    assert found == []


def _message_texts(node: ast.expr | None) -> list[str]:
    """The literal text of an exception's message: a string, an f-string's parts, a sum of
    them, and the text a ``.replace(old, new)`` starts from and puts in (not what it takes
    out: ratings.py removes the CLI's ``--scale`` that way)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [t for v in node.values for t in _message_texts(v)]  # type: ignore[arg-type]
    if isinstance(node, ast.BinOp):
        return _message_texts(node.left) + _message_texts(node.right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "replace" and len(node.args) == 2:
            return _message_texts(node.func.value) + _message_texts(node.args[1])
    return []


# -- ids with any character ------------------------------------------------------------------

IDS = ["a/b", "a//b", "/lead", "trail/", "q?x=1", "h#x", "100%", "sp ace", "ü/ñ", "..", "a/./b"]


def test_an_item_id_with_any_character_has_a_url(api: Api) -> None:
    items = [{**SAMPLE_ITEMS[0], "id": i} for i in IDS]
    made = api.post("/api/v1/datasets", json={"name": "odd", "items": items}, headers=api.admin)
    assert made.status_code == 201, made.json
    for item_id in IDS:
        got = api.get(f"/api/v1/datasets/odd/items/{quote(item_id, safe='')}")
        assert got.status_code == 200, (item_id, got.json)
        assert got.json["key"] == item_id
    # a '/' left as it is works too, and an id that is not stored is still a 404
    assert api.get("/api/v1/datasets/odd/items/a/b").json["key"] == "a/b"
    assert message(api.get("/api/v1/datasets/odd/items/a%2Fc"), 404)
    assert message(api.get("/api/v1/datasets/odd/items/a"), 404)


# -- key names --------------------------------------------------------------------------------

REFUSED_NAMES = [
    "\u200b\u200b",  # zero-width spaces only
    "\u200d\ufeff\u2060",  # joiner, BOM, word joiner
    "\u3164",  # a Hangul filler: a letter that draws nothing
    "\u202eadmin",  # starts with a right-to-left override
    "team\u2066x\u2069",  # an isolate inside
    "ci\u200frunner",  # a right-to-left mark inside
    "tab\there",  # a control character
]
KEPT_NAMES = ["ci-runner", "Zoë", "team 7", "👩\u200d💻 lab", "שרה"]  # a ZWJ emoji, Hebrew


@pytest.mark.parametrize("name", REFUSED_NAMES)
def test_invisible_or_direction_changing_key_names_are_refused(api: Api, name: str) -> None:
    before = _keys(api)
    said = message(api.post("/api/v1/keys", json={"name": name}, headers=api.admin), 400)
    assert said.startswith("the key's name is refused:")
    assert "U+" in said  # the character is named by its code point, not shown
    assert _keys(api) == before


def test_ordinary_key_names_are_kept_as_written(api: Api) -> None:
    for name in KEPT_NAMES:
        made = api.post("/api/v1/keys", json={"name": name}, headers=api.admin)
        assert made.status_code == 201, (name, made.json)
        assert made.json["name"] == name


def _keys(api: Api) -> int:
    engine = make_engine(api.settings.database_url)
    try:
        with Session(engine) as session:
            return int(session.exec(select(func.count()).select_from(ApiKey)).one())
    finally:
        engine.dispose()


# -- every kind that can call a model is sized; a pull, which cannot, is not ---------------

CELL = {"endpoint": "test", "stage": "S1", "factor": "gender", "scenario": "career_counseling"}
"""A cell of the bundled datasets/factors_scenarios.toml (tests/server/api/test_workflows_api)."""


def test_a_member_item_generate_job_over_the_limit_is_refused_with_its_figure(
    migrated_db_url: str, stub: StubServer, tmp_path: Path
) -> None:
    """By hand: 12 new items at 5 a call (items_per_call's default, docs: "(5)") are 3 calls
    (5 + 5 + 2), none cached in a new store; 10 items are 2 calls."""
    api = make_api(migrated_db_url, stub, tmp_path, confirm_calls=2)
    try:
        job = {"kind": "item-generate", "params": {**CELL, "count": 12}}
        plan = api.post("/api/v1/jobs/dry-run", json=job)
        assert plan.status_code == 200, plan.json
        assert (plan.json["calls_to_send"], plan.json["estimate"]["calls"]) == (3, 3)
        said = message(api.post("/api/v1/jobs", json=job), 403)
        assert "an item-generate job that would send 3 calls" in said
        assert "2 calls ([server] confirm_calls)" in said and '"confirm": true' in said
        assert jobs_stored(api) == 0
        assert api.post("/api/v1/jobs", json={**job, "confirm": True}).status_code == 201
        within = {"kind": "item-generate", "params": {**CELL, "count": 10}}  # 2: not over 2
        assert api.post("/api/v1/jobs", json=within).status_code == 201
        assert jobs_stored(api) == 2
        assert stub.state.requests == 0  # dry runs and gates send nothing
    finally:
        api.close()


def test_an_item_plan_past_the_planning_limit_is_refused_before_it_is_planned(
    migrated_db_url: str, stub: StubServer, tmp_path: Path
) -> None:
    """The grid's cells by hand: 4 stages x every factor's scenarios in the bundled
    datasets/factors_scenarios.toml (read with tomllib here, not through the grid code); the
    calls per cell ceil(per_cell / items_per_call). At 27 items a call, 556 calls a cell
    (15,012 items) puts the whole grid past 200,000 calls and 555 (14,985) does not, when
    the grid has 360 cells (556 x 360 = 200,160; 555 x 360 = 199,800)."""
    import tomllib

    factors = tomllib.loads(Path("datasets/factors_scenarios.toml").read_text())["factors"]
    cells = 4 * sum(len(f["scenarios"]) for f in factors)
    assert cells == 360
    api = make_api(migrated_db_url, stub, tmp_path)
    try:
        plan = {"endpoint": "test", "items_per_call": 27}
        over = {"kind": "item-plan", "params": {**plan, "per_cell": 24541}}  # 909 calls a cell
        said = message(api.post("/api/v1/jobs/dry-run", json=over), 400)
        assert said.startswith(f"this item plan could make up to {909 * cells:,} calls ")
        assert f"({cells} cells x 909 calls of 27 items)" in said and "lower per_cell" in said
        assert message(api.post("/api/v1/jobs", json=over), 400) == said
        past = {"kind": "item-plan", "params": {**plan, "per_cell": 15012}}
        assert "up to 200,160 calls" in message(api.post("/api/v1/jobs/dry-run", json=past), 400)
        at = {"kind": "item-plan", "params": {**plan, "per_cell": 14985}}
        planned = api.post("/api/v1/jobs/dry-run", json=at)
        assert planned.status_code == 200, planned.json
        assert planned.json["calls_planned"] == 555 * cells
        assert jobs_stored(api) == 0 and stub.state.requests == 0
    finally:
        api.close()


def test_a_pull_is_never_sized_since_it_calls_no_model(tmp_path: Path) -> None:
    from judge.errors import InvalidInputError
    from server.usecases.gates import DRY_RUNS, GATED, UNGATED, check_size, dry_run
    from server.usecases.requests import JOB_REQUESTS

    assert "pull" not in GATED and "calls no model" in UNGATED["pull"]
    assert set(GATED) | set(UNGATED) == set(JOB_REQUESTS)  # no kind left out
    # Every limit at zero: any sized job would ask; a pull does not, and nothing is planned
    # (no store is even opened: the engine here points nowhere).
    from tests.support.factories import make_settings

    settings = make_settings("http://127.0.0.1:9/v1", f"sqlite:///{tmp_path / 'none.db'}")
    zero = settings.model_copy(
        update={"server": settings.server.model_copy(update={"confirm_calls": 0})}
    )
    assert check_size(None, zero, "pull", {"campaign": "c"}) is None  # type: ignore[arg-type]
    assert "pull" not in DRY_RUNS
    with pytest.raises(InvalidInputError, match="a pull job has no dry run"):
        dry_run(None, zero, "pull", {"campaign": "c"})  # type: ignore[arg-type]
    assert not (tmp_path / "none.db").exists()


def test_a_bad_or_impossible_max_cost_is_a_400_at_creation(api: Api) -> None:
    """Issue 41 review: a job's ``max_cost`` that the worker could only refuse was queued
    (201) and failed later. Before the fix each post below was a 201; after it, a 400 naming
    the field, and nothing stored. The stub endpoint of make_settings has no prices."""
    gen = answered_run(api)
    job = {"kind": "judge", "params": {"generation_run_id": gen, "max_cost": 0.5}}
    said = message(api.post("/api/v1/jobs", json=job), 400)
    assert said.startswith("max_cost: endpoint") and "has no prices" in said
    # JSON's 1e400 reads as infinity: no bound at all, refused like a negative one
    body = f'{{"kind": "judge", "params": {{"generation_run_id": {gen}, "max_cost": 1e400}}}}'
    reply = api.post("/api/v1/jobs", data=body, content_type="application/json")
    assert "max_cost: Input should be a finite number" in message(reply, 400)
    assert jobs_stored(api) == 0


def test_max_cost_is_checked_at_creation_against_prices_and_the_celery_split(
    migrated_db_url: str,
) -> None:
    """The same check without the HTTP layer: with prices a generate job with max_cost is
    queued; on Celery (``[workers] broker_url``), where a generate job is split between
    workers, it is refused at creation (it used to fail in the worker's open_parts)."""
    from judge.data.datasets import import_items
    from judge.errors import InvalidInputError
    from judge.store.engine import session_scope
    from server.jobs.queue import submit
    from tests.support.factories import SAMPLE, make_settings

    priced = make_settings(
        "http://127.0.0.1:9/v1", migrated_db_url, input_price_per_mtok=0.0,
        output_price_per_mtok=1.0,
    )  # fmt: skip
    engine = make_engine(migrated_db_url)
    try:
        with session_scope(engine) as session:
            import_items(session, SAMPLE, "sample")
        job = {"dataset": "sample", "max_cost": 0.5}
        celery = priced.workers.model_copy(update={"broker_url": "redis://127.0.0.1:9/0"})
        on_celery = priced.model_copy(update={"workers": celery})
        with pytest.raises(InvalidInputError, match="^max_cost: a generate job is split"):
            submit(engine, "generate", job, settings=on_celery)
        with Session(engine) as session:
            assert session.exec(select(func.count()).select_from(Job)).one() == 0
        queued = submit(engine, "generate", job, settings=priced)  # one process: queued
        assert queued.params["max_cost"] == 0.5
    finally:
        engine.dispose()
