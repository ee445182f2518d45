"""The vectorised resample statistics must equal scipy/scikit-learn on the same resamples,
expanded back into plain arrays (the independent computation)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from judge.stats import bootstrap
from judge.stats.bootstrap import (
    PairTable,
    bootstrap_pairs,
    category_index,
    resample_counts,
    weighted_kappa,
    weighted_kendall_b,
    weighted_pearson,
    weighted_spearman,
)

LABELS = np.arange(1, 6)


def data(seed: int, n: int = 300) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    judge = rng.integers(1, 6, n).astype(float)
    # human = mean of three raters near the judge: values in thirds, many ties
    raters = np.clip(judge[:, None] + rng.integers(-2, 3, (n, 3)), 1, 5)
    return judge, raters.mean(axis=1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vectorised_statistics_equal_the_libraries(seed: int) -> None:
    x, y = data(seed)
    cy = np.floor(y + 0.5)
    table = PairTable.from_pairs(x, y, x, cy)
    w = resample_counts(table.counts, 5, np.random.default_rng(seed))
    pearson = weighted_pearson(w, table.x, table.y)
    spearman = weighted_spearman(w, table.x, table.y)
    kendall = weighted_kendall_b(w, table.x, table.y)
    ix = category_index(table.cx, LABELS)
    iy = category_index(table.cy, LABELS)
    for b in range(w.shape[0]):
        reps = w[b].astype(int)
        xs, ys = np.repeat(table.x, reps), np.repeat(table.y, reps)
        cxs, cys = np.repeat(table.cx, reps), np.repeat(table.cy, reps)
        assert pearson[b] == pytest.approx(stats.pearsonr(xs, ys).statistic, abs=1e-12)
        assert spearman[b] == pytest.approx(stats.spearmanr(xs, ys).statistic, abs=1e-12)
        assert kendall[b] == pytest.approx(stats.kendalltau(xs, ys).statistic, abs=1e-12)
        for weights in (None, "linear", "quadratic"):
            ours = weighted_kappa(w[b : b + 1], ix, iy, 5, weights)[0]
            theirs = cohen_kappa_score(cxs, cys, labels=LABELS, weights=weights)
            assert ours == pytest.approx(theirs, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 3])
def test_pair_table_equals_numpy_unique_rows(seed: int) -> None:
    # The cells and counts are numpy's own np.unique(axis=0) of the stacked rows, in its
    # order, with few distinct values per column (a rating scale) or many.
    x, y = data(seed, n=500)
    cy = np.floor(y + 0.5)
    cells, counts = np.unique(np.column_stack([x, y, x, cy]), axis=0, return_counts=True)
    table = PairTable.from_pairs(x, y, x, cy)
    found = np.column_stack([table.x, table.y, table.cx, table.cy])
    assert np.array_equal(found, cells) and np.array_equal(table.counts, counts)
    noisy = y + np.random.default_rng(seed).random(500)  # 500 distinct values per column
    cells, counts = np.unique(np.column_stack([noisy, noisy, x, x]), axis=0, return_counts=True)
    table = PairTable.from_pairs(noisy, noisy, x, x)
    found = np.column_stack([table.x, table.y, table.cx, table.cy])
    assert np.array_equal(found, cells) and np.array_equal(table.counts, counts)


def _ac_by_hand(a: np.ndarray, b: np.ndarray, q: int, power: int | None) -> float:
    """Gwet's AC1/AC2 written out from its definition (Gwet 2014, two raters), one item at a
    time: an independent spelling of judge.stats.gwet's arithmetic."""
    n = len(a)

    def weight(k: int, m: int) -> float:
        return float(k == m) if power is None else 1 - abs(k - m) ** power / (q - 1) ** power

    pa = sum(weight(int(i), int(j)) for i, j in zip(a, b, strict=True)) / n
    pi = [(np.sum(a == k) + np.sum(b == k)) / (2 * n) for k in range(q)]
    total = sum(weight(k, m) for k in range(q) for m in range(q))
    pe = total / (q * (q - 1)) * sum(p * (1 - p) for p in pi)
    return (pa - pe) / (1 - pe)


@pytest.mark.parametrize("seed", [0, 1])
def test_vectorised_ac_and_baseline_equal_a_hand_loop(seed: int) -> None:
    x, y = data(seed)
    cy = np.floor(y + 0.5)
    table = PairTable.from_pairs(x, y, x, cy)
    statistics = bootstrap.pair_statistics(table, LABELS)
    w = resample_counts(table.counts, 4, np.random.default_rng(seed))
    found = {
        name: statistics[name][0](w)
        for name in bootstrap.chance_statistics(
            category_index(table.cx, LABELS), category_index(table.cy, LABELS), LABELS
        )
    }
    for b in range(w.shape[0]):
        reps = w[b].astype(int)
        a = category_index(np.repeat(table.cx, reps), LABELS)
        h = category_index(np.repeat(table.cy, reps), LABELS)
        for name, power in (("ac1", None), ("ac2_linear", 1), ("ac2_quadratic", 2)):
            assert found[name][b] == pytest.approx(_ac_by_hand(a, h, 5, power), abs=1e-12)
        top = np.bincount(h, minlength=5).argmax()  # the humans' most frequent category
        assert found["majority_baseline"][b] == pytest.approx(np.mean(h == top), abs=1e-12)
        constant = np.full_like(h, top)
        expected = _ac_by_hand(constant, h, 5, None)
        assert found["majority_baseline_ac1"][b] == pytest.approx(expected, abs=1e-12)


def test_counts_resampling_matches_index_resampling_in_distribution() -> None:
    # A multinomial draw over distinct pairs is the same distribution as drawing items:
    # the mean resampled Pearson r over many draws agrees with the index bootstrap.
    x, y = data(5, n=200)
    table = PairTable.from_pairs(x, y, x, y)
    rng = np.random.default_rng(0)
    by_counts = weighted_pearson(resample_counts(table.counts, 4000, rng), table.x, table.y)
    by_index = [
        stats.pearsonr(x[i], y[i]).statistic
        for i in (rng.integers(0, x.size, x.size) for _ in range(4000))
    ]
    assert np.mean(by_counts) == pytest.approx(np.mean(by_index), abs=0.005)
    assert np.std(by_counts) == pytest.approx(np.std(by_index), rel=0.08)


def test_index_path_skips_undefined_resamples_without_warnings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Force the fallback that calls scipy / scikit-learn on resampled arrays. With 4 items,
    # 4/256 resamples repeat one item, so their correlations and kappas are 0/0: they must
    # be NaN (skipped by the percentile interval) without asking the library, which warns.
    monkeypatch.setattr(bootstrap, "MAX_CELLS", 0)
    x = np.array([1.0, 2.0, 3.0, 4.0])
    y = np.array([1.0, 3.0, 2.0, 4.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cis = bootstrap_pairs(
            x, y, x, y, LABELS.astype(float), n_resamples=400, seed=0, confidence=0.95
        )
    low, high = cis["pearson"]
    # Every defined resample of these pairs has r between -1 and 1 and the full-sample r is
    # 0.8 (scipy), so the interval is a proper sub-interval of [-1, 1] around it.
    assert -1 <= low < stats.pearsonr(x, y).statistic < high <= 1
