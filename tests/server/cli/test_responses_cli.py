"""``fairjudge responses import`` through the real command: a file of answers becomes an
imported run, a re-run adds nothing, and a bad file exits 1 naming every bad line and storing
nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from judge.data.datasets import import_items
from judge.store.engine import make_engine, session_scope
from tests.support.cli import Done
from tests.support.cli import fairjudge as run_fairjudge
from tests.support.factories import SAMPLE, write_config

DATA = Path(__file__).parents[2] / "support" / "data"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A store holding the sample dataset and a config pointing at it (no model is called)."""
    db = tmp_path / "store.db"
    write_config(tmp_path / "config.toml", "http://127.0.0.1:9/v1", f"sqlite:///{db}")
    engine = make_engine(f"sqlite:///{db}")
    with session_scope(engine) as session:
        import_items(session, SAMPLE, "sample")
    engine.dispose()
    return tmp_path


def fairjudge(work: Path, *args: str) -> Done:
    """``fairjudge responses import ARGS`` in WORK, run in this process (tests/support/cli.py)."""
    return run_fairjudge("--config", work / "config.toml", "responses", "import", *args, cwd=work)


def answers(work: Path) -> int:
    with sqlite3.connect(work / "store.db") as conn:
        return int(conn.execute("SELECT count(*) FROM response").fetchone()[0])


def test_import_json_then_again_as_csv(work: Path) -> None:
    first = fairjudge(work, str(DATA / "responses_sample.jsonl"), "--dataset", "sample", "--json")
    assert first.returncode == 0, first.stderr
    # 6 rows of 4 items (s1, s2 A+B, s3 A+B, s4): all new, into a new run of label 'external'.
    assert json.loads(first.stdout) == {
        "generation_run_id": 1,
        "added": 6,
        "unchanged": 0,
        "items": 4,
        "created_run": True,
        "dataset": "sample",
        "model": "external",
    }
    # The CSV file holds the same answers: nothing to add.
    again = fairjudge(work, str(DATA / "responses_sample.csv"), "--dataset", "sample")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == (
        "generation run 1, dataset sample, model external: 0 answers added, 6 already stored "
        "(4 items)"
    )
    assert answers(work) == 6
    with sqlite3.connect(work / "store.db") as conn:
        assert conn.execute("SELECT source, model FROM generationrun").fetchall() == [
            ("imported", "external")
        ]


def test_a_bad_file_exits_1_and_stores_nothing(work: Path) -> None:
    bad = work / "bad.jsonl"
    bad.write_text(
        json.dumps({"item_id": "s1-gender-1", "part": "answer", "text": "Fine."})
        + "\n"
        + json.dumps({"item_id": "s1-nobody", "part": "answer", "text": "x"})
        + "\n"
        + json.dumps({"item_id": "s3-gender-1", "part": "A", "text": "x"})
        + "\n",
        encoding="utf-8",
    )
    done = fairjudge(work, str(bad), "--dataset", "sample", "--model", "tutor-1")
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: {bad} was not imported: 2 of 3 lines are invalid")
    assert "line 2: item 's1-nobody' part 'answer': no such item" in done.stderr
    assert "line 3: item 's3-gender-1' part 'A': a stage S3 item needs parts" in done.stderr
    assert "Traceback" not in done.stderr
    assert answers(work) == 0


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        ("broken.jsonl", '{"item_id": "s1-gender-1",\n', "line 1: not valid JSON"),
        ("answers.txt", "item_id,part,text\n", "answers files end in .jsonl"),
        ("missing.jsonl", None, "not found"),
    ],
)
def test_unreadable_files_exit_1(work: Path, name: str, content: str | None, fragment: str) -> None:
    if content is not None:
        (work / name).write_text(content, encoding="utf-8")
    done = fairjudge(work, str(work / name), "--dataset", "sample")
    assert done.returncode == 1
    assert done.stderr.startswith("error: ") and fragment in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unknown_dataset_exits_1(work: Path) -> None:
    done = fairjudge(work, str(DATA / "responses_sample.jsonl"), "--dataset", "nope")
    assert done.returncode == 1
    assert "no dataset named 'nope' (known: sample)" in done.stderr
