"""The demo: a balanced subset of the sample by default (said, never silent), numbered and
timed steps, and --json for a benchmark. The model server here is the scripted stub, which
answers /v1/models like an embedded server that is already running; the real model runs the
demo in tests/server/test_services_embedded.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from judge.config import Settings
from server import usecases
from server.usecases.demo import DEMO_ITEMS_PER_STAGE, demo_subset
from tests.support.factories import FAIRJUDGE, SAMPLE
from tests.support.stub_openai import StubServer


def sample_rows() -> list[dict[str, str]]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]


def test_the_subset_spreads_each_stage_over_its_factors_in_file_order(tmp_path: Path) -> None:
    subset = demo_subset(SAMPLE, tmp_path, 3)
    rows = sample_rows()
    # Worked out independently: per stage, the first item of each factor in the order the
    # factors first appear, until three are taken; then listed in file order.
    expected = []
    for stage in ("S1", "S2", "S3", "S4"):
        in_stage = [r for r in rows if r["stage"] == stage]
        factors = list(dict.fromkeys(r["factor"] for r in in_stage))
        firsts = [next(r for r in in_stage if r["factor"] == f) for f in factors[:3]]
        expected += [r["id"] for r in in_stage if r in firsts]
    written = [json.loads(line) for line in subset.file.read_text().splitlines()]
    assert [w["id"] for w in written] == expected
    # three different factors in every stage (the sample has at least three per stage)
    for stage in ("S1", "S2", "S3", "S4"):
        assert len({w["factor"] for w in written if w["stage"] == stage}) == 3
    assert written[0] == rows[0]  # every field of an item is kept as it was
    assert subset.file == tmp_path / "fairmonitor_sample_3_per_stage.jsonl"
    assert (subset.dataset, subset.items, subset.total, subset.per_stage) == (
        "fairmonitor_sample_3_per_stage",
        12,
        72,
        3,
    )
    assert subset.describe() == (
        "demo: 12 of fairmonitor_sample's 72 items (3 per stage) so it finishes in a few "
        "minutes; `fairjudge demo --full` runs all 72"
    )
    assert subset.describe(limit=5).endswith("; --limit 5: only the first 5 of them")


@pytest.mark.parametrize("per_stage", [None, 18, 50])
def test_full_or_a_count_that_takes_everything_runs_the_file_itself(
    tmp_path: Path, per_stage: int | None
) -> None:
    subset = demo_subset(SAMPLE, tmp_path, per_stage)
    assert (subset.file, subset.dataset, subset.items, subset.per_stage) == (
        SAMPLE,
        "fairmonitor_sample",
        72,
        None,
    )
    assert subset.describe() == "demo: all 72 items of fairmonitor_sample"
    assert list(tmp_path.iterdir()) == []


def stub_settings(stub: StubServer, tmp_path: Path) -> Settings:
    """The stub as the model under test, the judge and the 'embedded' server (already
    running: the demo uses it and leaves it alone)."""
    port = urlsplit(stub.base_url).port
    ep = {
        "base_url": stub.base_url,
        "model": "stub-model",
        "structured_output": "json_object_schema",
    }
    return Settings.model_validate(
        {
            "database_url": f"sqlite:///{tmp_path / 'demo.db'}",
            "state_dir": str(tmp_path / "state"),
            "embedded": {"port": port, "model_alias": "stub-model"},
            "endpoints": {"test": ep},
            "generation": {"endpoint": "test", "max_tokens": 32},
            "judge": {"endpoint": "test"},
        }
    )


def test_demo_runs_the_subset_in_five_timed_steps(stub: StubServer, tmp_path: Path) -> None:
    said: list[str] = []
    labels: list[str] = []

    def progress(label: str) -> None:
        labels.append(label)

    hooks = usecases.DemoHooks(say=said.append, progress=progress)
    result = usecases.demo(stub_settings(stub, tmp_path), tmp_path / "report", hooks, per_stage=2)
    # 2 items per stage; S1 and S4 ask one prompt, S2 and S3 two: 2 + 4 + 4 + 2 = 12 answers.
    # Rubrics: ICS for S1 and S4, TCS, PCS and ETCS for S2, SBAS for S3: 2 + 6 + 2 + 2 = 12.
    assert (result.subset.items, result.answers, result.judgments) == (8, 12, 12)
    assert (result.generation.tasks, result.judging.tasks) == (12, 12)
    assert [s.name for s in result.steps] == [
        "start model server",
        "import",
        "generate",
        "judge",
        "report",
    ]
    assert all(s.seconds >= 0 for s in result.steps)
    assert labels == ["generating", "judging"]
    assert said[0].startswith("demo: 8 of fairmonitor_sample's 72 items (2 per stage)")
    assert said[1] == "[1/5] using the embedded model server that is already running ..."
    assert said[2].startswith(f"[1/5] model server answers at {stub.base_url}; done in ")
    assert said[5] == "[3/5] generating 12 answers to 8 items ..."
    assert said[7] == "[4/5] judging the answers: 12 judgments ..."
    assert said[-1].startswith("[5/5] wrote ") and " files; done in " in said[-1]
    data = result.to_dict()
    assert data["dataset"] == "fairmonitor_sample_2_per_stage"
    assert [s["name"] for s in data["steps"]] == [s.name for s in result.steps]
    assert Path(data["paths"]["html"]).exists()


def _demo_config(stub: StubServer, tmp_path: Path, db: str) -> Path:
    """A config whose embedded model and both endpoints are the stub."""
    port = urlsplit(stub.base_url).port
    config = tmp_path / "c.toml"
    config.write_text(f"""
database_url = "sqlite:///{tmp_path / db}"
state_dir = "{tmp_path / "state"}"
[embedded]
port = {port}
model_alias = "stub-model"
[endpoints.test]
base_url = "{stub.base_url}"
model = "stub-model"
structured_output = "json_object_schema"
[generation]
endpoint = "test"
max_tokens = 32
[judge]
endpoint = "test"
""")
    return config


def test_demo_json_prints_the_steps_and_counts_on_stdout(stub: StubServer, tmp_path: Path) -> None:
    config = _demo_config(stub, tmp_path, "demo.db")
    out = tmp_path / "demo"
    run = subprocess.run(
        [*FAIRJUDGE, "--config", str(config), "demo", "--limit", "3", "--out", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)  # stdout is one JSON document: the steps are on stderr
    per_stage = DEMO_ITEMS_PER_STAGE
    assert (data["items"], data["source_items"], data["per_stage"]) == (
        4 * per_stage,
        72,
        per_stage,
    )
    # --limit 3 keeps the first three items of the subset: S1 items, one answer and one ICS
    # judgment each.
    assert (data["answers"], data["judgments"]) == (3, 3)
    assert len(data["steps"]) == 5 and all(s["seconds"] >= 0 for s in data["steps"])
    assert data["seconds"] == pytest.approx(sum(s["seconds"] for s in data["steps"]), abs=0.01)
    assert Path(data["paths"]["html"]) == out / "report.html"
    assert f"demo: {4 * per_stage} of fairmonitor_sample's 72 items" in run.stderr
    assert "[3/5] generating 3 answers to 3 items ..." in run.stderr
    # stderr is not a terminal here: progress comes as plain lines, with no bar drawn.
    assert "generating: 3/3 (100 %)" in run.stderr and "━" not in run.stderr


def test_demo_says_once_at_the_top_that_its_judge_is_not_validated(
    stub: StubServer, tmp_path: Path
) -> None:
    """Issue 42: the report opens with the line (section one, before every figure), the HTML
    shows it once, and the terminal summary prints it before the metrics table, once."""
    from server.usecases.demo import EMBEDDED_NOT_VALIDATED
    from tests.support.cli import fairjudge

    hooks = usecases.DemoHooks(say=lambda _: None, progress=lambda _: None)
    result = usecases.demo(stub_settings(stub, tmp_path), tmp_path / "report", hooks, per_stage=1)
    first = result.report.sections[0]
    assert first.title == "Judge standing" and first.notes == [EMBEDDED_NOT_VALIDATED]
    assert result.report.to_json()["standing"]["summary"] == EMBEDDED_NOT_VALIDATED
    assert {r["state"] for r in first.payload["rubrics"].values()} == {"not validated"}
    html = Path(result.paths["html"]).read_text(encoding="utf-8")
    assert html.count("NOT VALIDATED") == 1
    assert html.index("NOT VALIDATED") < html.index("<h2>", html.index("Judge standing") + 20)
    config = _demo_config(stub, tmp_path, "cli.db")
    done = fairjudge("--config", config, "demo", "--limit", "2", "--out", tmp_path / "cli")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("NOT VALIDATED") == 1
    said = done.stdout.index("NOT VALIDATED")
    assert said < done.stdout.index("S1 ICS")  # before the metrics table
