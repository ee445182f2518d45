"""``fairjudge agreement alt-test --human FILE --judge FILE`` (issue 27) on SummEval's three
expert annotators of coherence (../shared/data/summeval, read by path).

Two judges are planted: one that follows the experts' mean with seeded noise (it must pass)
and the same judge pushed up 1.5 points (it must fail). The expected verdicts, omega, rho and
every annotator's numbers come from ``judge.stats.alttest.alt_test`` called directly on
arrays built here from the JSON files, never through the command's use case; the refusals
are the statistical core's own messages.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from judge.stats.alttest import AltTestResult, alt_test
from tests.support.cli import fairjudge  # the command's main, run in this process
from tests.support.summeval_coherence import SUMMEVAL, require_summeval

EXPERTS = ("expert1", "expert2", "expert3")
DROPPED = 7  # expert2's rating of every 7th summary is left out: missing ratings are normal


def summeval() -> tuple[list[str], np.ndarray]:
    """SummEval's 1,200 summaries (12 systems x 100) and the experts' coherence ratings as
    items x experts, NaN where a rating was dropped."""
    require_summeval()  # fails under CI=true when the data is missing
    keys, rows = [], []
    for path in sorted(SUMMEVAL.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            keys.append(f"{record['model_id']}|{record['id']}")
            rows.append([float(a["coherence"]) for a in record["expert_annotations"]])
    ratings = np.array(rows)
    ratings[::DROPPED, 1] = np.nan
    return keys, ratings


def planted(ratings: np.ndarray, shift: float) -> np.ndarray:
    """A judge on 1-5: the experts' mean (of those who rated) plus N(0, 0.5**2) noise (seed
    0) plus ``shift``, rounded half up and kept on 1-5. Built from the experts themselves, it
    checks the procedure, not any real judge."""
    noise = np.random.default_rng(0).normal(0, 0.5, ratings.shape[0])
    return np.clip(np.floor(np.nanmean(ratings, axis=1) + noise + shift + 0.5), 1, 5)


def write(folder: Path, keys: list[str], ratings: np.ndarray, judge: np.ndarray) -> Path:
    """HUMAN.csv (item_id,rater,score) and JUDGE.csv (item_id,score) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "human.csv").open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["item_id", "rater", "score"])
        for key, row in zip(keys, ratings, strict=True):
            out.writerows(
                [key, r, int(s)] for r, s in zip(EXPERTS, row, strict=True) if not math.isnan(s)
            )
    with (folder / "judge.csv").open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["item_id", "score"])
        out.writerows([key, int(s)] for key, s in zip(keys, judge, strict=True))
    return folder


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, AltTestResult]]:
    """Each planted judge's files and the alt-test computed directly on the arrays."""
    keys, ratings = summeval()
    folder = tmp_path_factory.mktemp("alttest")
    out = {}
    for name, shift in (("close", 0.0), ("biased", 1.5)):
        judge = planted(ratings, shift)
        expected = alt_test(ratings, judge, epsilon=0.2, annotators=EXPERTS)
        out[name] = (write(folder / name, keys, ratings, judge), expected)
    return out


def run(folder: Path, *args: str) -> tuple[int, str, str]:
    done = fairjudge(
        "agreement", "alt-test", "--human", folder / "human.csv", "--judge", folder / "judge.csv",
        *args,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def check_same(got: dict[str, object], expected: AltTestResult) -> None:
    """The command's JSON entry against ``alt_test`` on the arrays, annotator by annotator."""
    assert got["omega"] == pytest.approx(expected.omega)
    assert got["rho"] == pytest.approx(expected.rho, abs=1e-12)
    assert got["passed"] is expected.passed
    rows = got["annotators"]
    assert isinstance(rows, list) and len(rows) == len(expected.annotators)
    for row, want in zip(rows, expected.annotators, strict=True):
        assert row["annotator"] == want.annotator
        assert row["n_items"] == want.n_items
        assert (row["rho_f"], row["rho_h"]) == pytest.approx((want.rho_f, want.rho_h), abs=1e-12)
        assert row["test"] == want.test
        assert row["p_value"] == pytest.approx(want.p_value, rel=1e-9, abs=1e-300)
        assert row["p_corrected"] == pytest.approx(want.p_corrected, rel=1e-9, abs=1e-300)
        assert row["rejected"] is want.rejected


def test_a_close_judge_passes_and_a_biased_one_fails(
    data: dict[str, tuple[Path, AltTestResult]],
) -> None:
    found = {}
    for name, (folder, expected) in data.items():
        code, stdout, stderr = run(folder, "--epsilon", "expert", "--json")
        assert code == 0, stderr
        report = json.loads(stdout)
        (entry,) = report["rubrics"]
        check_same(entry, expected)
        assert report["epsilon"] == 0.2 and report["epsilon_preset"] == "expert"
        # every summary has a judge score; 1,200 x 3 ratings less the 172 dropped (every 7th
        # of 1,200: indices 0, 7, ..., 1197)
        assert report["items"]["paired"] == entry["n_items"] == 1200
        assert entry["annotators"][1]["n_items"] == 1200 - math.ceil(1200 / DROPPED)
        found[name] = entry
    print(
        f"\nSummEval coherence, 3 experts (expert2 missing every {DROPPED}th), epsilon 0.2: "
        f"close judge omega={found['close']['omega']:.3f} rho={found['close']['rho']:.3f}; "
        f"+1.5 judge omega={found['biased']['omega']:.3f} rho={found['biased']['rho']:.3f}"
    )
    # Detection: the close judge wins against every expert, the biased one against under half.
    assert found["close"]["passed"] and found["close"]["omega"] == 1.0
    assert found["close"]["verdict"] == "passes: omega = 1.00 >= 0.5 (epsilon 0.2, expert)"
    assert not found["biased"]["passed"] and found["biased"]["omega"] < 0.5
    assert found["biased"]["verdict"].startswith("fails: omega = ")
    assert found["close"]["rho"] > found["biased"]["rho"] + 0.2


def test_the_table_and_the_verdict_line(data: dict[str, tuple[Path, AltTestResult]]) -> None:
    folder, expected = data["biased"]
    code, stdout, _ = run(folder, "--epsilon", "0.2")
    assert code == 0  # a failed test is a result, not an error
    for column in ("annotator", "rho_f", "rho_h", "p (BY)", "rejected"):
        assert column in stdout
    for row in expected.annotators:
        assert row.annotator in stdout and f"{row.rho_f:.3f}" in stdout
    # A number given, not a preset: the line names the margin alone.
    want = f"fails: omega = {expected.omega:.2f} < 0.5 (epsilon 0.2); rho = {expected.rho:.2f}"
    assert want in stdout


def test_two_annotators_or_too_few_items_are_refused_on_one_line(
    data: dict[str, tuple[Path, AltTestResult]], tmp_path: Path
) -> None:
    folder, _ = data["close"]
    two = tmp_path / "human.csv"
    lines = (folder / "human.csv").read_text().splitlines()
    two.write_text("\n".join(x for x in lines if ",expert3," not in x) + "\n")
    done = fairjudge("agreement", "alt-test", "--human", two, "--judge", folder / "judge.csv",
                     "--epsilon", "expert")  # fmt: skip
    assert done.returncode == 1, done.stdout
    assert done.stderr.count("\n") == 1
    assert "needs at least 3 annotators, got 2" in done.stderr
    # expert2 shares 1,028 items with the others; asking for more refuses them by name.
    code, _, stderr = run(folder, "--epsilon", "crowd", "--min-items", "1100")
    assert code == 1 and "'expert2' (1028) have fewer than 1100" in stderr, stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "Missing option '--epsilon'"),
        (("--epsilon", "guru"), "--epsilon: Value error, expected expert (0.2)"),
        (("--epsilon", "1.5"), "--epsilon: Value error"),
        (("--epsilon", "expert", "--alpha", "0"), "--alpha:"),
        (("--epsilon", "expert", "--rubric", "ICS"), "--rubric and --campaign"),
    ],
)
def test_bad_options_are_usage_errors(
    data: dict[str, tuple[Path, AltTestResult]], args: tuple[str, ...], message: str
) -> None:
    folder, _ = data["close"]
    code, _, stderr = run(folder, *args)
    assert code == 2 and message in stderr, stderr


def test_neither_a_run_nor_files_is_a_usage_error() -> None:
    done = fairjudge("agreement", "alt-test", "--epsilon", "expert")
    assert done.returncode == 2 and "--judge-run RUN, or both --human" in done.stderr


def test_the_command_defaults_are_the_use_case_defaults() -> None:
    # The CLI module may not import the statistics (they load scipy) to read the defaults,
    # so they are written there again; this keeps the two copies equal.
    from judge.stats.alttest import MIN_ITEMS
    from server.cli.agreement import agreement_alt_test
    from server.usecases.alttest import AltTestOptions

    defaults = {p.name: p.default for p in agreement_alt_test.params}
    fields = AltTestOptions.model_fields
    assert defaults["min_items"] == fields["min_items"].default == MIN_ITEMS
    assert defaults["alpha"] == fields["alpha"].default
    assert defaults["alignment"] == fields["alignment"].default
