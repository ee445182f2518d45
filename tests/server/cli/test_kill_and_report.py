"""Whole commands as a user runs them: a judge run killed with SIGKILL (a real process)
resumes without losing or duplicating a judgment, and `report` (the command's main, run in
process) writes files whose numbers can be rebuilt from the stored rows."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import create_engine
from sqlmodel import Session, select

from judge.store.tables import Item, Judgment
from tests.support.cli import fairjudge
from tests.support.factories import FAIRJUDGE, SAMPLE, wait_until, write_config
from tests.support.kills import requests_of
from tests.support.stub_openai import StubServer

N_S1 = 18  # the sample's first 18 items are S1 (one ICS judgment each); counted in the file


def judge_requests(stub: StubServer) -> int:
    return requests_of(stub, "judge")


def test_sigkill_mid_judge_loses_no_judgment_and_duplicates_none(
    tmp_path: Path, db_url: str
) -> None:
    assert [json.loads(x)["stage"] for x in SAMPLE.read_text().splitlines()[:N_S1]] == ["S1"] * 18
    with StubServer(latency=0.1) as stub:
        config = write_config(tmp_path / "c.toml", stub.base_url, db_url)
        base = [*FAIRJUDGE, "--config", str(config)]
        # Set-up in process; the judge run to be killed is a real process.
        limit = ["--limit", str(N_S1)]
        for args in (["dataset", "import", SAMPLE], ["generate", "fairmonitor_sample", *limit]):
            done = fairjudge("--config", config, *args)
            assert done.returncode == 0, done.stderr
        proc = subprocess.Popen(
            [*base, "judge", "1", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_until(lambda: judge_requests(stub) >= 8, proc)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)  # waits, and closes the pipes
        assert proc.returncode == -signal.SIGKILL
        rerun = subprocess.run([*base, "judge", "1", "--json"], capture_output=True, text=True)
        assert rerun.returncode == 0, rerun.stderr
        paid = judge_requests(stub)
    engine = create_engine(db_url)
    with Session(engine) as s:
        rows = s.exec(select(Judgment.item_id, Judgment.rubric, Judgment.status)).all()
    # Every item judged exactly once (the unique constraint would refuse a duplicate row).
    assert len(rows) == N_S1 and len({(i, r) for i, r, _ in rows}) == N_S1
    assert {status for *_, status in rows} == {"scored"}
    # Each result is committed before its worker starts another call (docs/judging.md), so at
    # concurrency 1 only the one call in flight at the kill is paid again.
    assert N_S1 <= paid <= N_S1 + 1


def test_report_files_can_be_rebuilt_from_the_store(tmp_path: Path, db_url: str) -> None:
    with StubServer() as stub:
        config = write_config(tmp_path / "c.toml", stub.base_url, db_url)
        for args in (["dataset", "import", SAMPLE], ["generate", "fairmonitor_sample"]):
            made = fairjudge("--config", config, *args)  # in process: nothing here needs a process
            assert made.returncode == 0, made.stderr
        judged = fairjudge("--config", config, "judge", "1")
        assert judged.returncode == 0, judged.stderr
        out = tmp_path / "report"
        done = fairjudge("--config", config, "report", "1", "--out", out, "--json")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert set(printed["paths"]) >= {"json", "metrics_csv", "items_csv", "html"}
    engine = create_engine(db_url)
    with Session(engine) as s:
        stored = pd.DataFrame(
            [
                {
                    "id": j.id,
                    "key": i.key,
                    "stage": i.stage,
                    "factor": i.factor,
                    "rubric": j.rubric,
                    "score": j.score,
                }
                for j, i in s.exec(select(Judgment, Item).join(Item)).all()
            ]
        )
    # item_scores.csv: one row per item and rubric, its score the stored judgment's score.
    with (out / "item_scores.csv").open() as handle:
        items = list(csv.DictReader(handle))
    assert len(items) == len(stored) == 72 + 2 * 18  # S2 items have three rubrics: 72 + 36
    by_id = stored.set_index("id")["score"]
    for row in items:
        (judgment_id,) = map(int, row["judgment_ids"].split())
        assert float(row["score"]) == by_id[judgment_id]
    # metrics.csv: the overall S1 ICS share >= 3 and S2 TCS mean % recomputed with pandas.
    with (out / "metrics.csv").open() as handle:
        metrics = {(r["factor"], r["metric"]): r for r in csv.DictReader(handle)}
    s1 = stored[(stored.stage == "S1") & (stored.rubric == "ICS")]
    s2 = stored[(stored.stage == "S2") & (stored.rubric == "TCS")]
    assert float(metrics[("all", "S1 ICS share>=3 (%)")]["value"]) == pytest.approx(
        (s1.score >= 3).mean() * 100
    )
    assert float(metrics[("all", "S2 TCS mean (% of max)")]["value"]) == pytest.approx(
        s2.score.mean() / 5 * 100
    )
    gender = s1[s1.factor == "gender"]
    assert float(metrics[("gender", "S1 ICS share>=3 (%)")]["value"]) == pytest.approx(
        (gender.score >= 3).mean() * 100
    )
    report = json.loads((out / "report.json").read_text())
    assert report["n_item_scores"] == len(items) and report["judge_run"]["status"] == "finished"
    assert printed["metrics"] == report["metrics_overall"]
    html = (out / "report.html").read_text()
    assert "S1 ICS share&gt;=3 (%)" in html and "data:image/png;base64," in html
