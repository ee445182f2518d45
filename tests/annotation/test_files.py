"""`fairjudge agreement compute` on your own files: the JSON contract and its values."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import krippendorff
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from annotation.errors import RatingsError
from annotation.files import compute
from annotation.sections import files_table, fmt
from judge.stats.coefficient import BootstrapOptions
from tests.support.cli import fairjudge  # the command's main, run in this process
from tests.support.summeval_coherence import SUMMEVAL, require_summeval

# "undefined_reason" was added by the redesign (None unless the coefficient is undefined).
COEFFICIENT_KEYS = {"value", "ci_low", "ci_high", "p_value", "n", "undefined_reason"}


@pytest.fixture(scope="module")
def summeval_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, pd.DataFrame]:
    """Three systems of SummEval: experts as humans (one rating dropped per fifth item), the
    five crowd workers as judge samples, source document as the group."""
    require_summeval()  # fails under CI=true when the data is missing
    folder = tmp_path_factory.mktemp("summeval")
    human_rows, judge_rows = [], []
    for path in sorted(SUMMEVAL.glob("*.jsonl"))[:3]:
        for n, line in enumerate(path.read_text().splitlines()):
            r = json.loads(line)
            item = f"{r['model_id']}|{r['id']}"
            for i, a in enumerate(r["expert_annotations"]):
                if not (i == 0 and n % 5 == 0):
                    human_rows.append([item, f"expert{i}", a["relevance"], r["id"]])
            judge_rows += [[item, t["relevance"]] for t in r["turker_annotations"]]
    human, judge = folder / "human.csv", folder / "judge.csv"
    with human.open("w", newline="") as f:
        csv.writer(f).writerows([["item_id", "rater", "score", "doc"], *human_rows])
    with judge.open("w", newline="") as f:
        csv.writer(f).writerows([["item_id", "score"], *judge_rows])
    frame = pd.DataFrame(human_rows, columns=["item", "rater", "score", "doc"])
    return human, judge, frame


def test_json_contract_and_values(summeval_files: tuple[Path, Path, pd.DataFrame]) -> None:
    human, judge, frame = summeval_files
    run = fairjudge(
        "agreement",
        "compute",
        "--human",
        str(human),
        "--judge",
        str(judge),
        "--group-by",
        "doc",
        "--bootstrap",
        "200",
        "--seed",
        "3",
        "--json",
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert {"n_items", "human_vs_human", "judge_vs_human", "grouped"} <= set(out)
    assert out["n_items"] == 300
    for name in (
        "pearson",
        "spearman",
        "kendall",
        "kappa",
        "kappa_linear",
        "kappa_quadratic",
        "exact_agreement",
        "within_one",
        "mean_difference",
    ):
        assert set(out["judge_vs_human"][name]) == COEFFICIENT_KEYS, name
    for name in ("alpha_nominal", "alpha_ordinal", "alpha_interval"):
        assert set(out["human_vs_human"][name]) == COEFFICIENT_KEYS, name
    assert out["grouped"]["n_groups"] + out["grouped"]["n_groups_skipped"] == 100

    # Independent recomputation with pandas + scipy + krippendorff.
    human_mean = frame.groupby("item").score.mean()
    turk = pd.read_csv(judge).groupby("item_id").score.mean().loc[human_mean.index]
    expected = stats.spearmanr(turk, human_mean)
    assert out["judge_vs_human"]["spearman"]["value"] == pytest.approx(expected.statistic)
    assert out["judge_vs_human"]["spearman"]["p_value"] == pytest.approx(expected.pvalue)
    assert out["judge_vs_human"]["mean_difference"]["value"] == pytest.approx(
        float(np.mean(turk - human_mean))
    )
    pivot = frame.pivot(index="rater", columns="item", values="score")
    assert out["human_vs_human"]["alpha_ordinal"]["value"] == pytest.approx(
        krippendorff.alpha(
            reliability_data=pivot.to_numpy(),
            level_of_measurement="ordinal",
            value_domain=[1, 2, 3, 4, 5],
        )
    )
    sp = out["judge_vs_human"]["spearman"]
    assert sp["ci_low"] < sp["value"] < sp["ci_high"] and sp["n"] == 300
    assert sp["undefined_reason"] is None
    # Five crowd samples per item: self-consistency is reported too.
    assert out["judge_self_consistency"]["n_samples"] == 5


def test_missing_summeval_data_fails_in_ci_and_skips_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support import summeval_coherence

    absent = tmp_path / "no" / "summeval"
    monkeypatch.setattr(summeval_coherence, "SUMMEVAL", absent)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=f"not found at {absent}.*CI must provide"):
        require_summeval()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match=f"not found at {absent}"):
        require_summeval()
    absent.mkdir(parents=True)  # a folder without the rating files is missing data too
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match=str(absent)):
        require_summeval()


def test_human_only_and_bad_files(
    tmp_path: Path, summeval_files: tuple[Path, Path, pd.DataFrame]
) -> None:
    human, _, _ = summeval_files
    run = fairjudge("agreement", "compute", "--human", str(human), "--bootstrap", "0", "--json")
    out = json.loads(run.stdout)
    assert set(out) == {"n_items", "human_vs_human", "settings"} and out["n_items"] == 300
    assert out["settings"]["scale"] == "1-5"  # FairMonitor's scale unless --scale says otherwise
    assert out["human_vs_human"]["alpha_interval"]["ci_low"] is None  # no bootstrap asked
    bad = tmp_path / "bad.csv"
    bad.write_text("item_id,rater,score\na,r1,4\na,r1,5\nb,r1,seven\n")
    failed = fairjudge("agreement", "compute", "--human", str(bad))
    assert failed.returncode == 1
    assert "line 3: rater 'r1' already rated item 'a' on line 2" in failed.stderr
    assert "line 4: score 'seven' is not a number" in failed.stderr
    missing = tmp_path / "missing.csv"
    missing.write_text("item,rater,score\na,r1,4\n")
    assert (
        "needs the column(s) item_id"
        in fairjudge("agreement", "compute", "--human", str(missing)).stderr
    )


def test_undefined_coefficients_carry_their_reason(tmp_path: Path) -> None:
    # Three items rated by two raters; the judge gives every item 4, so its correlations with
    # the humans are 0/0 (constant), while its kappa is defined (the humans vary).
    human = tmp_path / "human.csv"
    human.write_text("item_id,rater,score\na,r1,2\na,r2,3\nb,r1,4\nb,r2,4\nc,r1,5\nc,r2,5\n")
    judge = tmp_path / "judge.csv"
    judge.write_text("item_id,score\na,4\nb,4\nc,4\n")
    result = compute(human, judge, options=BootstrapOptions(n_bootstrap=50))
    reason = "constant ratings: the judge gave every item 4"
    out = result.to_dict()
    assert out["judge_vs_human"]["spearman"]["value"] is None
    assert out["judge_vs_human"]["spearman"]["undefined_reason"] == reason
    assert out["judge_vs_human"]["kappa"]["undefined_reason"] is None
    assert result.judge is not None
    assert fmt(result.judge.agreement.coefficients["spearman"]) == f"n/a ({reason})"
    shown = {(row[0], row[1]): row[2] for row in files_table(result).rows}
    assert shown[("judge_vs_human", "pearson")] == f"n/a ({reason})"
    # Exact agreement: only item b (judge 4, human mean 4) matches -> 1/3, shown with 3 digits.
    assert shown[("judge_vs_human", "exact_agreement")].startswith("0.333 [")

    run = fairjudge("agreement", "compute", "--human", str(human), "--judge", str(judge), "--json")
    assert run.returncode == 0, run.stderr
    via_cli = json.loads(run.stdout)["judge_vs_human"]["kendall"]
    assert via_cli["undefined_reason"] == reason


def _csv(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


HUMAN = "item_id,rater,score\na,r1,3\na,r2,4\nb,r1,2\nb,r2,2\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("item_id,rater,score\na,r1\n", "line 2: score is missing (the row has 2 of the header"),
        ("item_id,rater,score\na,r1,\n", "line 2: score is missing"),
        ('item_id,rater,score\n"a,r1,3\nb,r1,2\n', "line 2 is not valid CSV"),
        ('item_id,rater,score\na,r1,3\nb,r1,"2"x\n', "line 3 is not valid CSV"),
        ("item_id,rater,score\nb,r1,2\ncaf\u00e9,r1,3\n".encode("latin-1"), "line 3 is not UTF-8"),
    ],
)
def test_bad_human_files_name_the_line(tmp_path: Path, text: str | bytes, message: str) -> None:
    with pytest.raises(RatingsError) as caught:
        compute(_csv(tmp_path, "h.csv", text))
    assert message in str(caught.value)


def test_a_bom_in_a_csv_is_accepted(tmp_path: Path) -> None:
    path = _csv(tmp_path, "h.csv", b"\xef\xbb\xbf" + HUMAN.encode())
    assert compute(path, options=BootstrapOptions(n_bootstrap=0)).n_items == 2


@pytest.mark.parametrize(
    ("judge", "message"),
    [
        ("item_id,score\nx,3\ny,4\n", "no item_id of"),
        ("item_id,score\na,NA\nb,\n", "is empty or NA"),
        ("item_id,score\na,NA\nz,3\n", "none of the 1 item(s) in both"),
    ],
)
def test_judge_files_with_nothing_to_pair_are_refused(
    tmp_path: Path, judge: str, message: str
) -> None:
    human = _csv(tmp_path, "h.csv", HUMAN)
    with pytest.raises(RatingsError) as caught:
        compute(human, _csv(tmp_path, "j.csv", judge), options=BootstrapOptions(n_bootstrap=0))
    assert message in str(caught.value)
