"""`fairjudge sweep` and `fairjudge export` through click, against the scripted stub."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from server.cli import cli
from server.cli.export import export
from server.cli.sweep import sweep
from tests.server.cli.test_cli import write_config
from tests.support.factories import SAMPLE
from tests.support.stub_openai import StubServer

# The root group with both commands, whether or not server/cli/__init__.py registers them yet;
# the shared `cli` object is not modified (other tests list its commands).
ROOT = click.Group(
    name=cli.name,
    params=cli.params,
    callback=cli.callback,
    commands={**cli.commands, "sweep": sweep, "export": export},
)
LABELS = ["T=0.1 plain", "T=1 plain", "T=0.1 cot", "T=1 cot"]
Invoke = Callable[..., Result]  # run the fairjudge command with these arguments
SWEEP = ["sweep", "1", "--temperatures", "0.1,1.0", "--prompt-variants", "plain,cot"]


@pytest.fixture
def invoke(tmp_path: Path, db_url: str, stub: StubServer) -> Invoke:
    config = write_config(tmp_path / "c.toml", stub.base_url, db_url)
    runner = CliRunner()

    def run(*args: str) -> Result:
        result = runner.invoke(ROOT, ["--config", str(config), *args])
        assert result.exit_code == 0, (result.output, result.exception)
        return result

    run("dataset", "import", str(SAMPLE))
    run("generate", "fairmonitor_sample", "--limit", "12")  # S1 items: ICS only
    return run


def test_sweep_prints_a_line_per_configuration_then_table3(
    tmp_path: Path, invoke: Invoke, stub: StubServer
) -> None:
    run = invoke
    first = run(*SWEEP)
    lines = first.stdout.splitlines()
    for n, label in enumerate(LABELS, start=1):  # judge runs 1-4 of generation run 1
        assert any(line.startswith(f"{label}: judge run {n}, 12 judgments made") for line in lines)
    assert "no human ratings for generation run 1" in first.stdout
    assert "fairjudge ratings import FILE --run 1" in first.stdout
    assert "{" not in first.stdout  # no Python reprs

    # Ratings for the 12 items: three raters, scores spread over the scale.
    ratings = tmp_path / "ratings.csv"
    with ratings.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["item_id", "rubric", "rater", "score"])
        keys = [r["id"] for r in map(json.loads, SAMPLE.read_text().splitlines()[:12])]
        for n, key in enumerate(keys):
            for r, rater in enumerate(("ann1", "ann2", "ann3")):
                writer.writerow([key, "ICS", rater, 1 + (n + r) % 5])
    run("ratings", "import", str(ratings), "--run", "1")

    requests = stub.state.requests
    again = run(*SWEEP, "--bootstrap", "50", "--json")
    assert stub.state.requests == requests  # cached: nothing is paid twice
    data = json.loads(again.stdout)
    assert data["model_calls"] == 0
    assert [c["label"] for c in data["configurations"]] == LABELS
    assert data["table"]["columns"] == ["rubric", "n items", "human alpha (interval)", *LABELS]
    (row,) = data["table"]["rows"]
    assert row[:2] == ["ICS", "12"]
    assert all(" [" in cell for cell in row[3:])  # '0.12 [-0.50, 0.70]'

    shown = run(*SWEEP, "--bootstrap", "50", "--coefficient", "kendall")
    assert "Judge vs human: kendall [95 % CI] (generation run 1)" in shown.stdout
    assert "nothing left to judge" in shown.stdout


def test_export_writes_csv_and_jsonl(tmp_path: Path, invoke: Invoke) -> None:
    run = invoke
    run("judge", "1")
    out = tmp_path / "export"
    result = run("export", "1", "--out", str(out), "--json")
    data = json.loads(result.stdout)
    assert (data["judgments"], data["answers"]) == (12, 12)
    assert sorted(Path(p).name for p in data["files"].values()) == [
        "answers.csv",
        "answers.jsonl",
        "judgments.csv",
        "judgments.jsonl",
    ]
    with (out / "judgments.csv").open(newline="") as f:
        assert len(list(csv.DictReader(f))) == 12
    words = run("export", "1", "--out", str(out), "--format", "jsonl")
    assert "judge run 1: 12 judgments and 12 answers (generation run 1)" in words.stdout

    bad = CliRunner().invoke(
        ROOT,
        ["--config", str(tmp_path / "c.toml"), "export", "1", "--out", str(out), "--format", "xml"],
    )
    assert bad.exit_code != 0
    assert "format 'xml' is not one of csv, jsonl" in str(bad.exception)
