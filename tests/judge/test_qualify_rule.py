"""The qualification rule (judge.qualify_rule) on evidence written by hand: each criterion
passes on figures that clear its bound and fails on figures that do not, a criterion the
config turns off is not applied, and the line names what failed before what passed."""

from __future__ import annotations

import math

from judge.config_qualify import QualifyConfig
from judge.qualify_rule import Evidence, decide
from judge.stats.coefficient import Coefficient


def c(value: float, low: float, high: float, n: int = 100) -> Coefficient:
    return Coefficient(value, low, high, None, n)


GOOD = Evidence(
    rubric="ICS", n_ratings=100, epsilon=0.15,
    kappa=c(0.7, 0.6, 0.8), alpha=c(0.7, 0.6, 0.8),
    exact=c(0.8, 0.72, 0.88), majority=c(0.4, 0.3, 0.5),
    alt_test_passed=True, alt_test_omega=1.0,
)  # fmt: skip


def test_every_criterion_passes_on_good_figures() -> None:
    outcome = decide(GOOD, QualifyConfig())
    assert outcome.qualified and outcome.outcome == "qualified"
    assert [k.name for k in outcome.criteria] == ["kappa", "alpha", "beat_majority", "alt_test"]
    assert outcome.line.startswith("qualified for ICS at epsilon 0.15 on 100 ratings: ")


def test_constant_judge_fails_kappa_and_the_majority_baseline() -> None:
    # A judge answering the majority class on a 90 %-pass rubric: exact agreement 0.90 equals
    # the baseline 0.90, kappa 0 in every resample (its interval is [0, 0]).
    constant = Evidence(
        rubric="ICS", n_ratings=100, epsilon=0.15,
        kappa=c(0.0, 0.0, 0.0), alpha=c(-0.05, -0.08, -0.02),
        exact=c(0.9, 0.84, 0.96), majority=c(0.9, 0.84, 0.96),
        alt_test_passed=False, alt_test_omega=0.0,
    )  # fmt: skip
    outcome = decide(constant, QualifyConfig())
    assert not outcome.qualified
    assert {k.name for k in outcome.failed} == {"kappa", "alpha", "beat_majority", "alt_test"}
    assert outcome.line.startswith("not qualified for ICS")
    assert "no better than always answering the majority class (0.90)" in outcome.line


def test_an_interval_reaching_the_bound_fails_and_a_turned_off_criterion_is_skipped() -> None:
    # kappa 0.30 with a lower end of -0.05: the data cannot tell it from 0.
    shaky = Evidence(**{**GOOD.__dict__, "kappa": c(0.30, -0.05, 0.62)})
    outcome = decide(shaky, QualifyConfig())
    assert [k.name for k in outcome.failed] == ["kappa"]
    assert "failed: weighted kappa 0.30 [-0.05, 0.62]" in outcome.line
    assert "; passed: alpha" in outcome.line  # what passed comes after what failed
    relaxed = decide(shaky, QualifyConfig(kappa_lower_bound=None))
    assert relaxed.qualified and "kappa" not in [k.name for k in relaxed.criteria]


def test_refused_alt_test_and_undefined_figures_fail_with_the_reason() -> None:
    refused = Evidence(
        **{**GOOD.__dict__, "alt_test_passed": None, "alt_test_omega": None,
           "alt_test_refused": "needs at least 3 annotators, got 2",
           "alpha": Coefficient(math.nan, math.nan, math.nan, None, 100, "constant scores")}
    )  # fmt: skip
    outcome = decide(refused, QualifyConfig())
    assert {k.name for k in outcome.failed} == {"alpha", "alt_test"}
    assert "alt-test refused (needs at least 3 annotators, got 2)" in outcome.line
    assert "alpha is undefined (constant scores)" in outcome.line
    assert decide(refused, QualifyConfig(require_alt_test=False, alpha_lower_bound=None)).qualified
