"""``POST /jobs/dry-run`` for generate, audit and counterfactual jobs gives the numbers of the
CLI's ``--dry-run --json`` (the same use case behind both doors), sends and stores nothing; a
job's ``max_cost`` and its counts' cost, on SQLite and PostgreSQL.

The stub reports 10 prompt and 5 completion tokens for every call (tests/support/
stub_openai.py); the endpoint costs 2.0 per million prompt tokens and 8.0 per million
completion tokens, with half off at the batch price.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlmodel import Session, func, select

from judge.store.engine import make_engine
from judge.store.tables import AuditRun, GenerationRun, JudgeRun
from server import usecases
from server.cli import cli
from server.tables import Job
from tests.judge.trust.test_trust import ANSWERS, _store
from tests.server.api.test_api import Api, make_api, run_jobs
from tests.support.factories import make_settings, write_config
from tests.support.stub_openai import StubServer

PRICES = {"input_price_per_mtok": 2.0, "output_price_per_mtok": 8.0, "batch_discount": 0.5}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest) -> str:
    # SQLite: a copy of the session's empty migrated store (tests/support/stores.py).
    name = "migrated_db_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(name))


def _priced(store_url: str, stub: StubServer, tmp_path: Path) -> tuple[Api, Path]:
    """The API with a priced endpoint, and a config file for the CLI on the same store."""
    api = make_api(store_url, stub, tmp_path)
    settings = make_settings(stub.base_url, store_url, **PRICES).model_copy(
        update={"state_dir": str(tmp_path / "state")}
    )
    api.client.application.config["SETTINGS"] = api.settings = settings
    config = write_config(tmp_path / "f.toml", stub.base_url, store_url)
    prices = "".join(f"{k} = {v}\n" for k, v in PRICES.items())
    text = config.read_text().replace("max_backoff_s = 0.1\n", "max_backoff_s = 0.1\n" + prices)
    config.write_text(text)
    return api, config


@pytest.fixture
def priced(store_url: str, stub: StubServer, tmp_path: Path) -> Iterator[tuple[Api, Path]]:
    """``_priced`` on SQLite and on PostgreSQL."""
    api, config = _priced(store_url, stub, tmp_path)
    yield api, config
    api.close()


@pytest.fixture
def priced_sqlite(
    migrated_db_url: str, stub: StubServer, tmp_path: Path
) -> Iterator[tuple[Api, Path]]:
    """``_priced`` on SQLite only (the job queue is the same code on both stores)."""
    api, config = _priced(migrated_db_url, stub, tmp_path)
    yield api, config
    api.close()


def _counts(url: str) -> tuple[int, ...]:
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            return tuple(
                int(session.exec(select(func.count()).select_from(t)).one())
                for t in (Job, GenerationRun, JudgeRun, AuditRun)
            )
    finally:
        engine.dispose()


def test_http_dry_runs_give_the_clis_numbers_and_store_nothing(
    priced: tuple[Api, Path], stub: StubServer
) -> None:
    api, config = priced
    url = api.settings.database_url
    engine = make_engine(url)
    try:
        run_id, _ = _store(engine, ANSWERS)  # five imported answers, four with a name
        judged = usecases.judge(
            engine, api.settings, usecases.JudgeRequest(generation_run_id=run_id)
        ).run_id
    finally:
        engine.dispose()
    sent, before = stub.state.requests, _counts(url)
    cases = [
        ("generate", {"dataset": "sample", "limit": 6}, ["generate", "sample", "--limit", "6"]),
        (
            "audit",
            {"suite": "names", "options": {"repeats": 1}, "limit": 50},
            ["audit", "names", "run", "--repeats", "1", "--limit", "50"],
        ),
        (
            "counterfactual",
            {"judge_run_id": judged, "swap": ["names"]},
            ["checks", "counterfactual", "--judge-run", str(judged), "--swap", "names"],
        ),
    ]
    plans = {}
    for kind, params, args in cases:
        http = api.post("/api/v1/jobs/dry-run", json={"kind": kind, "params": params})
        assert http.status_code == 200, http.json
        done = CliRunner().invoke(cli, ["--config", str(config), *args, "--dry-run", "--json"])
        assert done.exit_code == 0, done.output
        assert {"kind": kind, **json.loads(done.stdout)} == http.json
        plans[kind] = http.json
    assert stub.state.requests == sent and _counts(url) == before  # nothing sent or stored
    # By hand. generate: the sample's first six items are S1 questions, one call each, none
    # cached; no measured ratio yet, so 4 characters per token. At most 6 x 32 tokens out.
    e = plans["generate"]["estimate"]
    assert plans["generate"]["calls_to_send"] == 6
    assert e["prompt_tokens"] == math.ceil(e["prompt_chars"] / 4)
    assert e["cost_max"] == pytest.approx((e["prompt_tokens"] * 2.0 + 6 * 32 * 8.0) / 1e6)
    assert e["cost_max_batch"] == pytest.approx(e["cost_max"] * (1 - 0.5))
    # audit: the first 50 prompts of the name design, at most 200 tokens out each
    a = plans["audit"]["estimate"]
    assert plans["audit"]["calls_to_send"] == 50
    assert a["cost_max"] == pytest.approx((a["prompt_tokens"] * 2.0 + 50 * 200 * 8.0) / 1e6)
    # counterfactual: four copied answers, one rubric each
    assert plans["counterfactual"]["calls_to_send"] == 4
    # the CLI's words say which figures were assumed, and give the batch price
    words = CliRunner().invoke(cli, ["--config", str(config), "generate", "sample", "--dry-run"])
    assert "assumed: 4 characters per token" in words.stdout
    assert "cost at the batch price:" in words.stdout


def test_a_jobs_max_cost_and_the_cost_of_its_run(priced_sqlite: tuple[Api, Path]) -> None:
    api, _ = priced_sqlite
    made = api.post(
        "/api/v1/jobs",
        json={"kind": "generate", "params": {"dataset": "sample", "limit": 6, "max_cost": 1.0}},
    )
    assert made.status_code == 201, made.json
    assert made.json["params"]["max_cost"] == 1.0
    # An audit job carries its budget to the run: one far below a single call's price
    # (10 x 2.0/M + 5 x 8.0/M = 60e-6 at the least) stops it before its first call, where a
    # dropped budget would let all 4 of its calls out.
    audit = {"kind": "audit", "params": {"suite": "names", "limit": 4, "max_cost": 1e-9}}
    queued = api.post("/api/v1/jobs", json=audit)
    assert queued.status_code == 201, queued.json
    assert queued.json["params"]["max_cost"] == 1e-9
    assert run_jobs(api) == ["finished", "finished"]
    audit_run = api.get(f"/api/v1/jobs/{queued.json['id']}").json["result"]["audit_run_id"]
    with Session(make_engine(api.settings.database_url)) as session:
        stopped = session.get(AuditRun, audit_run)
        assert stopped is not None
        assert stopped.status == "incomplete"
        assert "--max-cost" in (stopped.status_detail or "")
    counts = api.get(f"/api/v1/jobs/{made.json['id']}").json["counts"]
    # 6 answers x (10 prompt, 5 completion) tokens: 60 x 2.0/M + 30 x 8.0/M = 360e-6 live,
    # half of it at the batch price
    assert (counts["prompt_tokens"], counts["completion_tokens"]) == (60, 30)
    assert counts["cost"]["cost"] == pytest.approx(360e-6)
    assert counts["cost"]["cost_batch"] == pytest.approx(180e-6)
