"""``GET /api/v1/drift?runs=...`` through Flask's test client on the drift series of
tests/server/cli/test_drift_cli.py (six runs of one judge configuration on 60 anchor items,
+0.5 on the mean from run 5): the reply equals ``fairjudge drift --json`` on the same store
(the command's JSON is the independent source), the hand-derived figures of that module hold
(the planted drift rings at run 5, not before), and bad series are a 400 (one line), an
unknown run a 404, a bad query a 422."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from flask.testing import FlaskClient
from sqlalchemy.engine import Engine
from sqlmodel import Session
from werkzeug.test import TestResponse

from server import create_app
from server.auth import create_key
from server.schemas.drift import DriftOut
from tests.server.cli.test_drift_cli import _runs
from tests.support.cli import fairjudge
from tests.support.factories import make_settings


@dataclass(frozen=True)
class Env:
    client: FlaskClient
    header: dict[str, str]
    series: list[int]
    db_url: str

    def get(self, query: str) -> TestResponse:
        return self.client.get(f"/api/v1/drift?{query}", headers=self.header)


@pytest.fixture
def env(engine: Engine, db_url: str) -> Iterator[Env]:
    with Session(engine) as session:
        series = _runs(session)[0]
    _, raw = create_key(engine, "member", "member")
    app = create_app({"SETTINGS": make_settings("http://127.0.0.1:9/v1", db_url),
                      "TESTING": True})  # fmt: skip
    yield Env(app.test_client(), {"Authorization": f"Bearer {raw}"}, series, db_url)
    app.extensions["fairjudge_engine"].dispose()


def _cli(env: Env, *args: str | int) -> dict:
    done = fairjudge("--db", env.db_url, "drift", *map(str, args), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_series_equals_the_commands_json(env: Env) -> None:
    runs = ",".join(map(str, env.series))
    reply = env.get(f"runs={runs}")
    assert reply.status_code == 200, reply.json
    body = reply.json
    assert DriftOut.model_validate(body).model_dump(mode="json") == body  # all declared
    assert body == _cli(env, *env.series)
    (fig,) = body["figures"]
    rows = fig["rows"]
    # By hand (test_drift_cli.py): runs 2-4 do not move the mean, runs 5 and 6 add 0.5.
    assert [r["estimate"] for r in rows[1:]] == pytest.approx([0.0, 0.0, 0.0, 0.5, 0.5])
    assert [r["alarm"] for r in rows] == [False, False, False, False, True, True]
    assert fig["first_alarm_run"] == env.series[4]
    # Two figures and a two-run baseline, as the command's options.
    query = f"runs={runs}&figure=S1%20ICS%3E%3D3&figure=s1%20ics%20mean&baseline=2&alpha=0.1"
    both = env.get(query).json
    assert both == _cli(env, *env.series, "--figure", "S1 ICS>=3", "--figure", "s1 ics mean",
                        "--baseline", 2, "--alpha", 0.1)  # fmt: skip
    assert [f["alpha"] for f in both["figures"]] == pytest.approx([0.05, 0.05])  # 0.1 / 2
    # baseline share: items at 3 or 4 (i % 3 in {1, 2}) are 40 of 60 = 66.7 %.
    assert both["figures"][0]["rows"][0]["value"] == pytest.approx(200 / 3)


def test_bad_series_are_400_404_or_422(env: Env) -> None:
    s = env.series
    for query, says in (
        (f"runs={s[0]}", "at least two judge runs"),
        (f"runs={s[0]},{s[1]},{s[0]}", "listed twice"),
        (f"runs={s[0]},{s[1]}&figure=S9%20XYZ%20mean", "no figure 'S9 XYZ mean'"),
        (f"runs={s[0]},{s[1]}&baseline=2", "leaves no run to watch"),
    ):
        reply = env.get(query)
        assert reply.status_code == 400, (query, reply.json)
        error = reply.json["error"]
        assert says in error["message"] and "\n" not in error["message"], query
    for query in (f"runs={s[0]},99999", f"runs={s[0]},2147483648"):  # 2**31: past any id
        reply = env.get(query)
        assert reply.status_code == 404 and "no judge run" in reply.json["error"]["message"]
    for query in ("", "runs=1,x", "runs=0,1", "runs=1,2&alpha=1", "runs=1,2&baseline=0",
                  "runs=1,99999999999", "runs=1,2&other=3"):  # fmt: skip
        assert env.get(query).status_code == 422, query
