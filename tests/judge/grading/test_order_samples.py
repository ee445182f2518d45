"""`fairjudge judge --swap-order --samples 2`, then every view of the run: the report (CLI and
API), `agreement --run` with ratings imported, the judgments listing and the export.

Such a run stores a pair rubric's 2 repeats as given at sample indices 0-1 and its 2 swapped
repeats at 2-3. The planted judge below scores, per judge prompt, by how often that exact
prompt was asked before (the repeats of one order are the same prompt):

* as given (side A first): 4 on the first call, 5 on the second -> combined 4.5;
* swapped (side B first): 2 and 2 -> combined 2;
* ICS (no pair): 3 always.

So, by hand: every pair is recency-preferring (4.5 > 2): PC 0, PF +1, mean change -2.5;
repetition stability (1/2 + 2/2) / 2 = 0.75; each item's score combines its four samples,
(4 + 5 + 2 + 2) / 4 = 3.25; within one order the repeats differ for half the (item, order)
rows (given: 4 vs 5; swapped: 2 vs 2)."""

from __future__ import annotations

import csv
import io
import json
import threading
from collections import Counter
from pathlib import Path
from statistics import fmean
from typing import Any

import krippendorff
import numpy as np
import pytest
from click.testing import CliRunner, Result

from judge.store.engine import make_engine
from server import create_app
from server.auth import create_key
from server.cli import cli
from tests.judge.grading.test_order_position import PAIRS, _pair
from tests.support.factories import SAMPLE, make_settings, write_config
from tests.support.stub_openai import StubServer

GRADE = '{{"explanation": "stub", "score": {}}}'
# the six S2 items the people rate (TCS), three raters each: hand-chosen scores
RATED = {"r1": [3, 4, 2, 5, 3, 4], "r2": [3, 3, 2, 4, 4, 4], "r3": [4, 4, 3, 5, 3, 2]}


class Repeats:
    """The planted judge: the score of the n-th call of one prompt (see the docstring)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, messages: list[dict[str, str]]) -> str | None:
        if messages[0]["role"] != "system":
            return None
        pair = _pair(messages)
        if pair is None:
            return GRADE.format(3)
        with self.lock:
            self.calls[messages[-1]["content"]] += 1
            nth = self.calls[messages[-1]["content"]]
        return GRADE.format((4 if nth == 1 else 5) if pair[0] == "A" else 2)


def run(config: Path, *args: str) -> Result:
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result


@pytest.fixture(scope="module")
def views(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Judge in both orders with 2 samples, import ratings, then read every view (once for
    the module: the views are only read)."""
    tmp_path = tmp_path_factory.mktemp("order_samples")
    db_url = f"sqlite:///{tmp_path / 'fairjudge.db'}"
    out: dict[str, Any] = {}
    with StubServer(responder=Repeats()) as stub:
        config = write_config(tmp_path / "c.toml", stub.base_url, db_url, concurrency=4)
        run(config, "dataset", "import", str(SAMPLE), "--name", "sample")
        gen = json.loads(run(config, "generate", "sample", "--json").output)["run_id"]
        judged = run(config, "judge", str(gen), "--swap-order", "--samples", "2", "--json")
        jrun = json.loads(judged.output)["run_id"]
        keys = sorted(json.loads(line)["id"] for line in SAMPLE.read_text().splitlines()
                      if json.loads(line)["stage"] == "S2")[:6]  # fmt: skip
        ratings = tmp_path / "ratings.csv"
        with ratings.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["item_id", "rubric", "rater", "score"])
            for rater, scores in RATED.items():
                w.writerows([k, "TCS", rater, s] for k, s in zip(keys, scores, strict=True))
        run(config, "ratings", "import", str(ratings), "--run", str(gen))
        agreement = run(config, "agreement", "--run", str(gen), "--bootstrap", "50", "--json")
        out["agreement"] = json.loads(agreement.output)
        run(config, "report", str(jrun), "--out", str(tmp_path / "after"))
        out["after"] = json.loads((tmp_path / "after" / "report.json").read_text())
        out["after_html"] = (tmp_path / "after" / "report.html").read_text()
        run(config, "export", str(jrun), "--out", str(tmp_path / "export"))
        with (tmp_path / "export" / "judgments.csv").open(newline="") as f:
            out["export"] = list(csv.DictReader(f))
        engine = make_engine(db_url)
        _, key = create_key(engine, "member", "member")
        engine.dispose()
        app = create_app({"SETTINGS": make_settings(stub.base_url, db_url), "TESTING": True})
        client, auth = app.test_client(), {"Authorization": f"Bearer {key}"}
        api = client.get(f"/api/v1/judge-runs/{jrun}/report.json", headers=auth)
        out["api"] = (api.status_code, api.json)
        api_csv = client.get(f"/api/v1/judge-runs/{jrun}/report.csv", headers=auth)
        out["api_csv"] = (api_csv.status_code, api_csv.data.decode())
        listing = client.get(
            f"/api/v1/judgments?judge_run={jrun}&rubric=TCS&item={keys[0]}", headers=auth
        )
        out["listing"] = (listing.status_code, listing.json)
    return out


def test_the_report_measures_order_per_pair_and_samples_within_orders(
    views: dict[str, Any],
) -> None:
    report = views["after"]
    order = report["judge_diagnostics"]["order"]
    assert order["samples_per_order"] == 2
    for r in order["rubrics"]:
        # 4.5 as given vs 2 swapped in every pair (module docstring)
        similar = r["rubric"] in ("TCS", "PCS", "ETCS")  # similarity: no preference labels
        recency, fairness = (None, None) if similar else (PAIRS, 1.0)
        assert (r["pairs"], r["consistent"], r["recency_preferring"]) == (PAIRS, 0, recency)
        assert r["position_consistency"] == 0.0 and r["preference_fairness"] == fairness
        assert r["mean_difference"] == pytest.approx(-2.5)
        assert r["repetition_stability"] == pytest.approx(0.75)
        assert r["flag_reasons"] == (["inconsistent"] if similar else ["inconsistent", "recency"])
    scores = {(r["rubric"], r["item_key"]): r for r in report["item_scores"]}
    tcs = [r for (rubric, _), r in scores.items() if rubric == "TCS"]
    assert len(tcs) == PAIRS and {r["score"] for r in tcs} == {3.25}
    assert {r["n_samples"] for r in tcs} == {4}  # 2 repeats x 2 orders
    metrics = {m["metric"]: m["value"] for m in report["metrics_overall"]}
    assert metrics["S2 TCS mean (% of max)"] == pytest.approx(3.25 / 5 * 100)  # 65 %
    assert metrics["S2 TCS share>=4 (%)"] == 0 and metrics["S3 SBAS share>=4 (%)"] == 0
    assert metrics["S1 ICS share>=3 (%)"] == 100
    assert report["judge_run"]["swap_order"] is True
    # Self-consistency compares repeats within one order: 18 items x 2 orders = 36 rows,
    # half of them (as given: 4 vs 5) disagreeing.
    sc = report["self_consistency"]["TCS"]
    assert (sc["n_items"], sc["n_samples"], sc["share_disagreeing"]) == (36, 2, 0.5)
    grid = np.array([[4, 5]] * PAIRS + [[2, 2]] * PAIRS, dtype=float)  # rows: item x order
    expected = krippendorff.alpha(grid.T, level_of_measurement="interval")  # second library
    assert sc["alpha_interval"]["value"] == pytest.approx(expected)
    ics = report["self_consistency"]["ICS"]
    assert (ics["n_items"], ics["share_disagreeing"]) == (36, 0.0)  # 18 S1 + 18 S4, one order


def test_the_item_browser_names_each_judgments_order_and_repeat(views: dict[str, Any]) -> None:
    items = views["after"]["items"]
    pairs = [i for i in items if i["stage"] == "S2"]
    assert len(pairs) == PAIRS
    for item in pairs:
        tcs = [j for j in item["judgments"] if j["rubric"] == "TCS"]
        # indices 0-1 as given, 2-3 swapped (module docstring); repeats count within an order
        slots = sorted((j["sample_index"], j["position"], j["repeat"]) for j in tcs)
        assert slots == [(0, "given", 0), (1, "given", 1), (2, "swapped", 0), (3, "swapped", 1)]
        by_order = {
            p: sorted(j["score"] for j in tcs if j["position"] == p) for p in ("given", "swapped")
        }
        assert by_order == {"given": [4, 5], "swapped": [2, 2]}  # the planted judge's scores
    ics = [j for i in items if i["stage"] == "S1" for j in i["judgments"]]
    assert {(j["position"], j["repeat"]) for j in ics} == {(None, 0), (None, 1)}  # one order
    html = views["after_html"]
    assert "<td>1 (swapped)</td>" in html and "<td>0 (given)</td>" in html


def test_agreement_and_reports_with_ratings(views: dict[str, Any]) -> None:
    (judge,) = views["agreement"]["rubrics"]["TCS"]["judges"]
    assert judge["n"] == 6 and "both orders" in judge["label"]
    human = [fmean(s) for s in zip(*RATED.values(), strict=True)]  # each item's mean rating
    # the judge's item score is 3.25 on every item (module docstring)
    diff = judge["coefficients"]["mean_difference"]["value"]
    assert diff == pytest.approx(3.25 - fmean(human))
    assert judge["self_consistency"]["n_items"] == 36
    assert judge["self_consistency"]["share_disagreeing"] == 0.5
    # TCS is a similarity score: inconsistent only, never "recency" (issue 42)
    assert "order (inconsistent)" in judge["judge_checks_flagged"]
    (row,) = [r for r in views["after"]["agreement"]["rows"] if r["rubric"] == "TCS"]
    assert row["n"] == 6  # the report's agreement section reads the same ratings
    assert row["mean_difference"].startswith(f"{3.25 - fmean(human):+.2f} ")
    assert "order (inconsistent)" in row["judge checks flagged"]


def test_the_api_report_and_listing(views: dict[str, Any]) -> None:
    status, body = views["api"]
    assert status == 200
    assert body["judge_diagnostics"]["order"] == views["after"]["judge_diagnostics"]["order"]
    status, text = views["api_csv"]
    assert status == 200 and list(csv.reader(io.StringIO(text)))[0][0] == "model"
    status, page = views["listing"]
    assert status == 200
    rows = sorted((j["sample_index"], j["position"], j["score"]) for j in page["items"])
    assert [(s, p) for s, p, _ in rows] == [(0, "given"), (1, "given"), (2, "swapped"),
                                            (3, "swapped")]  # fmt: skip
    assert sorted(s for _, _, s in rows) == [2, 2, 4, 5]


def test_the_export_names_the_order_and_repeat(views: dict[str, Any]) -> None:
    rows = views["export"]
    # ICS: 36 items x 2 samples; TCS, PCS, ETCS (18 S2 items) and SBAS (18 S3): 4 x 18 x 4
    assert len(rows) == 36 * 2 + 4 * PAIRS * 4
    ics = [r for r in rows if r["rubric"] == "ICS"]
    assert {(r["position"], r["repeat"]) for r in ics} == {("", "0"), ("", "1")}
    pair_rows = [r for r in rows if r["rubric"] != "ICS"]
    cells = Counter((r["item_key"], r["rubric"], r["position"]) for r in pair_rows)
    assert set(cells.values()) == {2}
    for r in pair_rows:
        index, repeat = int(r["sample_index"]), int(r["repeat"])
        assert repeat == (index - 2 if r["position"] == "swapped" else index)
        assert (r["position"] == "swapped") == (r["score"] == "2")
