"""`fairjudge drift` on a series of stored judge runs with planted scores (rows written
directly, tests/support/planted_judge.py), end to end through the command's ``main``: the
table, the JSON checked against hand-derived values and statsmodels, and the bad input each
refused with one line and exit 1.

The series: 60 S1 items, rubric ICS, judged by one judge configuration six times. Each run
judges its own generation run (a release: ``model-v1`` for runs 2-4, ``model-v2`` for runs
5-6). The baseline (run 1) scores item i ``2 + i % 3`` (2, 3, 4 in turn: mean 3):

* run 2: the same scores (every difference 0);
* run 3: +1 on items i % 6 == 0 and -1 on i % 6 == 1 (ten each: mean difference 0);
* run 4: the same as the baseline with item 0 unscored (59 pairs, one dropped);
* runs 5 and 6: +1 on every even item (30 of 60: mean difference 0.5), the drift.
"""

from __future__ import annotations

import json
import math

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session
from statsmodels.stats.weightstats import DescrStatsW

from judge.store.tables import GenerationRun
from tests.support.cli import fairjudge
from tests.support.planted_judge import add_judge_run, plant

N = 60
BASE = [2 + i % 3 for i in range(N)]


def _release(session: Session, dataset_id: int, model: str) -> int:
    """One more generation run of the dataset (a release of the model under test): the store
    holds one judge run per generation run and judge configuration, so each run of a series
    judges its own release's answers."""
    gen = GenerationRun(
        endpoint_name="m", base_url="http://gen.example/v1", model=model, temperature=0.0,
        max_tokens=64, status="finished", dataset_id=dataset_id, template_version="gen-v1",
    )  # fmt: skip
    session.add(gen)
    session.flush()
    assert gen.id is not None
    return gen.id


def _runs(session: Session) -> tuple[list[int], list[int]]:
    """The six runs above (ids in release order) and the item ids."""
    p = plant(session, BASE, {}, name="anchors", model="judge-model")
    noisy = [b + (1 if i % 6 == 0 else -1 if i % 6 == 1 else 0) for i, b in enumerate(BASE)]
    unscored: list[float | None] = [None, *BASE[1:]]
    up = [b + (i % 2 == 0) for i, b in enumerate(BASE)]
    ids = [p.judge_run_id]
    for model, scores in [("model-v1", BASE), ("model-v1", noisy), ("model-v1", unscored),
                          ("model-v2", up), ("model-v2", up)]:  # fmt: skip
        gen = _release(session, p.dataset_id, model)
        ids.append(add_judge_run(session, gen, p.item_ids, scores).judge_run_id)
    return ids, p.item_ids


@pytest.fixture
def series(engine: Engine) -> list[int]:
    with Session(engine) as session:
        return _runs(session)[0]


def _json(db_url: str, *args: str | int) -> dict:
    done = fairjudge("--db", db_url, "drift", *map(str, args), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_planted_drift_rings_at_run_5_and_not_before(db_url: str, series: list[int]) -> None:
    data = _json(db_url, *series)
    assert data["anchors"] == N and data["baseline"] == 1
    (fig,) = data["figures"]  # S1 has one rubric, so one rubric mean
    assert fig["figure"]["name"] == "S1 ICS mean"
    rows = fig["rows"]
    assert [r["look"] for r in rows] == [None, 1, 2, 3, 4, 5]
    assert rows[0]["value"] == pytest.approx(3.0)  # (2 + 3 + 4) / 3
    assert [r["estimate"] for r in rows[1:]] == pytest.approx([0.0, 0.0, 0.0, 0.5, 0.5])
    assert [r["alarm"] for r in rows] == [False, False, False, False, True, True]
    assert (rows[3]["pairs"], rows[3]["dropped"]) == (59, 1)
    assert (rows[1]["low"], rows[1]["high"]) == (0.0, 0.0)  # no difference at all
    assert fig["first_alarm_run"] == series[4]
    assert rows[4]["model"] == "model-v2"
    # Look 4 spends 0.05 (1/sqrt(4) - 1/sqrt(5)) = 0.0026393; its interval is the t interval
    # of the 60 differences (30 ones, 30 zeros) at that level, as statsmodels computes it.
    level = 0.05 * (1 / 2 - 1 / math.sqrt(5))
    assert rows[4]["alpha"] == pytest.approx(level, rel=1e-9)
    low, high = DescrStatsW([1.0, 0.0] * 30).tconfint_mean(alpha=level)
    assert (rows[4]["low"], rows[4]["high"]) == pytest.approx((low, high), abs=1e-9)
    # look 3's ten +1 and ten -1 (run 3): mean 0, and an interval that keeps 0 inside
    assert rows[2]["low"] < 0 < rows[2]["high"]


def test_a_share_figure_and_a_two_run_baseline(db_url: str, series: list[int]) -> None:
    data = _json(db_url, *series, "--figure", "S1 ICS>=3", "--figure", "s1 ics mean")
    names = [f["figure"]["name"] for f in data["figures"]]
    assert names == ["S1 ICS>=3", "S1 ICS mean"]
    assert all(f["alpha"] == pytest.approx(0.025) for f in data["figures"])  # 0.05 split in 2
    share = data["figures"][0]["rows"]
    # baseline: items scoring >= 3 are i % 3 in {1, 2}: 40 of 60 = 66.7 %; run 5 lifts the
    # even items, of which those at 2 (i % 6 == 0, ten items) now pass: 50 of 60 = 83.3 %.
    assert share[0]["value"] == pytest.approx(200 / 3)
    assert share[4]["value"] == pytest.approx(250 / 3)
    assert share[4]["estimate"] == pytest.approx(50 / 3)
    # With the first two runs as baseline (identical), run 3 is look 1; run 5 is look 3.
    two = _json(db_url, *series, "--baseline", 2)["figures"][0]["rows"]
    assert [r["look"] for r in two] == [None, None, 1, 2, 3, 4]
    assert two[4]["estimate"] == pytest.approx(0.5) and two[4]["alarm"]


def test_the_table_names_every_run_and_the_first_alarm(db_url: str, series: list[int]) -> None:
    done = fairjudge("--db", db_url, "drift", *map(str, series))
    assert done.returncode == 0, done.stderr
    assert "Drift of S1 ICS mean against the baseline" in done.stdout
    assert done.stdout.count("ALARM") == 2
    assert f"S1 ICS mean: first alarm at judge run {series[4]}" in done.stdout
    assert f"judge run {series[1]}: no pair changed: the interval has no width" in done.stdout


def _refused(db_url: str, *args: str | int) -> str:
    done = fairjudge("--db", db_url, "drift", *map(str, args))
    assert done.returncode == 1, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def test_bad_series_are_refused_with_one_line(engine: Engine, db_url: str) -> None:
    with Session(engine) as session:
        ids, items = _runs(session)
        p = plant(session, BASE, {}, name="first-run-only", model="judge-model")
        release = _release(session, p.dataset_id, "model-v1")
        gap = add_judge_run(session, release, p.item_ids[:57], BASE[:57])
        hotter = add_judge_run(session, release, p.item_ids, BASE, temperature=0.7)
    assert "at least two judge runs" in _refused(db_url, ids[0])
    assert "listed twice" in _refused(db_url, ids[0], ids[1], ids[0])
    assert "no judge run 999" in _refused(db_url, ids[0], 999)
    line = _refused(db_url, p.judge_run_id, gap.judge_run_id)
    assert "gap" in line and "lacks 3 anchor" in line
    assert "first-run-only-57 ICS" in line and "first-run-only-59 ICS" in line
    assert "temperature 0.0 vs 0.7" in _refused(db_url, p.judge_run_id, hotter.judge_run_id)
    assert "another dataset" in _refused(db_url, ids[0], p.judge_run_id)
    line = _refused(db_url, *ids, "--figure", "S9 XYZ mean")
    assert "'S9 XYZ mean'" in line and "S1 ICS mean, S1 ICS>=3" in line
    assert "leaves no run" in _refused(db_url, ids[0], ids[1], "--baseline", 2)
    assert items  # the anchors were stored (the runs above read them)


def test_help_says_what_a_look_costs() -> None:
    done = fairjudge("drift", "--help")
    assert done.returncode == 0
    assert "anytime-valid" in done.stdout and "--baseline" in done.stdout
