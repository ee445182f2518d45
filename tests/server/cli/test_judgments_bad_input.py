"""``fairjudge judgments import`` refuses a bad file whole: every problem listed at once (its
line and reason), exit 1, nothing stored; the same file fixed imports, and importing it again
is refused rather than doubling the counts."""

from __future__ import annotations

import csv
import gzip
import json
import sqlite3
from pathlib import Path

import pytest

from tests.support.cli import fairjudge
from tests.support.factories import SHARED_DATA, require_shared, write_config

HEADER = "question,model_a,model_b,verdict,repetition\n"


def work_config(tmp_path: Path) -> Path:
    """A config whose store is tmp_path/store.db (no model is ever called)."""
    config = tmp_path / "config.toml"
    write_config(config, "http://127.0.0.1:9/v1", f"sqlite:///{tmp_path / 'store.db'}")
    return config


def stored(tmp_path: Path) -> int:
    with sqlite3.connect(tmp_path / "store.db") as conn:
        return int(conn.execute("SELECT count(*) FROM pairwiseverdict").fetchone()[0])


def test_every_problem_of_a_csv_is_listed_and_nothing_is_stored(tmp_path: Path) -> None:
    config = work_config(tmp_path)
    bad = tmp_path / "bad.csv"
    bad.write_text(
        HEADER
        + "q1,x,y,A,1\n"  # line 2: fine, its other order is line 3
        + "q1,y,x,B,1\n"
        + "q2,x,y,maybe,1\n"  # line 4: not a verdict
        + "q3,x,zed,tie,1\n"  # line 5: zed is not among --models (and q3 has one order)
        + "q1,x,y,B,1\n"  # line 6: the same judgment as line 2
        + "q4,x,y,y,1\n"  # line 7: a model's name is a verdict; but y first is missing
        + "q5,x,y,A,0\n",  # line 8: repetition 0
        encoding="utf-8",
    )
    done = fairjudge(
        "--config", config, "judgments", "import", bad, "--format", "csv", "--judge", "j",
        "--models", "x,y",
    )  # fmt: skip
    assert done.returncode == 1
    err = done.stderr
    assert "nothing was stored" in err
    assert (
        "line 4: verdict 'maybe' is not A, B, tie, unreadable, or one of the pair's models" in err
    )
    assert "line 5: unknown model 'zed' (--models: x, y)" in err
    assert "line 6: the same judgment as line 2" in err
    assert (
        "line 7: judge 'j', question 'q4', repetition 1: only the order 'x' first was given" in err
    )
    assert "line 8: repetition '0' is not a whole number from 1" in err
    assert "question 'q3'" in err  # one order only, besides its unknown model
    assert stored(tmp_path) == 0
    # fixed: both orders of q1 and q4 (a model's name as the verdict), nothing else
    good = tmp_path / "good.csv"
    good.write_text(HEADER + "q1,x,y,A,1\nq1,y,x,B,1\nq4,x,y,y,1\nq4,y,x,y,1\n", encoding="utf-8")
    args = ("--config", config, "judgments", "import", good, "--format", "csv", "--judge", "j")
    first = fairjudge(*args, "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["records"] == 4
    assert stored(tmp_path) == 4
    again = fairjudge(*args)
    assert again.returncode == 1
    assert "4 of the file's judgments are already stored by import 1" in again.stderr
    assert stored(tmp_path) == 4


def test_a_jsonl_file_needs_a_judge_and_json_lines(tmp_path: Path) -> None:
    config = work_config(tmp_path)
    bad = tmp_path / "bad.jsonl"
    rows = [
        {"question": "q1", "model_a": "x", "model_b": "y", "verdict": "A"},
        {"question": "q1", "model_a": "y", "model_b": "x", "verdict": "B", "judge": "k"},
    ]
    bad.write_text("\n".join(json.dumps(r) for r in rows) + "\n{not json\n", encoding="utf-8")
    done = fairjudge("--config", config, "judgments", "import", bad, "--format", "jsonl")
    assert done.returncode == 1
    assert "line 1: no judge: give --judge or a judge column" in done.stderr
    assert "line 3: not JSON" in done.stderr
    assert stored(tmp_path) == 0


@pytest.mark.parametrize("drop", [7])
def test_a_shi_record_file_with_one_order_missing(tmp_path: Path, drop: int) -> None:
    records = SHARED_DATA / "position-bias-shi2024" / "mtbench_repetition"
    files = sorted(records.glob("*.tsv.gz"))
    require_shared(files, records, "Shi et al.'s records")
    config = work_config(tmp_path)
    csv.field_size_limit(2**31 - 1)
    with gzip.open(files[0], "rt", encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh, delimiter="\t"))
    gone = rows.pop(drop)  # the 7th record: one order of one pair
    question, first, second = gone[0].split(";")
    cut = tmp_path / "record_cut_3.tsv"
    with cut.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh, delimiter="\t", quoting=csv.QUOTE_ALL).writerows(rows)
    done = fairjudge("--config", config, "judgments", "import", cut, "--format", "shi2024")
    assert done.returncode == 1
    assert "1 problem(s); nothing was stored" in done.stderr
    assert f"question '{question}', repetition 1: only the order '{second}' first" in done.stderr
    assert stored(tmp_path) == 0
