"""Fleiss' kappa against two published examples, statsmodels, and a hand computation for
missing ratings."""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from judge.stats.coefficient import BootstrapOptions
from judge.stats.fleiss import category_counts, fleiss_kappa, kappa_from_counts
from judge.stats.matrix import RatingMatrix

# The worked example of the Wikipedia article "Fleiss' kappa" (also statsmodels' test table):
# 10 subjects, 14 raters each, 5 categories; counts of raters per category. Published:
# P-bar 0.378, P-bar_e 0.213, kappa 0.210.
WIKIPEDIA = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]

# Fleiss (1971), "Measuring nominal scale agreement among many raters", Psychological
# Bulletin 76(5): 30 patients, each diagnosed by 6 psychiatrists into 1 depression,
# 2 personality disorder, 3 schizophrenia, 4 neurosis, 5 other. Rows as distributed in R's
# irr package (dataset `diagnoses`); published kappa 0.430 (irr's kappam.fleiss: 0.4302445).
DIAGNOSES = [
    [4, 4, 4, 4, 4, 4],
    [2, 2, 2, 5, 5, 5],
    [2, 3, 3, 3, 3, 5],
    [5, 5, 5, 5, 5, 5],
    [2, 2, 2, 4, 4, 4],
    [1, 1, 3, 3, 3, 3],
    [3, 3, 3, 3, 5, 5],
    [1, 1, 3, 3, 3, 4],
    [1, 1, 4, 4, 4, 4],
    [5, 5, 5, 5, 5, 5],
    [1, 4, 4, 4, 4, 4],
    [1, 2, 4, 4, 4, 4],
    [2, 2, 2, 3, 3, 3],
    [1, 4, 4, 4, 4, 4],
    [2, 2, 4, 4, 4, 5],
    [3, 3, 3, 3, 3, 5],
    [1, 1, 1, 4, 5, 5],
    [1, 1, 1, 1, 1, 2],
    [2, 2, 4, 4, 4, 4],
    [1, 3, 3, 5, 5, 5],
    [5, 5, 5, 5, 5, 5],
    [2, 4, 4, 4, 4, 4],
    [2, 2, 4, 5, 5, 5],
    [1, 1, 4, 4, 4, 4],
    [1, 4, 4, 4, 4, 5],
    [2, 2, 2, 2, 2, 4],
    [1, 1, 1, 1, 5, 5],
    [2, 2, 4, 4, 4, 4],
    [1, 3, 3, 3, 3, 3],
    [5, 5, 5, 5, 5, 5],
]


def matrix_from_counts(table: list[list[int]]) -> RatingMatrix:
    """Raters r0, r1, ... give item i its counts in category order (1-5); Fleiss' kappa does
    not depend on which rater gave which rating."""
    items, raters, scores = [], [], []
    for item, row in enumerate(table, start=1):
        ratings = [category for category, count in enumerate(row, start=1) for _ in range(count)]
        for r, score in enumerate(ratings):
            items.append(item)
            raters.append(f"r{r}")
            scores.append(score)
    return RatingMatrix.from_long(items, raters, scores)


def matrix_from_rows(rows: list[list[int]]) -> RatingMatrix:
    long = [(i, f"p{r}", s) for i, row in enumerate(rows, start=1) for r, s in enumerate(row)]
    items, raters, scores = zip(*long, strict=True)
    return RatingMatrix.from_long(items, raters, scores)


def test_wikipedia_worked_example() -> None:
    assert round(kappa_from_counts(WIKIPEDIA), 3) == 0.210
    found = fleiss_kappa(matrix_from_counts(WIKIPEDIA), options=BootstrapOptions(n_bootstrap=200))
    assert round(found.value, 3) == 0.210 and found.n == 10
    # Second library: statsmodels on the same table.
    assert found.value == pytest.approx(sm_fleiss_kappa(np.array(WIKIPEDIA)), abs=1e-12)
    assert found.ci_low <= found.value <= found.ci_high


def test_fleiss_1971_psychiatric_diagnoses() -> None:
    matrix = matrix_from_rows(DIAGNOSES)
    counts = category_counts(matrix)
    # Transcription check: diagnoses per category over the 180 ratings (irr / statsmodels).
    assert counts.sum(axis=0).tolist() == [26, 26, 30, 55, 43]
    found = fleiss_kappa(matrix, options=BootstrapOptions(n_bootstrap=0))
    assert round(found.value, 3) == 0.430
    assert found.value == pytest.approx(0.4302445, abs=1e-7)  # irr::kappam.fleiss
    table, _ = aggregate_raters(np.array(DIAGNOSES))
    assert found.value == pytest.approx(sm_fleiss_kappa(table), abs=1e-12)
    assert math.isnan(found.ci_low) and found.p_value is None  # no bootstrap asked


def test_missing_ratings_by_hand() -> None:
    # Item 1: A 1, B 1, C 2; item 2: A 2, B 2; item 3: only A (no pair, left out).
    # P_1 = (2*1 + 1*0) / (3*2) = 1/3, P_2 = 2*1 / (2*1) = 1, P_o = 2/3.
    # Shares: item 1 (2/3, 1/3), item 2 (0, 1) -> p = (1/3, 2/3), P_e = 1/9 + 4/9 = 5/9.
    # kappa = (2/3 - 5/9) / (1 - 5/9) = 1/4.
    matrix = RatingMatrix.from_long(
        [1, 1, 1, 2, 2, 3], ["A", "B", "C", "A", "B", "A"], [1, 1, 2, 2, 2, 3]
    )
    found = fleiss_kappa(matrix, options=BootstrapOptions(n_bootstrap=0))
    assert found.value == pytest.approx(0.25, abs=1e-12) and found.n == 2


def test_means_go_to_the_nearest_level_and_other_scales() -> None:
    # A rating of 2.5 counts as 3 (halves up, as Cohen's kappa does); on 0-3 the levels are
    # 0..3, so a 0 is a category of its own.
    matrix = RatingMatrix.from_long([1, 1, 2, 2], ["A", "B", "A", "B"], [2.5, 3, 0, 1])
    assert category_counts(matrix, labels=range(4)).tolist() == [[0, 0, 0, 2], [1, 1, 0, 0]]
    # Item 1 agrees (P=1), item 2 does not (P=0): P_o = 1/2. Shares: item 1 (0, 0, 0, 1),
    # item 2 (1/2, 1/2, 0, 0) -> p = (1/4, 1/4, 0, 1/2), P_e = 1/16 + 1/16 + 1/4 = 3/8;
    # kappa = (1/2 - 3/8) / (1 - 3/8) = 0.2.
    found = fleiss_kappa(matrix, options=BootstrapOptions(n_bootstrap=0), labels=range(4))
    assert found.value == pytest.approx(0.2, abs=1e-12)


def test_undefined_cases_say_why() -> None:
    constant = RatingMatrix.from_long([1, 1, 2, 2], ["A", "B", "A", "B"], [4, 4, 4, 4])
    found = fleiss_kappa(constant, options=BootstrapOptions(n_bootstrap=20))
    assert math.isnan(found.value) and found.n == 2
    assert found.undefined_reason == "constant ratings: every rating is 4"
    single = RatingMatrix.from_long([1, 2], ["A", "B"], [3, 4])
    found = fleiss_kappa(single)
    assert math.isnan(found.value) and found.n == 0
    assert found.undefined_reason == "no item has ratings from two or more raters"
    assert math.isnan(kappa_from_counts([[1, 0], [0, 1]]))
    with pytest.raises(ValueError, match="table must be a 2-D array of counts"):
        kappa_from_counts([1, 2, 3])


def test_bootstrap_ci_matches_statsmodels_on_the_same_resamples() -> None:
    # The same draws (one chunk of multinomial item counts from the seeded generator), each
    # resample expanded into its items and handed to statsmodels; percentiles by numpy.
    options = BootstrapOptions(n_bootstrap=200, seed=7)
    found = fleiss_kappa(matrix_from_counts(WIKIPEDIA), options=options)
    rng = np.random.default_rng(7)
    draws = rng.multinomial(10, np.full(10, 0.1), size=200)
    table = np.array(WIKIPEDIA)
    values = [sm_fleiss_kappa(table[np.repeat(np.arange(10), d)]) for d in draws]
    low, high = np.percentile(values, [2.5, 97.5])
    assert (found.ci_low, found.ci_high) == (pytest.approx(low), pytest.approx(high))


def test_chance_raters_score_near_zero_and_identical_raters_one() -> None:
    # Planted: four raters who pick 1-5 at random, independently, on 300 items have no
    # agreement beyond chance (true kappa 0); four copies of one rater agree perfectly (1).
    rng = np.random.default_rng(3)
    options = BootstrapOptions(n_bootstrap=300, seed=0)
    chance = rng.integers(1, 6, size=(300, 4)).tolist()
    found = fleiss_kappa(matrix_from_rows(chance), options=options)
    assert abs(found.value) < 0.05 and found.ci_low <= 0 <= found.ci_high
    same = [[v] * 4 for v in rng.integers(1, 6, 300).tolist()]
    found = fleiss_kappa(matrix_from_rows(same), options=options)
    assert found.value == pytest.approx(1.0) and found.ci_low == pytest.approx(1.0)
