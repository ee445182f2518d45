"""``fairjudge judgments import`` and ``judgments position`` through the real command, on Shi et
al.'s own records (../shared/data/position-bias-shi2024, read by path, never copied).

The records: 9 judges x 3 repetitions x 96 MT-Bench pairs, each pair judged in both orders.
Expected figures are counted here from the raw TSV files with pandas and a regex, written from
the paper's definitions and the authors' published code, not from FairJudge's:

* position consistency: readable pairs whose two verdicts name the same model (or both a
  tie), over readable pairs; a pair with an unreadable verdict is left out;
* preference fairness: (recency - primacy) / every pair judged, with the authors' table (AA,
  AC, CA primacy; BB, BC, CB recency);
* repetition stability: per cmp_index (one order of one pair), the count of its most frequent
  readable verdict over its 3 repetitions, divided by 3, averaged (the authors'
  calculate_repetitional_consistency_rates: value_counts drops the unreadable ones, the
  denominator keeps them);
* and, for the judges whose verdicts all read, position consistency equals the authors' own
  run logs ("X out of Y answers are consistent", summed over the three repetitions).
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import pandas as pd
import pytest

from tests.server.cli.test_judgments_bad_input import work_config
from tests.support.cli import fairjudge
from tests.support.factories import SHARED_DATA, require_shared

RECORDS = SHARED_DATA / "position-bias-shi2024" / "mtbench_repetition"
MARK = re.compile(r"\[\[([ABCD])\]\]")
LOGGED = re.compile(r"(\d+) out of (\d+) answers are consistent")


def record_files() -> list[Path]:
    files = sorted(RECORDS.glob("*__record_*.tsv.gz"))
    require_shared(files, RECORDS, "Shi et al.'s records")
    return files


def read_choices() -> dict[str, dict[int, dict[str, str]]]:
    """judge -> repetition -> cmp_index -> verdict letter ('N' when unreadable; D counts as
    unreadable in three-option mode)."""
    out: dict[str, dict[int, dict[str, str]]] = defaultdict(dict)
    for path in record_files():
        data = pd.read_csv(path, sep="\t")
        judge = data.columns[-1]
        rep = int(path.name.split("_")[0].removeprefix("Repetition"))
        marks = {}
        for key, reply in zip(data["cmp_index"], data[judge], strict=True):
            found = MARK.search(str(reply))
            marks[key] = found.group(1) if found and found.group(1) != "D" else "N"
        out[judge][rep] = marks
    return out


def expected(choices: dict[int, dict[str, str]]) -> dict[str, float]:
    consistent = readable = primacy = recency = pairs = 0
    for marks in choices.values():
        for key, first in marks.items():
            question, a, b = key.split(";")
            if a > b:
                continue  # each pair once, from the order with the smaller name first
            second = marks[f"{question};{b};{a}"]
            pairs += 1
            pair = first + second
            if "N" in pair:
                continue
            readable += 1
            consistent += pair in ("AB", "BA", "CC")
            primacy += pair in ("AA", "AC", "CA")
            recency += pair in ("BB", "BC", "CB")
    shares = []
    for key in choices[1]:
        said = [choices[rep][key] for rep in sorted(choices)]
        counts = Counter(x for x in said if x != "N")
        if counts:
            shares.append(max(counts.values()) / len(said))
    return {
        "pc": consistent / readable,
        "pf": (recency - primacy) / pairs,
        "rs": sum(shares) / len(shares),
        "pairs": pairs,
        "readable": readable,
    }


def logged(judge: str) -> tuple[int, int]:
    consistent = answers = 0
    for path in RECORDS.glob(f"Repetition*_{judge}__log.txt.gz"):
        found = LOGGED.search(gzip.open(path, "rt", encoding="utf-8").read())
        assert found is not None
        consistent, answers = consistent + int(found.group(1)), answers + int(found.group(2))
    return consistent, answers


def test_shi_records_through_the_cli(tmp_path: Path) -> None:
    choices = read_choices()
    config = work_config(tmp_path)
    done = fairjudge(
        "--config", config, "judgments", "import", RECORDS, "--format", "shi2024", "--json"
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    # 27 files x 192 judgments; 9 judges; 4 answer models against vicuna-13b-v1.3
    assert (summary["files"], summary["records"], len(summary["judges"])) == (27, 5184, 9)
    assert summary["repetitions"] == [1, 2, 3] and len(summary["models"]) == 5
    assert summary["unreadable"] == sum(
        m == "N" for reps in choices.values() for marks in reps.values() for m in marks.values()
    )
    shown = fairjudge("--config", config, "judgments", "position", "--json", "--bootstrap", "200")
    assert shown.returncode == 0, shown.stderr
    result = json.loads(shown.stdout)
    by_judge = {j["judge"]: j for j in result["judges"]}
    assert sorted(by_judge) == sorted(choices)
    clean = 0
    for judge, reps in choices.items():
        want, got = expected(reps), by_judge[judge]
        assert (got["pairs"], got["readable_pairs"]) == (want["pairs"], want["readable"])
        assert got["position_consistency"] == pytest.approx(want["pc"], abs=1e-12)
        assert got["preference_fairness"] == pytest.approx(want["pf"], abs=1e-12)
        assert got["repetition_stability"] == pytest.approx(want["rs"], abs=1e-12)
        if want["readable"] == want["pairs"]:
            # the authors' log counts judgments (two per pair) over the three repetitions
            consistent, answers = logged(judge)
            assert got["position_consistency"] == pytest.approx(consistent / answers, abs=1e-12)
            clean += 1
    assert clean == 4  # judges with no unreadable verdict in any of their three files
    # gpt-4-0613: PC 0.872 with a CI well above 0.8 and PF's CI covering 0: not flagged
    assert by_judge["gpt-4-0613"]["flagged"] is False
    # gemini-pro favours the second position: PF = 78 / 288 = +0.27, flagged "recency"
    assert "recency" in by_judge["gemini-pro"]["flag_reasons"]
