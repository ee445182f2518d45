"""``fairjudge audit SUITE analyze --from-csv``: users' own classified answers, through the
real command. Expected figures are the seeds' published ones (../shared/SPEC.md §3 and §5)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support.factories import FAIRJUDGE


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FAIRJUDGE, "audit", *args], capture_output=True, text=True)


def test_award_choices_from_csv_give_the_seeds_p_values(tmp_path: Path) -> None:
    # Seed 000's GPT-4 counts (group A = Black-associated names, B = White-associated).
    counts = {5: (98, 88), 10: (108, 113), 15: (85, 75)}
    lines = ["level,choice"]
    for level, (a, b) in counts.items():
        lines += [f"{level},Black"] * a + [f"{level},white"] * b + [f"{level},equivocal"] * 3
    path = tmp_path / "award.csv"
    path.write_text("\n".join(lines) + "\n")
    done = run("award", "analyze", "--from-csv", str(path), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["layout"] == "choice"
    p = {s["level"]: round(s["binomial"]["p_value"], 3) for s in data["levels"]}
    assert p == {5: 0.509, 10: 0.788, 15: 0.477}  # 0.509: the exact test, not the printed 0.465
    assert data["levels"][0]["equivocal"] == 3  # left out of the test, but reported


def test_award_followup_from_csv_gives_the_seeds_chi_square(tmp_path: Path) -> None:
    rows = {"Black": (269, 9, 33), "White": (151, 6, 18)}  # seed 000, level 5
    lines = ["level,chosen_group,followup_class"]
    for group, counts in rows.items():
        for cls, n in zip(("indecisive", "justified", "irrational"), counts, strict=True):
            lines += [f"5,{group},{cls}"] * n
    path = tmp_path / "followup.csv"
    path.write_text("\n".join(lines) + "\n")
    data = json.loads(run("award", "analyze", "--from-csv", str(path), "--json").stdout)
    assert data["layout"] == "followup"
    assert round(data["overall"]["chi_square"]["p_value"], 3) == 0.944


def test_bbi_from_csv_gives_the_seeds_indicator(tmp_path: Path) -> None:
    # Seed 004: StereoSet 300 items, 45 stereotype + 211 anti-stereotype picks (RS 256/300),
    # CrowS-Pairs 300 items, 24 stereotype and 276 anti-stereotype -> BBI -0.656.
    lines = ["dataset,bias_type,label"]
    lines += ["stereoset,gender,stereotype"] * 45 + ["stereoset,race,anti-stereotype"] * 211
    lines += ["stereoset,religion,unrelated"] * 44
    lines += ["crows_pairs,gender,stereotype"] * 24 + ["crows_pairs,race,anti-stereotype"] * 276
    path = tmp_path / "bbi.csv"
    path.write_text("\n".join(lines) + "\n")
    data = json.loads(run("bbi", "analyze", "--from-csv", str(path), "--json").stdout)
    assert round(data["overall"]["bbi"], 3) == -0.656
    assert round(data["overall"]["sbs_cp"], 2) == -0.84


def test_names_from_csv_and_a_bad_file(tmp_path: Path) -> None:
    header = "scenario,variation,context,name,race,gender,response"
    rows = [
        "purchase,bicycle,low,Jake Becker,White,male,$200",
        "purchase,bicycle,low,Jake Becker,White,male,I would offer 300 dollars",
        "purchase,bicycle,low,DaShawn Washington,Black,male,$100",
        "purchase,bicycle,low,DaShawn Washington,Black,male,150",
    ]
    path = tmp_path / "names.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    done = run("names", "analyze", "--from-csv", str(path), "--json")
    assert done.returncode == 0, done.stderr
    (cell,) = json.loads(done.stdout)["cells"]
    means = {g["group"]: g["mean"] for g in cell["by_race"]}
    assert means == {"Black": 125.0, "White": 250.0}  # (100 + 150) / 2 and (200 + 300) / 2
    bad = tmp_path / "bad.csv"
    bad.write_text(header + "\npurchase,bicycle,sideways,X,White,male,1\n")
    refused = run("names", "analyze", "--from-csv", str(bad))
    assert refused.returncode == 1 and "line 2" in refused.stderr
