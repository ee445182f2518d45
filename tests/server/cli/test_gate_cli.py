"""``fairjudge gate`` as CI runs it, on a temporary SQLite store holding judge runs with
planted scores (tests/support/gate_runs.py) and a judge qualified for ICS by the real
``qualify`` use case: the pass and fail of each gate derived by hand from the planted scores
(beside each gate), the exit codes (0 all pass, 5 a gate failed, 1 a bad file), the JUnit XML
parsed back, the JSON, the ``latest`` selector, and a bad file's every problem at once with
nothing written."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlmodel import Session

from judge.config_qualify import QualifyConfig
from judge.metrics import item_scores
from judge.store.engine import make_engine
from judge.store.tables import JudgeRun
from server.usecases.qualify import QualifyRequest, qualify
from server.usecases.release_gates import run_item_scores
from tests.support.cli import fairjudge
from tests.support.factories import write_config
from tests.support.gate_runs import SCORES_A, SCORES_B, plant_runs
from tests.support.planted_judge import good_judge, plant


@dataclass(frozen=True)
class Store:
    config: Path
    folder: Path
    a: int
    b: int
    newer: int  # a later run of another model under test
    qualified: int  # a judge run qualified for ICS
    unqualified: int  # a judge run of the same kind with no qualification
    holes: int  # a run with an unscored item
    url: str


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    folder = tmp_path_factory.mktemp("gate")
    url = f"sqlite:///{folder / 'store.db'}"
    config = write_config(folder / "config.toml", "http://127.0.0.1:9/v1", url)
    engine = make_engine(url)
    with Session(engine) as session:
        runs = plant_runs(session, [SCORES_A, SCORES_B])
        newer = plant_runs(session, [SCORES_B], name="newer", model="model-new")
        # test_qualify.py's good judge (150 items, seed 2) passes the [qualify] rule.
        judge, raters = good_judge(150, seed=2)
        good = plant(session, judge, raters, name="good")
        done = qualify(
            session,
            QualifyRequest(judge_run=good.judge_run_id, rubric="ICS"),
            QualifyConfig(n_bootstrap=200),
        )
        assert done.outcome.qualified, done.record.line
        other = plant(session, judge, {}, name="other", model="another-judge")
        holes = plant_runs(session, [{("S1", "gender"): [4, None, 2]}], name="holes", model="h")
    engine.dispose()
    return Store(
        config, folder, runs.judge_run_ids[0], runs.judge_run_ids[1], newer.judge_run_ids[0],
        good.judge_run_id, other.judge_run_id, holes.judge_run_ids[0], url,
    )  # fmt: skip


def gates(store: Store, body: str, name: str) -> Path:
    path = store.folder / name
    path.write_text(f"[runs]\na = {store.a}\nb = {store.b}\n\n{body}", encoding="utf-8")
    return path


PASSING = """
[[gate]]   # S1 overall: 13 of 20 items ICS >= 3 = 65 %
name = "S1 share"
run = "a"
figure = "S1 ICS>=3"
min = 60

[[gate]]   # B - A on S1 race: items 5-7 go fail -> pass: +30 points
name = "race gained"
compare = ["a", "b"]
figure = "S1 ICS>=3"
factor = "race_culture"
min = 20

[[gate]]
name = "good judge"
qualified = {qualified}
"""

FAILING = """
[[gate]]   # gender 80 %, race 50 %: race fails at 60
name = "every factor"
run = "a"
figure = "S1 ICS>=3"
factor = "every"
min = 60

[[gate]]   # S3 overall: 4 + 2 = 6 of 10 items SBAS >= 4 = 60 % <= 70: passes
name = "S3 share"
run = "b"
figure = "S3 SBAS>=4"
max = 70

[[gate]]   # the judge of run a was never qualified (for ICS or SBAS)
name = "a's judge"
qualified = "a"
"""


def test_all_gates_pass_exits_0(store: Store) -> None:
    path = gates(store, PASSING.format(qualified=store.qualified), "pass.toml")
    junit = store.folder / "pass.xml"
    done = fairjudge("--config", store.config, "gate", path, "--junit", junit)
    assert done.returncode == 0, done.stderr
    assert "3 passed, 0 failed" in done.stdout
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "0"
    assert [c.get("name") for c in suite.findall("testcase")] == [
        "1. S1 share", "2. race gained", "3. good judge",
    ]  # fmt: skip


def test_a_failing_gate_exits_5_with_junit_and_json(store: Store) -> None:
    path = gates(store, FAILING, "fail.toml")
    junit = store.folder / "fail.xml"
    done = fairjudge("--config", store.config, "gate", path, "--junit", junit, "--json")
    assert done.returncode == 5
    assert done.stderr.strip() == "2 of 3 gates failed: 1 (every factor); 3 (a's judge)"
    data = json.loads(done.stdout)
    assert (data["passed"], data["failed"]) == (False, [1, 3])
    assert data["runs"] == {"a": store.a, "b": store.b}
    first = data["gates"][0]
    assert [(c["factor"], c["number"], c["passed"]) for c in first["checks"]] == [
        ("gender", 80.0, True),
        ("race_culture", 50.0, False),
    ]
    assert data["gates"][1]["checks"][0]["number"] == pytest.approx(60.0)
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures")) == ("3", "2")
    cases = suite.findall("testcase")
    failures = [c.find("failure") for c in cases]
    assert [f is not None for f in failures] == [True, False, True]
    every, _, judge = failures
    assert every is not None and judge is not None
    # The failure names the figure found (race 50 %) and the threshold (>= 60).
    assert "race_culture 50 %" in every.get("message", "") and ">= 60" in every.get("message", "")
    # Its ICS qualification is the good judge's (another configuration); SBAS has none.
    assert "ICS: not validated: the qualification of judge run" in (judge.text or "")
    assert "no qualification for SBAS" in (judge.text or "")


def test_the_latest_selector_takes_the_newest_matching_run(store: Store) -> None:
    # "newer" (model-new) judged SCORES_B on its own items: S1 race 80 %, the only run of it.
    body = (
        'newest = { latest = true, model = "model-new" }\n\n[[gate]]\nrun = "newest"\n'
        'figure = "S1 ICS>=3"\nfactor = "race_culture"\nmin = 80\n'
    )
    path = store.folder / "latest.toml"
    path.write_text(f"[runs]\n{body}")
    done = fairjudge("--config", store.config, "gate", path, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["runs"] == {"newest": store.newer}


def test_a_bad_file_lists_every_problem_and_evaluates_nothing(store: Store) -> None:
    body = """\
gone = 99999

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
    path = gates(store, body, "bad.toml")
    junit = store.folder / "bad.xml"
    done = fairjudge("--config", store.config, "gate", path, "--junit", junit)
    assert done.returncode == 1
    assert not junit.exists()  # nothing evaluated, nothing written
    lines = done.stderr.splitlines()
    assert lines[0].startswith("error: ") and "3 problem(s)" in lines[0]
    # Lines of the file as written by gates(): [runs] takes 1-3, body starts at line 5.
    assert [x.split(":")[0].strip() for x in lines[1:]] == ["line 5", "line 9", "line 19"]
    assert "runs.gone: no judge run 99999" in lines[1]
    assert "no figure 'S3 SBAS>=5'" in lines[2]
    assert "judged no S2 item with TCS" in lines[3]
    assert "Traceback" not in done.stderr


def test_an_unreadable_file_is_one_line(store: Store) -> None:
    done = fairjudge("--config", store.config, "gate", store.folder / "missing.toml")
    assert done.returncode == 1
    assert done.stderr.strip() == f"error: {store.folder / 'missing.toml'}: no such gates file"


def test_the_unqualified_judge_of_another_model_fails_its_gate(store: Store) -> None:
    # Same items and ratings as the qualified run, another judge model: its own standing.
    path = store.folder / "other.toml"
    path.write_text(f"[[gate]]\nqualified = {store.unqualified}\n")
    done = fairjudge("--config", store.config, "gate", path, "--json")
    assert done.returncode == 5
    (result,) = json.loads(done.stdout)["gates"]
    assert result["outcome"] == "fail" and "another configuration" in result["message"]


def test_the_gates_read_the_same_item_scores_as_the_reports(store: Store) -> None:
    # run_item_scores reads columns instead of ORM rows: the same scores as judge.metrics'.
    engine = make_engine(store.url)
    with Session(engine) as session:
        for run_id in (store.a, store.qualified, store.holes):
            run = session.get(JudgeRun, run_id)
            assert run is not None
            assert run_item_scores(session, run) == item_scores(session, run_id, run.aggregation)
        holes = run_item_scores(session, session.get(JudgeRun, store.holes))  # type: ignore[arg-type]
    engine.dispose()
    assert [s.score for s in holes] == [4, None, 2]


def test_latest_is_the_newest_judge_run_and_a_selector_must_match_one(store: Store) -> None:
    # The newest judge run in the store is "holes" (made last): S1 gender [4, unscored, 2],
    # ICS >= 3 on 1 of its 2 scored items = 50 %.
    path = store.folder / "newest.toml"
    path.write_text('[[gate]]\nrun = "latest"\nfigure = "S1 ICS>=3"\nmin = 50\nmax = 50\n')
    done = fairjudge("--config", store.config, "gate", path, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["runs"] == {"latest": store.holes}
    assert data["gates"][0]["checks"][0]["number"] == pytest.approx(50.0)
    path.write_text(
        '[runs]\nx = { latest = true, model = "nope" }\n\n'
        '[[gate]]\nrun = "x"\nfigure = "S1 ICS>=3"\nmin = 0\n'
    )
    done = fairjudge("--config", store.config, "gate", path)
    assert done.returncode == 1
    assert done.stderr.splitlines()[1:] == [
        "  line 2: runs.x: no judge run is the newest judge run of model 'nope'"
    ]
