"""Release gates over HTTP, on a temporary SQLite store holding judge runs with planted scores
(tests/support/gate_runs.py): verdicts kept by ``fairjudge gate`` and served by ``GET
/api/v1/gates``, and gates files posted to ``POST /api/v1/gates`` (as TOML and as JSON). The
routes' verdicts equal the command's own ``--json`` output for the same file and store (the
independent source), the outcomes and figures are the ones derived by hand from the planted
scores (beside each gate), the newest verdict of a name wins, ``record`` keeps a posted
verdict for GET, ``--no-record`` and a bad file keep nothing, a bad file is a 400 with the
command's own lines, and bad queries and bodies are a 4xx in the one error shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlmodel import Session, select

from judge.store.engine import make_engine
from server import create_app
from server.auth import create_key
from server.schemas.gates import GatesCheckOut, GateVerdictsOut
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


def _post(env: Env, body: str, *, as_json: bool, record: str | None = None) -> Any:
    query = f"?record={record}" if record else ""
    text = f"[runs]\na = {env.a}\nb = {env.b}\n{body}"
    if as_json:
        return env.client.post(f"/api/v1/gates{query}", json={"text": text}, headers=env.header)
    headers = {**env.header, "Content-Type": "application/toml"}
    return env.client.post(f"/api/v1/gates{query}", data=text.encode(), headers=headers)


@pytest.mark.parametrize("as_json", [False, True], ids=["toml body", "json body"])
def test_a_posted_file_gets_the_commands_verdict(env: Env, as_json: bool) -> None:
    # The independent source: `fairjudge gate --json` on the same file and store; the CLI
    # writes the file's path where the API writes "request body", all else is the same.
    code, cli_fail = _gate(env, env.gates(FAILING, "fail.toml"), "--no-record")
    assert code == 5
    _, cli_pass = _gate(env, env.gates(PASSING, "pass.toml"), "--no-record")
    failed = _post(env, FAILING, as_json=as_json)
    assert failed.status_code == 200, failed.json  # a failed gate is a verdict, not an error
    body = GatesCheckOut.model_validate(failed.json).model_dump(mode="json")
    assert body == failed.json  # nothing undeclared, nothing missing
    assert body["result"] == {**cli_fail, "file": "request body"}
    assert (body["passed"], body["n_gates"], body["n_failed"]) == (False, 2, 1)
    assert (body["kept_as"], body["verdict_id"]) == (None, None)
    # the hand-derived outcomes (beside FAILING): race 50 % < 60 fails, S3 60 % <= 70 passes
    assert [g["outcome"] for g in body["result"]["gates"]] == ["fail", "pass"]
    passed = _post(env, PASSING, as_json=as_json)
    assert passed.status_code == 200, passed.json
    assert passed.json["result"] == {**cli_pass, "file": "request body"}
    assert passed.json["passed"] is True
    assert passed.json["result"]["gates"][0]["checks"][0]["number"] == pytest.approx(65.0)
    assert env.kept() == 0  # without record nothing is kept


def test_record_keeps_the_verdict_for_get(env: Env) -> None:
    kept = _post(env, FAILING, as_json=False, record="nightly")
    assert kept.status_code == 200, kept.json
    assert kept.json["kept_as"] == "nightly" and isinstance(kept.json["verdict_id"], int)
    listed = env.client.get("/api/v1/gates?name=nightly", headers=env.header).json["items"]
    assert [(v["id"], v["source"], v["passed"]) for v in listed] == [
        (kept.json["verdict_id"], "request body", False)
    ]
    assert listed[0]["result"] == kept.json["result"]
    # The same name from the CLI afterwards: its newer verdict is the one listed.
    assert _gate(env, env.gates(PASSING, "pass.toml"), "--record", "nightly")[0] == 0
    again = env.client.get("/api/v1/gates?name=nightly", headers=env.header).json["items"]
    assert [v["passed"] for v in again] == [True] and env.kept() == 2


BAD = """
[[gate]]
run = "a"
figure = "S3 SBAS>=5"
min = 1

[[gate]]
compare = ["a", "gone"]
figure = "S1 ICS>=3"
require = "no_worse"

[[gate]]
run = "b"
figure = "S2 TCS mean"
min = 1
"""


@pytest.mark.parametrize("as_json", [False, True], ids=["toml body", "json body"])
def test_a_bad_file_is_a_400_with_the_commands_lines(env: Env, as_json: bool) -> None:
    # The CLI's exit-1 lines for the same file are the independent source; counted by hand
    # in the text _post sends ([runs] a and b on lines 1-3, BAD's blank first line 4, its
    # gates' headers on 5, 10 and 15): the unknown figure at line 7 (its figure key), the
    # unknown run 'gone' at line 11 (compare), and S2 TCS, which the planted runs did not
    # judge, at line 17 (figure).
    refused = _post(env, BAD, as_json=as_json, record="nightly")
    assert refused.status_code == 400, refused.json
    error = refused.json["error"]
    assert error["message"] == (
        "request body: 3 problem(s) in the gates file; nothing was evaluated"
    )
    assert [p.split(":")[0] for p in error["problems"]] == ["line 7", "line 11", "line 17"]
    done = fairjudge("--config", env.config, "gate", env.gates(BAD, "bad.toml"))
    assert done.returncode == 1
    assert [p.strip() for p in done.stderr.splitlines()[1:]] == error["problems"]
    assert env.kept() == 0  # nothing kept, though record was given


def test_bodies_that_are_no_gates_file_are_refused_in_the_one_error_shape(env: Env) -> None:
    post, header = env.client.post, env.header
    assert post("/api/v1/gates", json={"text": PASSING}).status_code == 401  # a key is needed
    toml = {**header, "Content-Type": "text/plain"}
    for body, status in [
        ({"text": ""}, 422),  # no file
        ({"file": PASSING}, 422),  # not the field
        ({"text": PASSING, "record": "x"}, 422),  # record is a query parameter
    ]:
        reply = post("/api/v1/gates", json=body, headers=header)
        assert reply.status_code == status and set(reply.json) == {"error"}, reply.json
    assert post("/api/v1/gates", headers=header).status_code == 422  # no body at all
    latin = post("/api/v1/gates", data="name = 'é'".encode("latin-1"), headers=toml)
    assert latin.status_code == 400 and "not UTF-8" in latin.json["error"]["message"]
    broken = post("/api/v1/gates", data=b"[[gate]\nrun = 1", headers=toml)
    assert broken.status_code == 400
    assert broken.json["error"]["problems"][0].startswith("line 1: not valid TOML")
    csv = post("/api/v1/gates", data=b"a,b", headers={**header, "Content-Type": "text/csv"})
    assert csv.status_code == 400 and "send JSON" in csv.json["error"]["message"]
    blank = post("/api/v1/gates?record=%20", json={"text": PASSING}, headers=header)
    assert blank.status_code == 400 and env.kept() == 0
