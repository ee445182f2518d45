"""`fairjudge agreement compute --scale` end to end on scales other than 1-5, with published
examples and hand-derived values; scores off the declared scale are refused by line."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from statsmodels.stats.inter_rater import cohens_kappa

from annotation.errors import RatingsError
from annotation.files import compute, read_judge
from annotation.ratings import parse_score
from annotation.reliability import reading
from annotation.sections import files_table
from judge.stats.coefficient import BootstrapOptions
from judge.stats.matrix import RatingMatrix
from judge.stats.pairs import judge_vs_human
from judge.stats.raters import human_vs_human
from judge.vocab import Scale
from server.cli import cli

# Hayes & Krippendorff (2007), "Answering the call for a standard reliability measure for coding
# data", Table 1: five observers rate the tone of 40 newspaper articles on 0 (sure loser) to 3
# (likely winner); "." is a missing judgment. The paper's KALPHA output: ordinal alpha = .7598.
HAYES_2007 = """\
1 1 2 . 2|1 1 0 1 .|2 3 3 3 .|. 0 0 . 0|0 0 0 . 0|0 0 0 . 0|1 0 2 . 1|1 . 2 0 .|2 2 2 . 2|2 1 1 1 .
. 1 0 0 .|0 0 0 0 .|1 2 2 2 .|3 3 2 2 3|1 1 1 . 1|1 1 1 . 1|2 1 2 . 2|1 2 3 3 .|1 1 0 1 .|0 0 0 . 0
0 0 1 1 .|0 0 . 0 0|2 3 3 3 .|0 0 0 0 .|1 2 . 2 2|0 1 1 1 .|0 0 0 1 0|1 2 1 2 .|1 1 2 2 .|1 1 2 . 2
1 1 0 . 0|2 1 2 1 .|2 2 . 2 2|3 2 2 2 .|2 2 2 . 2|2 2 3 . 2|2 2 2 . 2|2 2 . 1 2|2 2 2 2 .|1 1 1 . 1
"""
PUBLISHED_ORDINAL = 0.7598


def fairjudge(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed command in a fresh process, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *args], capture_output=True, text=True, timeout=300
    )


def in_process(*args: str) -> Any:
    """The same command through click in this process (quicker); its JSON output."""
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def write(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    with path.open("w", newline="") as f:
        csv.writer(f).writerows([header, *rows])
    return path


def hayes_matrix() -> np.ndarray:
    """Observers x articles, NaN where an observer did not judge an article."""
    units = [u.split() for line in HAYES_2007.strip().splitlines() for u in line.split("|")]
    assert len(units) == 40 and all(len(u) == 5 for u in units)
    return np.array([[np.nan if v == "." else float(v) for v in u] for u in units]).T


def test_hayes_krippendorff_zero_to_three_end_to_end(tmp_path: Path) -> None:
    values = hayes_matrix()
    human_rows = [
        [f"article{i + 1}", f"obs{r + 1}", int(values[r, i])]
        for i in range(values.shape[1])
        for r in range(values.shape[0])
        if not np.isnan(values[r, i])
    ]
    assert len(human_rows) == 159  # 200 cells, 41 missing
    human = write(tmp_path / "human.csv", ["item_id", "rater", "score"], human_rows)
    # A judge near the observers' mean: the rounded mean moved by -1, 0 or +1, kept on 0-3.
    mean = np.nanmean(values, axis=0)
    rng = np.random.default_rng(0)
    judge_scores = np.clip(np.floor(mean + 0.5) + rng.integers(-1, 2, mean.size), 0, 3)
    judge = write(
        tmp_path / "judge.csv",
        ["item_id", "score"],
        [[f"article{i + 1}", int(s)] for i, s in enumerate(judge_scores)],
    )

    run = fairjudge(
        "agreement", "compute", "--human", str(human), "--judge", str(judge),
        "--scale", "0-3", "--bootstrap", "200", "--json",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["settings"]["scale"] == "0-3" and out["n_items"] == 40
    hh = out["human_vs_human"]
    # The published value, to the four decimals the paper prints.
    assert hh["alpha_ordinal"]["value"] == pytest.approx(PUBLISHED_ORDINAL, abs=5e-5)
    assert hh["alpha_ordinal"]["ci_low"] < PUBLISHED_ORDINAL < hh["alpha_ordinal"]["ci_high"]
    for level in ("nominal", "ordinal", "interval"):
        assert hh[f"alpha_{level}"]["value"] == pytest.approx(
            krippendorff.alpha(
                reliability_data=values, level_of_measurement=level, value_domain=[0, 1, 2, 3]
            ),
            abs=1e-12,
        )
    assert hh["n_raters"] == 5

    # Judge vs human on the 0-3 categories: statsmodels on the 4 x 4 table of the judge
    # against the observers' mean rounded half up.
    jvh = out["judge_vs_human"]
    human_category = np.floor(mean + 0.5)
    table = (
        pd.crosstab(judge_scores, human_category)
        .reindex(index=range(4), columns=range(4), fill_value=0)
        .to_numpy()
    )
    assert jvh["confusion_matrix"]["labels"] == [0, 1, 2, 3]
    assert jvh["confusion_matrix"]["counts"] == table.tolist()
    for name, wt in (("kappa", None), ("kappa_linear", "linear"), ("kappa_quadratic", "quadratic")):
        assert jvh[name]["value"] == pytest.approx(cohens_kappa(table, wt=wt).kappa, abs=1e-12)
    assert jvh["exact_agreement"]["value"] == pytest.approx(np.mean(judge_scores == human_category))
    assert jvh["mean_difference"]["value"] == pytest.approx(np.mean(judge_scores - mean))

    # Without --scale the same file is refused: every 0 is off the 1-5 scale, by line.
    refused = fairjudge("agreement", "compute", "--human", str(human), "--bootstrap", "0")
    assert refused.returncode == 1
    zero_lines = [n for n, row in enumerate(human_rows, start=2) if row[2] == 0]
    assert f"line {zero_lines[0]}: score '0' is outside the 1-5 scale" in refused.stderr
    assert refused.stderr.count("is outside the 1-5 scale") == len(zero_lines)


def test_tiny_zero_to_three_case_by_hand(tmp_path: Path) -> None:
    # Two raters, four items: (0, 0), (1, 1), (2, 3), (3, 3). Coincidences o00 = o11 = o33 = 2,
    # o23 = o32 = 1; n0 = 2, n1 = 2, n2 = 1, n3 = 3, n = 8. Nominal alpha
    # = 1 - (n - 1) * 2 / (n^2 - sum n_c^2) = 1 - 7 * 2 / (64 - 18) = 16/23.
    human = write(
        tmp_path / "human.csv",
        ["item_id", "rater", "score"],
        [["a", "r1", 0], ["a", "r2", 0], ["b", "r1", 1], ["b", "r2", 1],
         ["c", "r1", 2], ["c", "r2", 3], ["d", "r1", 3], ["d", "r2", 3]],
    )  # fmt: skip
    out = in_process(
        "agreement", "compute", "--human", str(human), "--scale", "0-3", "--bootstrap", "0",
        "--json",
    )  # fmt: skip
    alpha = out["human_vs_human"]["alpha_nominal"]
    assert alpha["value"] == pytest.approx(16 / 23, abs=1e-12) and alpha["n"] == 4


def test_binary_scale_end_to_end(tmp_path: Path) -> None:
    # Krippendorff (2004), Content Analysis, 2nd ed., section 11.3.1: two observers, ten
    # units on 0/1; alpha = 1 - 19 * 4 / (14 * 6) = 2/21 = 0.095 (published).
    jon = [1, 1, 0, 0, 0, 0, 0, 0, 0, 0]
    han = [0, 1, 1, 0, 0, 1, 0, 1, 0, 0]
    rows = [[f"u{i}", "Jon", a] for i, a in enumerate(jon)]
    rows += [[f"u{i}", "Han", b] for i, b in enumerate(han)]
    human = write(tmp_path / "human.csv", ["item_id", "rater", "score"], rows)
    # The judge copies Jon. Against Han (kappa_per_annotator): agree on 6 of 10 (units 1, 3,
    # 4, 6, 8, 9); the judge says 1 on 2/10, Han on 4/10, so p_e = 0.2*0.4 + 0.8*0.6 = 0.56
    # and kappa = (0.6 - 0.56) / (1 - 0.56) = 1/11.
    judge = write(
        tmp_path / "judge.csv", ["item_id", "score"], [[f"u{i}", a] for i, a in enumerate(jon)]
    )
    out = in_process(
        "agreement", "compute", "--human", str(human), "--judge", str(judge),
        "--scale", "0/1", "--bootstrap", "0", "--json",
    )  # fmt: skip
    assert out["settings"]["scale"] == "0/1"
    assert out["human_vs_human"]["alpha_nominal"]["value"] == pytest.approx(2 / 21, abs=1e-12)
    per_rater = {e["rater"]: e for e in out["judge_vs_human"]["kappa_per_annotator"]}
    assert per_rater["Han"]["kappa"]["value"] == pytest.approx(1 / 11, abs=1e-12)
    assert per_rater["Jon"]["kappa"]["value"] == pytest.approx(1.0)
    assert out["judge_vs_human"]["confusion_matrix"]["labels"] == [0, 1]


def test_named_levels_are_read_by_name(tmp_path: Path) -> None:
    # poor, fair, good are coded 1, 2, 3; the file may use any case. Two raters agree on 2
    # of 3 items, like the coded ratings (1, 1), (2, 3), (3, 3).
    human = write(
        tmp_path / "human.csv",
        ["item_id", "rater", "score"],
        [["a", "r1", "poor"], ["a", "r2", "Poor"], ["b", "r1", "fair"],
         ["b", "r2", "good"], ["c", "r1", "GOOD"], ["c", "r2", "good"]],
    )  # fmt: skip
    scale = Scale.parse("poor,fair,good")
    result = compute(human, scale=scale, options=BootstrapOptions(n_bootstrap=0))
    coded = np.array([[1, 2, 3], [1, 3, 3]], dtype=float)
    assert result.human_vs_human.alphas["alpha_nominal"].value == pytest.approx(
        krippendorff.alpha(reliability_data=coded, level_of_measurement="nominal"), abs=1e-12
    )
    assert result.to_dict()["settings"]["scale"] == "poor,fair,good"
    assert files_table(result).title == "agreement (3 items, poor,fair,good scale)"
    bad = write(tmp_path / "bad.csv", ["item_id", "rater", "score"], [["a", "r1", "great"]])
    with pytest.raises(RatingsError) as caught:
        compute(bad, scale=scale)
    assert caught.value.problems == [
        (2, "score 'great' is not a number or a level of the poor,fair,good scale")
    ]


def test_scores_off_the_declared_scale_are_refused_with_their_line(tmp_path: Path) -> None:
    human = write(
        tmp_path / "human.csv",
        ["item_id", "rater", "score"],
        [["a", "r1", 0], ["a", "r2", 4], ["b", "r1", 3], ["b", "r2", -1]],
    )
    with pytest.raises(RatingsError) as caught:
        compute(human, scale=Scale.parse("0-3"))
    assert caught.value.problems == [
        (3, "score '4' is outside the 0-3 scale"),
        (5, "score '-1' is outside the 0-3 scale"),
    ]
    judge = write(tmp_path / "judge.csv", ["item_id", "score"], [["a", 1], ["a", "NA"], ["b", 7]])
    with pytest.raises(RatingsError) as caught:
        read_judge(judge, Scale.parse("1-5"))
    assert caught.value.problems == [(4, "score '7' is outside the 1-5 scale")]
    # A 1-10 scale takes the 7, and a mean between levels stays allowed.
    assert read_judge(judge, Scale.parse("1-10")) == ({"a": [1.0], "b": [7.0]}, 1)
    assert parse_score("2.5", Scale.parse("0-3")) == 2.5
    with pytest.raises(ValueError, match=r"score '3.5' is outside the 0-3 scale"):
        parse_score("3.5", Scale.parse("0-3"))
    # The CLI names the accepted forms when --scale cannot be read.
    run = CliRunner().invoke(
        cli, ["agreement", "compute", "--human", str(human), "--scale", "zero to three"]
    )
    assert run.exit_code == 2
    assert "--scale must look like 1-5, 0/1 or 1,2,3; got 'zero to three'" in run.output


def test_reading_names_the_ends_of_the_scale() -> None:
    # On 0-3 a judge that only says 1 or 2 never uses 0 or 3 (not "1 or 5").
    labels = (0, 1, 2, 3)
    options = BootstrapOptions(n_bootstrap=0)
    judge = [1, 2, 1, 2, 1, 2]
    human = [0, 2, 1, 3, 1, 2]
    agreement = judge_vs_human(judge, human, labels=labels, options=options, warn=False)
    matrix = RatingMatrix.from_long(
        list("abcdefabcdef"), ["r1"] * 6 + ["r2"] * 6, human + [0, 2, 1, 3, 2, 2]
    )
    ceiling = human_vs_human(matrix, labels=labels, options=options, warn=False)
    said = reading(agreement, ceiling, [float(v) for v in judge], len(judge))
    assert "judge never uses 0 or 3" in said
    # On 0/1 a judge that says 1 everywhere gives every item 1.
    binary = judge_vs_human([1, 1, 1], [0, 1, 1], labels=(0, 1), options=options, warn=False)
    assert "judge gives every item 1" in reading(binary, ceiling, [1.0, 1.0, 1.0], 3)
