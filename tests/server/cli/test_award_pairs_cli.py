"""``fairjudge audit award analyze --from-csv`` with the name_pair column: the Kruskal-Wallis
test of equivocal rates across name pairs, through the real command, checked against
scipy.stats.kruskal run here on the 0/1 indicators written out by hand; and the errors a user
gets for a missing or malformed pair."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from scipy import stats

from tests.support.cli import Done, fairjudge

# (level, name_pair as written, choice); the bundled names: Black = group A, White = B.
ROWS = [
    (5, "Latoya/Mary", "Black"), (5, "Latoya/Mary", "White"),
    (5, "mary/LATOYA", "equivocal"), (5, "Latoya / Mary", "equivocal"),
    (5, "Tameka/Susan", "Black"), (5, "Tameka/Susan", "Black"),
    (5, "Tameka/Susan", "Black"), (5, "Susan/Tameka", "equivocal"),
    (5, "Lakisha/Linda", "equivocal"), (5, "Lakisha/Linda", "equivocal"),
    (5, "Lakisha/Linda", "equivocal"), (5, "Lakisha/Linda", "White"),
    (10, "Latoya/Mary", "Black"), (10, "Latoya/Mary", "equivocal"),
    (10, "Latrice/Patricia", "White"), (10, "Latrice/Patricia", "White"),
]  # fmt: skip

# The same rows as equivocal indicators per pair (written out by hand: either order and any
# case of the two names is one pair), in the pairs' sorted order.
LEVEL_5 = {"Lakisha/Linda": [1, 1, 1, 0], "Latoya/Mary": [0, 0, 1, 1], "Tameka/Susan": [0, 0, 0, 1]}
LEVEL_10 = {"Latoya/Mary": [0, 1], "Latrice/Patricia": [0, 0]}
OVERALL = {
    "Lakisha/Linda": [1, 1, 1, 0],
    "Latoya/Mary": [0, 0, 1, 1, 0, 1],
    "Latrice/Patricia": [0, 0],
    "Tameka/Susan": [0, 0, 0, 1],
}


def run(*args: str) -> Done:
    """``fairjudge audit ARGS``, run in this process (tests/support/cli.py)."""
    return fairjudge("audit", *args)


def _write(path: Path, header: str, rows: list[tuple[object, ...]]) -> Path:
    path.write_text(header + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return path


def test_kruskal_wallis_across_name_pairs_matches_scipy(tmp_path: Path) -> None:
    path = _write(tmp_path / "answers.csv", "level,name_pair,choice", ROWS)
    done = run("award", "analyze", "--from-csv", str(path), "--json", "--out", str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr
    assert "no Kruskal-Wallis" not in done.stderr
    data = json.loads(done.stdout)
    got = {s["level"]: s["equivocal_by_pair"] for s in data["levels"]}
    got[None] = data["overall"]["equivocal_by_pair"]
    for level, groups in ((5, LEVEL_5), (10, LEVEL_10), (None, OVERALL)):
        expected = stats.kruskal(*groups.values())
        assert got[level]["tested"], got[level]
        assert got[level]["group_sizes"] == [len(g) for g in groups.values()]
        assert got[level]["statistic"] == pytest.approx(expected.statistic, rel=1e-12)
        assert got[level]["p_value"] == pytest.approx(expected.pvalue, rel=1e-12)
    # Hand check of level 10: values 0,1 | 0,0 -> ranks 2,4 | 2,2 (three 0s share rank 2);
    # H = 12/(4*5) * (6^2/2 + 4^2/2) - 3*5 = 0.6 * 26 - 15 = 0.6; tie correction
    # 1 - (3^3 - 3)/(4^3 - 4) = 0.6, so H = 1.0.
    assert got[10]["statistic"] == pytest.approx(1.0)
    # The binomial test is unchanged by the extra column: level 5 has 4 A and 2 B.
    level5 = data["levels"][0]
    assert (level5["group_a"], level5["group_b"], level5["equivocal"]) == (4, 2, 6)
    with (tmp_path / "r" / "award.csv").open(newline="") as handle:
        table = {row["level"]: row for row in csv.DictReader(handle)}
    assert float(table["all"]["kruskal_p"]) == pytest.approx(
        stats.kruskal(*OVERALL.values()).pvalue
    )


def test_without_the_column_the_binomial_runs_and_says_what_is_missing(tmp_path: Path) -> None:
    rows = [(level, choice) for level, _, choice in ROWS]
    path = _write(tmp_path / "answers.csv", "level,choice", rows)
    done = run("award", "analyze", "--from-csv", str(path), "--json")
    assert done.returncode == 0, done.stderr
    assert "no name_pair column" in done.stderr
    test = json.loads(done.stdout)["overall"]["equivocal_by_pair"]
    assert not test["tested"] and "name_pair column" in test["reason"]


def test_a_missing_or_unknown_pair_is_refused_naming_its_line(tmp_path: Path) -> None:
    rows: list[tuple[object, ...]] = [
        (5, "Latoya/Mary", "Black"),
        (5, "", "White"),  # line 3: empty
        (5, "Latoya", "equivocal"),  # line 4: one name
        (5, "Latoya/Bob", "Black"),  # line 5: Bob is in neither group
        (5, "Latoya/Tameka", "Black"),  # line 6: both from group A
    ]
    path = _write(tmp_path / "bad.csv", "level,name_pair,choice", rows)
    done = run("award", "analyze", "--from-csv", str(path))
    assert done.returncode != 0
    assert "line 3: name_pair is empty" in done.stderr
    for line in (4, 5, 6):
        assert f"line {line}: name_pair must be two first names" in done.stderr
    assert "line 2" not in done.stderr


def test_a_misnamed_pair_column_is_named_in_the_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "header.csv", "level,pair,choice", [(5, "Latoya/Mary", "Black")])
    done = run("award", "analyze", "--from-csv", str(path))
    assert done.returncode != 0
    assert "'level,name_pair,choice'" in done.stderr
    assert "must be called 'name_pair', not ['pair']" in done.stderr
