"""judge.reports.gates, gate_checks and gate_report on item scores built by hand: a run's
figures against statsmodels (Wilson) and scipy (Student t) and against the run report's own
stage metrics; each gate's pass or fail derived by hand from the planted scores (the
derivation beside each gate); paired bounds from the binomial distribution of the planted
flips; every problem of a bad file listed at once with its line (counted in the file text);
JUnit XML parsed back."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from judge.metrics import ItemScore, stage_metrics
from judge.reports.compare_paired import paired_rows
from judge.reports.gate_checks import (
    FAIL,
    NO_FIGURE,
    PASS,
    GateInputs,
    GateResult,
    RubricStanding,
    evaluate,
    missing_figures,
    paired_cells,
    paired_table,
    run_figures,
)
from judge.reports.gate_report import junit_xml
from judge.reports.gates import metric_named, parse_gates
from tests.support.gate_runs import RUBRICS, SCORES_A, SCORES_B, Scores

SHARE, MEAN = "S1 ICS share>=3 (%)", "S1 ICS mean (% of max)"


def item_scores(scores: Scores) -> list[ItemScore]:
    """The planted tables of tests/support/gate_runs.py as item scores, item ids shared by
    both runs (so that they pair)."""
    out = []
    item = 0
    for (stage, factor), values in scores.items():
        for value in values:
            out += [
                ItemScore(item, f"k{item}", stage, factor, "s", rubric, value, 1,
                          int(value is not None), (item,), ())
                for rubric in RUBRICS[stage]
            ]  # fmt: skip
            item += 1
    return out


A, B = item_scores(SCORES_A), item_scores(SCORES_B)
INPUTS = GateInputs(
    refs={"a": 1, "b": 2, 1: 1, 2: 2},
    scores={1: A, 2: B},
    standing={
        1: {
            "ICS": RubricStanding("ICS", True, "validated (planted)"),
            "SBAS": RubricStanding("SBAS", False, "not validated: no qualification for SBAS"),
        }
    },
)


def results(text: str) -> list[GateResult]:
    parsed = parse_gates(text)
    assert parsed.problems == []
    figures = {i: run_figures(s) for i, s in INPUTS.scores.items()}
    assert missing_figures(parsed.gates, INPUTS, figures) == []
    return evaluate(parsed.gates, INPUTS, figures)


def test_run_figures_are_the_reports_intervals() -> None:
    figures = run_figures(A)
    # S1 overall: 8 + 5 = 13 of 20 items score ICS >= 3; Wilson from statsmodels.
    low, high = proportion_confint(13, 20, alpha=0.05, method="wilson")
    share = figures[("all", SHARE)]
    assert share.value == pytest.approx(65.0)
    assert (share.low, share.high) == pytest.approx((low * 100, high * 100))
    # S1 gender mean: (8 x 4 + 2 x 2) / 10 = 3.6 of 5 = 72 %; Student t from scipy.
    gender = [4.0] * 8 + [2.0] * 2
    ci = stats.ttest_1samp(gender, 0).confidence_interval(0.95)
    mean = figures[("gender", MEAN)]
    assert mean.value == pytest.approx(72.0)
    assert (mean.low, mean.high) == pytest.approx((ci.low * 20, ci.high * 20))
    # S3 SBAS mean by factor: 5 items each (the t interval's minimum), so it has one.
    assert figures[("race_culture", "S3 SBAS mean (% of max)")].low is not None
    # The stage metrics are the run report's own numbers (judge.metrics.stage_metrics).
    for row in stage_metrics(A, "m") + stage_metrics(A, "m", by_factor=False):
        f = figures[(row.factor, row.metric)]
        assert (f.value, f.low, f.high) == (row.value, row.ci_low, row.ci_high)


def test_figure_gates_pass_and_fail_as_derived_by_hand() -> None:
    found = results(
        """
[runs]
a = 1

[[gate]]   # gender 80 %, race 50 %: race fails
name = "every factor 60"
run = "a"
figure = "S1 ICS>=3"
factor = "every"
min = 60

[[gate]]   # 13 of 20 = 65 %
run = "a"
figure = "S1 ICS>=3"
min = 60

[[gate]]   # Wilson lower bound of 13/20 is 43.3 % (statsmodels, above)
run = "a"
figure = "S1 ICS>=3"
of = "lower"
min = 45

[[gate]]   # S3 gender: 4 of 5 = 80 % SBAS >= 4; in [70, 90]
run = 1
figure = "S3 SBAS share>=4 (%)"
factor = "gender"
min = 70
max = 90

[[gate]]   # S1 gender mean 72 % is above 70
run = "a"
figure = "s1 ics MEAN"
factor = "gender"
max = 70
"""
    )
    assert [r.outcome for r in found] == [FAIL, PASS, FAIL, PASS, FAIL]
    every = found[0]
    assert [(c.factor, c.number, c.passed) for c in every.checks] == [
        ("gender", 80.0, True),
        ("race_culture", 50.0, False),
    ]
    assert "race_culture 50 %" in every.message and "gender" not in every.message
    assert "43.29" in found[2].message


def test_a_figure_without_an_interval_fails_as_no_figure() -> None:
    # A mean of 3 items has no t interval (below judge.stats.intervals.MIN_MEAN_N = 5).
    few = {("S1", "gender"): [4, 2, 3]}
    inputs = GateInputs(refs={1: 1}, scores={1: item_scores(few)})
    parsed = parse_gates('[[gate]]\nrun = 1\nfigure = "S1 ICS mean"\nof = "lower"\nmin = 10\n')
    (result,) = evaluate(parsed.gates, inputs)
    assert result.outcome == NO_FIGURE and not result.passed
    assert "too few" in result.message


def test_paired_gates_read_the_paired_table() -> None:
    # B - A on S1 race: items 5-7 go fail -> pass, 7 unchanged: diffs 3 x 100 and 7 x 0,
    # mean +30 points. A bootstrap mean of these is 10 x Binomial(10, 0.3) points; its 97.5th
    # percentile is 10 x binom.ppf(0.975, 10, 0.3) = 60, its 95th 10 x binom.ppf(0.95) = 50.
    assert stats.binom.ppf(0.975, 10, 0.3) == 6 and stats.binom.ppf(0.95, 10, 0.3) == 5
    found = results(
        """
[runs]
a = 1
b = 2

[[gate]]   # +30 >= 20
compare = ["a", "b"]
figure = "S1 ICS>=3"
factor = "race_culture"
min = 20

[[gate]]   # upper bound 60 > 50
compare = ["a", "b"]
figure = "S1 ICS>=3"
factor = "race_culture"
of = "upper"
max = 50

[[gate]]   # McNemar: 3 discordant pairs all one way, p = 2 x 0.5**3 = 0.25: not flagged
compare = ["a", "b"]
figure = "S1 ICS>=3"
factor = "race_culture"
require = "not_flagged"

[[gate]]   # every difference >= 0, so the 90 % interval's lower bound >= 0 > -5
compare = ["a", "b"]
figure = "S1 ICS>=3"
factor = "race_culture"
require = "no_worse"

[[gate]]   # the 90 % interval's upper bound is 50 > 5: not equivalent
compare = ["a", "b"]
figure = "S1 ICS>=3"
factor = "race_culture"
require = "equivalent"

[[gate]]   # gender: every pair unchanged, no interval (no spread): no bound to check
compare = ["a", "b"]
figure = "S1 ICS>=3"
factor = "gender"
of = "lower"
min = -1
"""
    )
    assert [r.outcome for r in found] == [PASS, FAIL, PASS, PASS, FAIL, NO_FIGURE]
    assert found[0].checks[0].number == pytest.approx(30.0)
    assert found[1].checks[0].number == pytest.approx(60.0)
    assert "every pair differs by the same amount" in found[5].message
    # A passed verdict says so with B - A: +30 points, the 95 % interval [0 or 10, 60].
    assert found[3].message.startswith("S1 ICS>=3 verdict: race_culture yes (B - A 30 [")


def test_qualified_gate_names_the_rubric_not_validated() -> None:
    found = results('[[gate]]\nqualified = 1\n\n[[gate]]\nqualified = 1\nrubrics = ["ICS"]\n')
    assert [r.outcome for r in found] == [FAIL, PASS]
    assert found[0].message == "SBAS: not validated: no qualification for SBAS"


BAD = """\
title = "x"
[runs]
a = 1
b = "two"

[[gate]]
run = "a"
figure = "S3 SBAS>=5"
min = 60

[[gate]]
run = "zz"
figure = "S1 ICS>=3"
of = "lowest"
mn = 3

[[gate]]
compare = ["a"]
figure = "S1 ICS mean"
max = 1

[[gate]]
run = "a"
compare = ["a", 2]
figure = "S1 ICS mean"

[[gate]]
run = "a"
figure = "S1 ICS>=3"
min = 90
max = 10

[[gate]]
compare = ["a", 2]
figure = "S1 ICS>=3"
require = "better"
margin = 0
"""


def test_every_problem_of_a_bad_file_is_listed_with_its_line() -> None:
    problems = parse_gates(BAD).problems
    # Lines counted in BAD above: each key's own line, or its gate's [[gate]] header.
    assert [line for line, _ in problems] == [1, 4, 8, 11, 12, 14, 15, 18, 22, 30, 36, 37]
    said = "\n".join(why for _, why in problems)
    for words in (
        "unknown key 'title'",
        "runs.b: 'two'",
        "no figure 'S3 SBAS>=5'",
        "no threshold",
        "no run named 'zz'",
        "of must be one of value, lower, upper, got 'lowest'",
        "unknown key 'mn'",
        "compare must be two runs",
        "give exactly one of run",
        "min 90 is above max 10",
        "require must be one of",
        "margin must be above 0",
    ):
        assert words in said, words


def test_figures_a_run_does_not_have_are_problems_too() -> None:
    parsed = parse_gates(
        '[[gate]]\nrun = 1\nfigure = "S2 TCS mean"\nmin = 1\n\n'
        '[[gate]]\nrun = 1\nfigure = "S1 ICS>=3"\nfactor = "subject"\nmin = 1\n\n'
        '[[gate]]\nqualified = 1\nrubrics = ["TCS"]\n'
    )
    figures = {1: run_figures(A)}
    problems = missing_figures(parsed.gates, INPUTS, figures)
    assert [line for line, _ in problems] == [3, 9, 14]
    assert "judged no S2 item with TCS" in problems[0][1]
    assert "it has: all, gender, race_culture" in problems[1][1]
    assert "did not judge TCS" in problems[2][1]


def test_paired_runs_of_different_items_are_a_problem() -> None:
    other = [s for s in B if s.factor == "gender"]
    inputs = GateInputs(refs={1: 1, 3: 3}, scores={1: A, 3: other})
    parsed = parse_gates('[[gate]]\ncompare = [1, 3]\nfigure = "S1 ICS>=3"\nmin = 0\n')
    (problem,) = missing_figures(parsed.gates, inputs, {i: run_figures(s) for i, s in
                                                       inputs.scores.items()})  # fmt: skip
    assert problem[0] == 2 and "did not judge the same items" in problem[1]


def test_a_toml_syntax_error_names_its_line() -> None:
    (problem,) = parse_gates('[[gate]]\nrun = 1\nfigure = "S1 ICS>=3"\nmin = \n').problems
    assert problem[0] == 4 and "not valid TOML" in problem[1]


def test_figures_are_named_by_label_or_report_name() -> None:
    assert metric_named("S3 SBAS>=4") == metric_named("s3  sbas share>=4 (%)")
    assert metric_named("S1 ICS mean") is not None and metric_named("S1 ICS>=4") is None


def test_junit_parses_back_one_testcase_per_gate() -> None:
    found = results(
        '[[gate]]\nname = "race <& share>"\nrun = 1\nfigure = "S1 ICS>=3"\n'
        'factor = "race_culture"\nmin = 60\n\n'
        '[[gate]]\nrun = 1\nfigure = "S1 ICS>=3"\nmin = 60\n'
    )
    root = ET.fromstring(junit_xml(found, seconds=0.5))
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [
        "1. race <& share>",
        "2. S1 ICS>=3 (all) of run 1 >= 60",
    ]
    failure = cases[0].find("failure")
    assert failure is not None and cases[1].find("failure") is None
    # The failure names the figure found (race 50 %) and the threshold (>= 60).
    assert "race_culture 50 %" in (failure.get("message") or "")
    assert ">= 60" in (failure.get("message") or "")


def test_the_paired_table_bootstraps_only_what_gates_read_and_holds_the_same_rows() -> None:
    # Two runs of random scores, B moved by -1, 0 or +1 per item: the cells a gate reads are
    # exactly the rows of compare_paired.paired_rows, Holm over the whole table included.
    rng = np.random.default_rng(3)
    a = [replace(s, score=float(rng.integers(1, 6))) for s in A]
    b = [replace(s, score=float(np.clip(x.score + rng.integers(-1, 2), 1, 5))) for s, x in
         zip(B, a, strict=True)]  # fmt: skip
    wanted = {("all", SHARE), ("race_culture", MEAN), ("gender", "S3 SBAS share>=4 (%)")}
    rows = paired_table(paired_cells(a, b), wanted, margin=5.0)
    full = {(r.factor, r.metric): r for r in paired_rows(a, b, margin=5.0)}
    assert set(rows) == wanted and wanted <= set(full)
    for key, row in rows.items():
        assert row == full[key]


def test_a_paired_table_no_gate_reads_the_flag_of_is_not_corrected() -> None:
    # Without a not_flagged gate nothing reads Holm's correction, so the cells nobody reads
    # are not tested: the wanted rows are paired_rows' own but for p_adjusted (None, not
    # corrected) and flagged (False); every number a gate checks is the same.
    rng = np.random.default_rng(5)
    a = [replace(s, score=float(rng.integers(1, 6))) for s in A]
    b = [replace(s, score=float(np.clip(x.score + rng.integers(-2, 2), 1, 5))) for s, x in
         zip(B, a, strict=True)]  # fmt: skip
    wanted = {("all", SHARE), ("race_culture", MEAN)}
    rows = paired_table(paired_cells(a, b), wanted, margin=5.0, flags_read=False)
    full = {(r.factor, r.metric): r for r in paired_rows(a, b, margin=5.0)}
    assert set(rows) == wanted
    for key, row in rows.items():
        assert row.p_adjusted is None and row.flagged is False
        assert row == replace(full[key], p_adjusted=None, flagged=False)
        assert full[key].p_adjusted is not None  # the full table did correct it
