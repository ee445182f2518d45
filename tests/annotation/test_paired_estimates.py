"""The prediction-powered paired difference B - A (annotation/paired_estimates.py), checked
against the PPI formulas written out here with numpy and scipy (ppi_py is not installed), a
planted bias the correction must remove, and a store of two runs with ratings.

The formulas (Angelopoulos et al., Science 2023, the mean; applied to the pair differences):
with d = J_B - J_A the judges' difference of a pair, h = H_B - H_A the people's, n rated pairs
and N unrated ones, for a fixed weight lam::

    estimate = lam * mean(d_unrated) + mean(h_rated - lam * d_rated)
    variance = var(h_rated - lam * d_rated) / n + lam**2 * var(d_unrated) / N

variances dividing by the count (ppi_py's numpy.std default); the interval estimate +- z *
sqrt(variance) from 30 rated pairs on.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sqlalchemy.engine import Engine
from sqlmodel import Session

from annotation.estimate_results import Design
from annotation.paired_estimates import design_refusal, paired_cell_estimates, paired_estimates
from judge.metrics import item_scores
from tests.support.planted_pairs import plant_pairs


def _cell(rng: np.random.Generator, n_pairs: int, n_rated: int, bias: float) -> tuple[dict, ...]:
    """People's values of A's and B's answers (B truly 5 points lower on average), the judges'
    values (the same plus noise, and B's ``bias`` points too high), and which pairs were rated
    (a simple random sample)."""
    h_a = rng.normal(60, 15, n_pairs)
    h_b = h_a - 5 + rng.normal(0, 10, n_pairs)
    j_a = h_a + rng.normal(0, 5, n_pairs)
    j_b = h_b + bias + rng.normal(0, 5, n_pairs)
    rated = set(rng.choice(n_pairs, n_rated, replace=False).tolist())
    return (
        dict(enumerate(j_a)),
        dict(enumerate(j_b)),
        {i: h_a[i] for i in rated},
        {i: h_b[i] for i in rated},
    )


def test_lam_one_is_the_ppi_formula_on_the_differences() -> None:
    judge_a, judge_b, human_a, human_b = _cell(np.random.default_rng(1), 300, 60, bias=0.0)
    rated = sorted(human_a)
    d = np.array([judge_b[i] - judge_a[i] for i in range(300)])
    h = np.array([human_b[i] - human_a[i] for i in rated])
    unrated = np.array([d[i] for i in range(300) if i not in human_a])
    rectifier = h - d[rated]
    expected = unrated.mean() + rectifier.mean()  # the formula above at lam = 1
    se = np.sqrt(rectifier.var() / 60 + unrated.var() / 240)
    z = stats.norm.ppf(0.975)
    n, n_rated, judge, human, ppi = paired_cell_estimates(
        judge_a, judge_b, human_a, human_b, lam=1.0
    )
    assert (n, n_rated) == (300, 60)
    assert ppi.value == pytest.approx(expected, abs=1e-9)
    assert ppi.ci_low == pytest.approx(expected - z * se, abs=1e-9)
    assert ppi.ci_high == pytest.approx(expected + z * se, abs=1e-9)
    assert ppi.n == 60 and ppi.N == 300 and ppi.lam == 1.0
    # Human-only: the rated pairs' mean difference, var / n (ddof 0, as ppi_py's numpy.std)
    assert human.value == pytest.approx(h.mean(), abs=1e-9)
    assert human.ci_high == pytest.approx(h.mean() + z * np.sqrt(h.var() / 60), abs=1e-9)
    # Judge-only: every pair's mean difference, whatever people say
    assert judge.value == pytest.approx(d.mean(), abs=1e-9)
    assert judge.n == 0 and judge.N == 300


def test_tuned_lam_is_ppi_py_s_formula_and_no_wider_than_human_only() -> None:
    judge_a, judge_b, human_a, human_b = _cell(np.random.default_rng(2), 300, 60, bias=3.0)
    rated = sorted(human_a)
    d = np.array([judge_b[i] - judge_a[i] for i in range(300)])
    h = np.array([human_b[i] - human_a[i] for i in rated])
    du = np.array([d[i] for i in range(300) if i not in human_a])
    n, big_n = 60, 240
    # ppi_py 0.2.3 _calc_lam_glm for a mean, written out (see judge/stats/ppi.py's docstring)
    theta0 = du.mean() + (h - d[rated]).mean()
    g, gh, gu = h - theta0, d[rated] - theta0, du - theta0
    cov = np.sum((g - g.mean()) * (gh - gh.mean())) / n
    lam = float(np.clip(cov / ((1 + n / big_n) * np.var(np.concatenate([gh, gu]), ddof=1)), 0, 1))
    expected = lam * du.mean() + (h - lam * d[rated]).mean()
    *_, human, ppi = paired_cell_estimates(judge_a, judge_b, human_a, human_b)
    assert ppi.lam == pytest.approx(lam, abs=1e-12)
    assert ppi.value == pytest.approx(expected, abs=1e-9)
    assert ppi.ci_high - ppi.ci_low < human.ci_high - human.ci_low  # the judges help


def test_a_planted_bias_of_the_judges_is_corrected() -> None:
    """Judges that put B 0.5 points (10 percentage points on a 1-5 scale) higher than people
    do: the judge-only difference misses the true -5 nearly always, the prediction-powered
    one covers it about as often as its 95 % says (200 seeded repetitions)."""
    truth, reps = -5.0, 200
    covered = judge_covered = 0
    for seed in range(reps):
        cell = _cell(np.random.default_rng(100 + seed), 400, 60, bias=10.0)
        *_, judge, _human, ppi = paired_cell_estimates(*cell)
        assert ppi.ci_low is not None and ppi.ci_high is not None
        assert judge.ci_low is not None and judge.ci_high is not None
        covered += ppi.ci_low <= truth <= ppi.ci_high
        judge_covered += judge.ci_low <= truth <= judge.ci_high
    # 95 % nominal; a binomial(200, 0.95) falls under 180 with probability < 0.1 %
    assert covered >= 180, covered
    assert judge_covered <= 10, judge_covered


def test_too_few_rated_pairs_are_refused_with_the_reason() -> None:
    judge = {0: 50.0, 1: 60.0, 2: 70.0}
    *_, judge_only, human, ppi = paired_cell_estimates(judge, judge, {0: 40.0}, {0: 45.0})
    assert judge_only.value == 0.0  # B equals A for the judges
    assert human.value is None and ppi.value is None
    assert ppi.reason == "only 1 pair(s) rated on both sides (2 needed)"


def test_two_runs_in_the_store_with_ratings_on_both(engine: Engine) -> None:
    """Two models' answers to 40 items (ICS), judged; people rated 30 items of each (one
    rater, imported; tests/support/planted_pairs.py). The judges see B one point above A on
    every item; people see B at A's level. The S1 ICS mean (percent of 5) then differs by
    +20 points for the judges (1 / 5 x 100), 0 for people, and the correction gives
    people's 0."""
    truth = np.random.default_rng(7).integers(1, 4, 40).astype(float).tolist()
    runs = plant_pairs(engine, truth, [*truth[:30], *[float("nan")] * 10])
    ids = (runs.a, runs.b)
    with Session(engine) as session:
        scores = (item_scores(session, runs.a, "mean"), item_scores(session, runs.b, "mean"))
        refused = paired_estimates(session, ids, scores)
        assert refused is not None and not refused.usable and "assume-random" in refused.reason
        got = paired_estimates(session, ids, scores, assume_random=True)
        # Run "other" judged items nobody rated: no corrected figures at all (None).
        none_rated = paired_estimates(session, (runs.other, runs.other), (scores[0], scores[0]))
    assert none_rated is None  # neither side's answers were rated: no corrected figures
    assert got is not None and got.usable, got
    (row,) = [r for r in got.rows if r.factor == "all" and r.metric == "S1 ICS mean (% of max)"]
    assert row.judge_only.value == pytest.approx(20.0)
    assert row.human_only.value == pytest.approx(0.0)
    # The judges' difference is the same on every pair: it tells nothing about people's
    # (tuned lam 0), so the prediction-powered figure is the rated pairs' 0.
    assert row.prediction_powered.value == pytest.approx(0.0)
    assert row.prediction_powered.lam == 0.0
    assert (row.n_pairs, row.n_rated) == (40, 30)


def test_a_weighted_design_is_refused_a_random_one_is_not() -> None:
    """A pair has no inclusion probability of its own when one run's ratings were drawn with
    unequal ones; two random campaigns leave a random sample of pairs."""
    random = Design("random", True, "campaign a: a simple random sample", campaign="a")
    weighted = Design("stratified", True, "campaign b", campaign="b", weights={1: 4.0})
    refused = Design("refused", False, "no design", "no design to weight the ratings by")
    assert design_refusal(random, random) == ""
    assert "unequal probabilities (stratified)" in design_refusal(random, weighted)
    assert design_refusal(refused, random) == "run A: no design to weight the ratings by"


def test_the_corrected_difference_equals_ppi_py_called_as_its_docs_show() -> None:
    # ppi_py itself, called as its README shows for a mean: Y = people's values on the labelled
    # (rated) units, Yhat = the predictions on those, Yhat_unlabeled = the predictions on the
    # rest; here the unit is a pair and each value a B - A difference. Its interval is a
    # normal one, like ours at 60 rated pairs; lam tuned by ppi_py itself (lam=None).
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

    judge_a, judge_b, human_a, human_b = _cell(np.random.default_rng(4), 400, 80, bias=4.0)
    rated = sorted(human_a)
    y = np.array([human_b[i] - human_a[i] for i in rated])
    yhat = np.array([judge_b[i] - judge_a[i] for i in rated])
    unrated = np.array([judge_b[i] - judge_a[i] for i in range(400) if i not in human_a])
    point = float(np.asarray(ppi_mean_pointestimate(y, yhat, unrated)).ravel()[0])
    low, high = (float(np.asarray(v).ravel()[0]) for v in ppi_mean_ci(y, yhat, unrated, alpha=0.05))
    *_, ppi = paired_cell_estimates(judge_a, judge_b, human_a, human_b)
    assert ppi.value == pytest.approx(point, abs=1e-6)
    assert ppi.ci_low == pytest.approx(low, abs=1e-6)
    assert ppi.ci_high == pytest.approx(high, abs=1e-6)
