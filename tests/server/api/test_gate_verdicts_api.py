"""Release gates' verdicts kept by ``fairjudge gate`` and served by ``GET /api/v1/gates``, on a
temporary SQLite store holding judge runs with planted scores (tests/support/gate_runs.py):
the route's verdict equals the command's own ``--json`` output for the same evaluation (the
independent source), the outcomes and figures are the ones derived by hand from the planted
scores (beside each gate), the newest verdict of a name wins, ``--no-record`` and a bad file
keep nothing, and bad queries are a 404 or 422 in the one error shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from flask.testing import FlaskClient
from sqlmodel import Session, select

from judge.store.engine import make_engine
from server import create_app
from server.auth import create_key
from server.schemas.gates import GateVerdictsOut
from server.tables import GateVerdict
from tests.support.cli import fairjudge
from tests.support.factories import make_settings, write_config
from tests.support.gate_runs import SCORES_A, SCORES_B, plant_runs

FAILING = """
[[gate]]   # S1 ICS>=3 per factor in run a: gender 8/10 = 80 % passes, race 5/10 = 50 % fails
name = "every factor"
run = "a"
figure = "S1 ICS>=3"
factor = "every"
min = 60

[[gate]]   # S3 SBAS>=4 in run b: (4 + 2) of 10 = 60 % <= 70: passes
name = "S3 share"
run = "b"
figure = "S3 SBAS>=4"
max = 70
"""

PASSING = """
[[gate]]   # S1 ICS>=3 in run a: (8 + 5) of 20 = 65 % >= 60: passes
name = "S1 share"
run = "a"
figure = "S1 ICS>=3"
min = 60
"""


@dataclass(frozen=True)
class Env:
    folder: Path
    config: Path
    url: str
    a: int
    b: int
    client: FlaskClient
    header: dict[str, str]

    def gates(self, body: str, name: str) -> Path:
        path = self.folder / name
        path.write_text(f"[runs]\na = {self.a}\nb = {self.b}\n{body}", encoding="utf-8")
        return path

    def kept(self) -> int:
        engine = make_engine(self.url)
        try:
            with Session(engine) as session:
                return len(session.exec(select(GateVerdict)).all())
        finally:
            engine.dispose()


@pytest.fixture
def env(tmp_path: Path, empty_template: Path) -> Iterator[Env]:
    from tests.support import stores

    stores.copy_store(empty_template, tmp_path / "store.db")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    config = write_config(tmp_path / "config.toml", "http://127.0.0.1:9/v1", url)
    engine = make_engine(url)
    with Session(engine) as session:
        runs = plant_runs(session, [SCORES_A, SCORES_B])
        session.commit()
    _, raw = create_key(engine, "member", "member")
    engine.dispose()
    app = create_app({"SETTINGS": make_settings("http://127.0.0.1:9/v1", url), "TESTING": True})
    a, b = runs.judge_run_ids
    yield Env(tmp_path, config, url, a, b, app.test_client(), {"Authorization": f"Bearer {raw}"})
    app.extensions["fairjudge_engine"].dispose()


def _gate(env: Env, path: Path, *args: str) -> tuple[int, dict]:
    done = fairjudge("--config", env.config, "gate", path, "--json", *args)
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}


def test_the_last_verdict_of_each_name_is_the_commands_json(env: Env) -> None:
    code, failed = _gate(env, env.gates(FAILING, "fail.toml"), "--record", "nightly")
    assert code == 5  # a gate failed
    passing = env.gates(PASSING, "pass.toml")
    assert _gate(env, passing)[0] == 0  # kept under the file as given
    reply = env.client.get("/api/v1/gates", headers=env.header)
    assert reply.status_code == 200, reply.json
    body = GateVerdictsOut.model_validate(reply.json).model_dump(mode="json")
    assert body == reply.json  # nothing undeclared, nothing missing
    assert [v["name"] for v in body["items"]] == [str(passing), "nightly"]  # newest first
    nightly = body["items"][1]
    assert nightly["result"] == failed  # the command's own JSON of the same evaluation
    assert (nightly["passed"], nightly["n_gates"], nightly["n_failed"]) == (False, 2, 1)
    every, s3 = nightly["result"]["gates"]
    assert [(c["factor"], c["number"], c["passed"]) for c in every["checks"]] == [
        ("gender", 80.0, True), ("race_culture", 50.0, False),
    ]  # fmt: skip
    assert (every["outcome"], every["threshold"], every["unit"]) == ("fail", ">= 60", "percent")
    assert (s3["outcome"], s3["threshold"]) == ("pass", "<= 70")
    assert s3["checks"][0]["number"] == pytest.approx(60.0)
    assert body["items"][0]["result"]["gates"][0]["checks"][0]["number"] == pytest.approx(65.0)

    # The same name evaluated again: its newest verdict replaces the older one in the list.
    code, again = _gate(env, env.gates(PASSING, "pass2.toml"), "--record", "nightly")
    assert code == 0
    latest = env.client.get("/api/v1/gates?name=nightly", headers=env.header).json
    assert [v["passed"] for v in latest["items"]] == [True]
    assert latest["items"][0]["result"] == again
    assert len(env.client.get("/api/v1/gates", headers=env.header).json["items"]) == 2
    assert env.kept() == 3  # the older verdict is kept, only not listed


def test_no_record_and_bad_files_keep_nothing(env: Env) -> None:
    assert _gate(env, env.gates(PASSING, "pass.toml"), "--no-record")[0] == 0
    bad = env.gates(PASSING.replace("S1 ICS>=3", "S1 XYZ>=3"), "bad.toml")
    done = fairjudge("--config", env.config, "gate", bad)
    assert done.returncode == 1 and "nothing was evaluated" in done.stderr
    both = fairjudge("--config", env.config, "gate", bad, "--record", "x", "--no-record")
    assert both.returncode == 1 and "--record and --no-record" in both.stderr
    assert env.kept() == 0
    assert env.client.get("/api/v1/gates", headers=env.header).json == {"items": []}


def test_bad_queries_are_404_or_422_in_the_one_error_shape(env: Env) -> None:
    reply = env.client.get("/api/v1/gates?name=nope", headers=env.header)
    assert reply.status_code == 404 and set(reply.json) == {"error"}
    assert "no gates verdict is kept under 'nope'" in reply.json["error"]["message"]
    for query in ("name=", "name=" + "x" * 501, "other=1"):
        assert env.client.get(f"/api/v1/gates?{query}", headers=env.header).status_code == 422
    assert env.client.get("/api/v1/gates").status_code == 401  # a key is needed
