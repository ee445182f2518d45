"""The jury, drift and gates pages (/jury, /drift, /gates) on one SQLite store holding a
planted jury (a good judge and two noisy ones of the same answers, as in
tests/server/api/test_juries_api.py), the drift series of tests/server/cli/test_drift_cli.py and
a gates verdict ``fairjudge gate`` kept: the numbers under each page's charts are the ones the
command prints as JSON for the same store (the independent source), the judges' agreement is
scipy's on the planted lists, the planted drift's alarm is marked where it was derived by
hand, and a jury or series the data cannot make is said on the page in one line."""

from __future__ import annotations

import html
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from flask.testing import FlaskClient
from scipy import stats
from sqlmodel import Session

from judge.store.engine import make_engine
from server import create_app
from server.auth import create_key
from tests.server.api.test_gate_verdicts_api import FAILING
from tests.server.cli.test_drift_cli import _runs
from tests.server.dashboard.helpers import fields, sign_in, tables
from tests.support.cli import fairjudge
from tests.support.factories import make_settings, write_config
from tests.support.gate_runs import SCORES_A, SCORES_B, plant_runs
from tests.support.planted_judge import add_judge_run, plant

N = 90


@dataclass(frozen=True)
class Pages:
    client: FlaskClient
    url: str
    jury: list[int]  # good, noisy, noisy, then a run of other answers
    human: list[float]
    judges: list[list[float]]
    series: list[int]


def _jury(session: Session) -> tuple[list[int], list[float], list[list[float]]]:
    """test_juries_api.py's planted jury: noise sd 0.3 and twice 2.0 around the raters' mean."""
    rng = np.random.default_rng(0)
    truth = rng.integers(1, 6, N)
    raters = {f"r{k}": np.clip(truth + rng.integers(-1, 2, N), 1, 5).tolist() for k in range(3)}
    human = np.mean(list(raters.values()), axis=0)
    judges = [np.clip(np.round(human + rng.normal(0, sd, N)), 1, 5).tolist()
              for sd in (0.3, 2.0, 2.0)]  # fmt: skip
    first = plant(session, judges[0], raters, name="jury", model="good")
    runs = [first.judge_run_id]
    for k, scores in enumerate(judges[1:]):
        runs.append(add_judge_run(session, first.generation_run_id, first.item_ids, scores,
                                  model=f"noisy{k}").judge_run_id)  # fmt: skip
    runs.append(plant(session, judges[0], raters, name="other").judge_run_id)
    return runs, human.tolist(), judges


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory, empty_template: Path) -> Iterator[Pages]:
    from tests.support import stores

    folder = tmp_path_factory.mktemp("watch-pages")
    stores.copy_store(empty_template, folder / "store.db")
    url = f"sqlite:///{folder / 'store.db'}"
    engine = make_engine(url)
    with Session(engine) as session:
        jury, human, judges = _jury(session)
        series = _runs(session)[0]
        gate = plant_runs(session, [SCORES_A, SCORES_B])
        session.commit()
    a, b = gate.judge_run_ids
    path = folder / "gates.toml"
    path.write_text(f"[runs]\na = {a}\nb = {b}\n{FAILING}", encoding="utf-8")
    config = write_config(folder / "config.toml", "http://127.0.0.1:9/v1", url)
    assert fairjudge("--config", config, "gate", path, "--record", "nightly").returncode == 5
    _, raw = create_key(engine, f"member-{uuid.uuid4().hex[:8]}", "member")
    app = create_app({"SETTINGS": make_settings("http://127.0.0.1:9/v1", url), "TESTING": True,
                      "SECRET_KEY": "watch-secret"})  # fmt: skip
    client = app.test_client()
    assert sign_in(client, raw).status_code == 302
    yield Pages(client, url, jury, human, judges, series)
    app.extensions["fairjudge_engine"].dispose()
    engine.dispose()


def _query(path: str, runs: list[int], extra: str = "") -> str:
    return f"{path}?" + "&".join(f"judge_run={r}" for r in runs) + extra


def _cli(pages: Pages, *args: object) -> dict:
    done = fairjudge("--db", pages.url, *map(str, args), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_jury_page_shows_the_commands_numbers(pages: Pages) -> None:
    runs = pages.jury[:3]
    reply = pages.client.get(_query("/jury", runs))
    assert reply.status_code == 200
    data = _cli(pages, "jury", *runs)["rubrics"]["ICS"]
    found = tables(reply.text)
    title = next(t for t in found if t.startswith("ICS: each judge and the jury"))
    rows = found[title][1:]
    assert [r[1] for r in rows] == [
        f"{m['coefficients']['spearman']['value']:.3f}" for m in [*data["judges"], data["jury"]]
    ]
    for row, scores in zip(rows, pages.judges, strict=False):  # the judges: scipy's rho
        assert row[1] == f"{stats.spearmanr(scores, pages.human).statistic:.3f}"
    versus = found[next(t for t in found if t.startswith("ICS: jury minus its best judge"))][1]
    v = data["versus_best"]
    assert versus[:5] == [f"{v['difference']:.3f}", f"{v['ci_low']:.3f}", f"{v['ci_high']:.3f}",
                          str(v["n"]), v["verdict"]]  # fmt: skip
    # Noise sd sqrt(0.09 + 8) / 3 = 0.95 for the mean against 0.3 for the good judge.
    assert (
        v["verdict"] == "worse"
        and "worse" in fields(reply.text, "section", "Rubric ICS")["verdict"]
    )
    assert [r[2] for r in found["cost"][1:]] == ["unknown"] * 3  # no prices configured
    assert f"/api/v1/juries?runs={runs[0]}%2C{runs[1]}%2C{runs[2]}" in reply.text


def test_the_jury_page_says_why_there_is_no_jury(pages: Pages) -> None:
    for runs, says in (([pages.jury[0]], "Pick two or more"),
                       ([pages.jury[0], pages.jury[3]], "judged different answers")):  # fmt: skip
        reply = pages.client.get(_query("/jury", runs))
        message = re.search(r'<p id="jury-message"[^>]*>([^<]*)</p>', reply.text)
        assert reply.status_code == 200 and message, says
        assert says in html.unescape(message.group(1))
    assert pages.client.get(_query("/jury", pages.jury[:2], "&combine=vote")).status_code == 400


def test_the_drift_page_marks_the_planted_alarm(pages: Pages) -> None:
    series = pages.series
    reply = pages.client.get(_query("/drift", list(reversed(series))))  # the ids set the order
    assert reply.status_code == 200
    data = _cli(pages, "drift", *series)["figures"][0]
    found = tables(reply.text)
    rows = found[next(t for t in found if t.startswith("S1 ICS mean: drift per run"))][1:]
    assert [r[0] for r in rows] == [str(s) for s in series]
    assert [r[4] for r in rows] == ["—", *[f"{r['estimate']:.3f}" for r in data["rows"][1:]]]
    assert [r[5] for r in rows[1:]] == [f"{r['low']:.3f}" for r in data["rows"][1:]]
    # By hand (test_drift_cli.py): runs 5 and 6 add 0.5 to the mean; the alarm rings there.
    assert [r[4] for r in rows[4:]] == ["0.500", "0.500"]
    assert [r[9] for r in rows] == ["no", "no", "no", "no", "yes", "yes"]
    assert f"first alarm at judge run {series[4]}" in reply.text
    assert reply.text.count("ALARM") >= 2 and "score points" in reply.text


def test_the_drift_page_says_why_there_is_no_series(pages: Pages) -> None:
    reply = pages.client.get(_query("/drift", [pages.series[0], pages.jury[0]]))
    assert reply.status_code == 200
    message = re.search(r'<p id="drift-message"[^>]*>([^<]*)</p>', reply.text)
    assert message and "judged another dataset" in html.unescape(message.group(1))


def test_the_gates_page_lists_the_last_verdict(pages: Pages) -> None:
    reply = pages.client.get("/gates")
    assert reply.status_code == 200
    rows = tables(reply.text)["gates nightly"][1:]
    # By hand (test_gate_verdicts_api.py): race 50 % < 60 fails gate 1; S3 60 % <= 70 passes.
    assert [(r[1], r[3], r[4]) for r in rows] == [
        ("every factor", "FAIL", ">= 60"), ("S3 share", "pass", "<= 70"),
    ]  # fmt: skip
    shown = fields(reply.text, "section", "Verdict nightly")
    assert (shown["passed"], shown["counts"]) == ("FAILED", "1 of 2 gates passed")
