"""``fairjudge dataset coverage`` and ``dataset export --status`` through the CLI, on a
three-item dataset whose review statuses are set by hand; every expected count is worked out
from those three items and from the taxonomy file read with tomllib (not through FairJudge)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from click.testing import CliRunner
from sqlalchemy import update

from judge.paths import datasets_dir
from judge.store.engine import make_engine
from judge.store.tables import Item
from server.cli import cli
from tests.support.factories import write_config

ITEMS = [
    {"id": "a", "factor": "gender", "scenario": "classroom_assessment"},
    {"id": "b", "factor": "gender", "scenario": "classroom_assessment"},
    {"id": "c", "factor": "gender", "scenario": "classroom_management"},
]


def run(config: Path, *args: str) -> tuple[int, str, str]:
    """Exit code, stdout, and stderr with the message of an error the root would print."""
    result = CliRunner().invoke(cli, ["--config", str(config), "dataset", *args])
    problem = "" if result.exception is None else str(result.exception)
    return result.exit_code, result.stdout, result.stderr + problem


def grid_size() -> int:
    """Stages x every factor's listed scenarios, from the TOML file itself."""
    table = tomllib.loads((datasets_dir() / "factors_scenarios.toml").read_text())
    return 4 * sum(len(factor["scenarios"]) for factor in table["factors"])


def set_status(db_url: str, key: str, status: str | None) -> None:
    engine = make_engine(db_url)
    with engine.begin() as conn:
        conn.execute(update(Item).where(Item.key == key).values(review_status=status))  # type: ignore[arg-type]
    engine.dispose()


def test_coverage_counts_gaps_and_export_filters_by_status(tmp_path: Path, db_url: str) -> None:
    config = write_config(tmp_path / "c.toml", "http://127.0.0.1:9/v1", db_url)
    source = tmp_path / "three.jsonl"
    source.write_text(
        "".join(
            json.dumps({**i, "stage": "S1", "question": f"Q {i['id']}?", "expected_answer": "No."})
            + "\n"
            for i in ITEMS
        )
    )
    assert run(config, "import", str(source), "--name", "three")[0] == 0
    set_status(db_url, "a", "accepted")
    set_status(db_url, "b", "draft")  # c stays unreviewed (hand-written, never reviewed)

    code, out, _ = run(config, "coverage", "three", "--json")
    assert code == 0, out
    cov = json.loads(out)
    grid = grid_size()
    assert cov["grid_cells"] == grid
    # Two cells hold items: S1/gender/classroom_assessment (a accepted, b draft) and
    # S1/gender/classroom_management (c unreviewed); both have a usable item.
    assert len(cov["empty_cells"]) == grid - 2
    assert len(cov["unusable_cells"]) == grid - 2
    held = {(c["scenario"]): (c["counts"], c["usable"]) for c in cov["cells"] if c["total"]}
    assert held == {
        "classroom_assessment": (
            {"accepted": 1, "edited": 0, "draft": 1, "rejected": 0, "unreviewed": 0},
            1,
        ),
        "classroom_management": (
            {"accepted": 0, "edited": 0, "draft": 0, "rejected": 0, "unreviewed": 1},
            1,
        ),
    }

    # Rejecting a leaves its cell with a draft only: no usable item there any more.
    set_status(db_url, "a", "rejected")
    code, out, _ = run(config, "coverage", "three", "--out", str(tmp_path / "cov"))
    assert code == 0, out
    assert "none usable" in out
    page = (tmp_path / "cov" / "report.html").read_text()
    assert "— empty" in page and "— none usable" in page
    rows = (tmp_path / "cov" / "coverage.csv").read_text().strip().splitlines()
    assert len(rows) == 1 + grid  # a header and one line per grid cell (nothing outside)
    code, out, _ = run(config, "coverage", "three", "--json")
    assert len(json.loads(out)["unusable_cells"]) == grid - 1

    # Export: only the statuses asked for; unreviewed stands for items never reviewed.
    target = tmp_path / "out.jsonl"
    code, out, _ = run(config, "export", "three", str(target), "--status", "unreviewed", "--json")
    assert (code, json.loads(out)["items"]) == (0, 1)
    written = [json.loads(line) for line in target.read_text().splitlines()]
    assert [w["id"] for w in written] == ["c"]
    code, out, _ = run(config, "export", "three", str(target), "--status", "draft", "--status",
                       "rejected", "--json")  # fmt: skip
    exported = {
        w["id"]: w["review_status"] for w in map(json.loads, target.read_text().split("\n")[:-1])
    }
    assert (code, exported) == (0, {"a": "rejected", "b": "draft"})

    code, _, err = run(config, "export", "three", str(target), "--status", "approved")
    assert code != 0 and "unknown review status" in err and "'approved'" in err


def test_coverage_of_a_missing_dataset_says_how_to_make_one(tmp_path: Path, db_url: str) -> None:
    config = write_config(tmp_path / "c.toml", "http://127.0.0.1:9/v1", db_url)
    code, _, err = run(config, "coverage", "nowhere")
    assert code != 0 and "nowhere" in err and "dataset import" in err
