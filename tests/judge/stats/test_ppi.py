"""Prediction-powered means (judge/stats/ppi.py).

Expected values come from three independent places: the authors' library ``ppi_py`` (the
reference tests, to 1e-9), hand arithmetic (each test says how), and seeded simulations whose
truth is known by construction (coverage of the 95 % intervals over 1,000 data sets: the
binomial standard error of a coverage of 0.95 is 0.007, so [0.93, 0.97] is about +-3 of them).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from scipy.stats import norm, t

from judge.stats.ppi import (
    SMALL_N,
    Group,
    classical_mean,
    judge_only_mean,
    ppi_gap,
    ppi_mean,
)
from judge.stats.ppi_plan import plan_human_ratings

Z95 = float(norm.ppf(0.975))
REPS = 1000


# ---------------------------------------------------------------- the reference library


def fixed_arrays() -> dict[str, np.ndarray]:
    """A biased, noisy judge on a 1-5 scale; weights like 1 / inclusion probability."""
    rng = np.random.default_rng(20250101)
    n, big_n = 160, 1500
    quality = rng.normal(3.0, 1.0, n + big_n)
    human = np.clip(np.rint(quality + rng.normal(0, 0.6, quality.size)), 1, 5)
    judge = np.clip(np.rint(0.7 * quality + 1.3 + rng.normal(0, 0.7, quality.size)), 1, 5)
    return {
        "y": human[:n],
        "yhat": judge[:n],
        "yhat_u": judge[n:],
        "w": rng.choice([1.0, 2.5, 6.0], n),
        "w_u": rng.uniform(0.5, 2.0, big_n),
    }


DATA = fixed_arrays()
WEIGHTINGS = {
    "unweighted": (None, None),
    "rated weighted": ("w", None),
    "both weighted": ("w", "w_u"),
}


@pytest.mark.parametrize("lam", [None, 0.0, 1.0, 0.4])
@pytest.mark.parametrize("weighting", WEIGHTINGS)
def test_equals_ppi_py(ppi_py: Any, lam: float | None, weighting: str) -> None:
    # Expected: ppi_py's own point estimate and interval on the same arrays, alpha given
    # explicitly (its default is 0.1, a 90 % interval).
    w_key, wu_key = WEIGHTINGS[weighting]
    w = None if w_key is None else DATA[w_key]
    w_u = None if wu_key is None else DATA[wu_key]
    args = (DATA["y"], DATA["yhat"], DATA["yhat_u"])
    expected = float(
        np.squeeze(ppi_py.ppi_mean_pointestimate(*args, lam=lam, w=w, w_unlabeled=w_u))
    )
    low, high = (
        float(np.squeeze(b))
        for b in ppi_py.ppi_mean_ci(*args, alpha=0.05, lam=lam, w=w, w_unlabeled=w_u)
    )
    got = ppi_mean(*args, weights=w, weights_unlabelled=w_u, lam=lam, variance="ppi_py")
    assert got.estimate == pytest.approx(expected, abs=1e-9)
    assert got.ci_low == pytest.approx(low, abs=1e-9)
    assert got.ci_high == pytest.approx(high, abs=1e-9)
    if weighting == "unweighted":  # the default variance is the same number without weights
        default = ppi_mean(*args, lam=lam)
        assert (default.estimate, default.ci_low, default.ci_high) == pytest.approx(
            (expected, low, high), abs=1e-9
        )


@pytest.mark.parametrize("weighted", [False, True])
def test_classical_equals_ppi_py(ppi_py: Any, weighted: bool) -> None:
    # Expected: ppi_py.baselines.classical_mean_ci at alpha 0.05.
    from ppi_py.baselines import classical_mean_ci

    w = DATA["w"] if weighted else None
    low, high = classical_mean_ci(DATA["y"], w=w, alpha=0.05)
    got = classical_mean(DATA["y"], weights=w, variance="ppi_py")
    assert (got.ci_low, got.ci_high) == pytest.approx((low, high), abs=1e-9)
    assert got.lam == 0 and got.effective_n == got.n and got.ratings_saved == 0


def test_tuned_lambda_is_clipped_like_ppi_py(ppi_py: Any) -> None:
    # A judge that moves against the humans: the unclipped optimum is negative, ppi_py clips it
    # to 0 and so must we, giving the human-only interval (ppi_py's classical_mean_ci).
    from ppi_py.baselines import classical_mean_ci

    y = DATA["y"]
    against = 6 - DATA["yhat"]
    got = ppi_mean(y, against, 6 - DATA["yhat_u"])
    assert got.lam == 0.0
    low, high = classical_mean_ci(y, alpha=0.05)
    assert (got.ci_low, got.ci_high) == pytest.approx((low, high), abs=1e-12)
    # A judge that is the humans' score halved, with N = 5 n: the optimum cov / ((1 + n / N)
    # var(judge)) is about 0.5 / (1.2 * 0.25) = 1.67, clipped to 1.
    assert ppi_mean(y, y / 2, np.tile(y, 5) / 2).lam == 1.0


# ---------------------------------------------------------------- hand-derived values


def test_a_perfect_judge_counts_its_scores_as_ratings() -> None:
    # y = yhat exactly, lam = 1: the rectifier is 0, the variance var(yhat_u) / N; the
    # human-only variance is var(y) / n. Same spread (the values 1-4, variance 1.25), so
    # effective n = n * (1.25 / 4) / (1.25 / 20) = N = 20, and 16 ratings saved.
    y = np.array([1.0, 2, 3, 4])
    got = ppi_mean(y, y, np.tile(y, 5), lam=1)
    assert got.estimate == 2.5
    assert got.se == pytest.approx(math.sqrt(1.25 / 20))
    assert got.effective_n == pytest.approx(20)
    assert got.ratings_saved == pytest.approx(16)
    assert got.small_sample and got.n == 4 and got.N == 20


def test_bias_is_removed_by_the_rated_items() -> None:
    # The judge adds 1 to every score; with lam = 1 the estimate is the judge's unrated mean
    # (4.5) less the bias measured on the rated items (1): 3.5. The judge alone says 4.5.
    rated = [1.0, 2, 4, 5]
    got = ppi_mean(rated, [r + 1 for r in rated], [3.0, 4, 5, 6], lam=1)
    assert got.estimate == 3.5
    alone = judge_only_mean([3.0, 4, 5, 6])
    assert alone.estimate == 4.5 and alone.n == 0 and math.isnan(alone.effective_n)
    # var([3, 4, 5, 6]) = 1.25 (dividing by 4), so se = sqrt(1.25 / 4)
    assert alone.se == pytest.approx(math.sqrt(1.25 / 4))


def test_stratified_variance_is_cochrans() -> None:
    # Stratified human-only mean, weights N_h / n_h: the estimate is sum_h (N_h / N) ybar_h and
    # its variance sum_h (N_h / N)**2 s_h**2 / n_h with s_h**2 dividing by n_h - 1 (Cochran,
    # Sampling Techniques, 5.3), computed here by hand.
    y = np.array([1.0, 2, 3, 4, 4, 5, 2, 3])
    strata = ["a", "a", "a", "b", "b", "b", "c", "c"]
    sizes = {"a": 600, "b": 300, "c": 100}
    counts = {"a": 3, "b": 3, "c": 2}
    w = [sizes[s] / counts[s] for s in strata]
    # a: mean 2, s2 1; b: mean 13/3, s2 1/3; c: mean 2.5, s2 0.5
    expected = 0.6 * 2 + 0.3 * 13 / 3 + 0.1 * 2.5
    var = 0.36 * 1 / 3 + 0.09 * (1 / 3) / 3 + 0.01 * 0.5 / 2
    got = classical_mean(y, weights=w, strata=strata)
    assert got.estimate == pytest.approx(expected)
    assert got.se == pytest.approx(math.sqrt(var))
    assert got.variance == "design, stratified"


def test_design_variance_ignores_where_the_scale_starts() -> None:
    # Adding 10 to every score moves the estimate by 10 and leaves the design interval's width
    # alone; ppi_py's weighted variance (that of an unnormalised mean) grows with it.
    y, yhat, yhat_u, w = DATA["y"], DATA["yhat"], DATA["yhat_u"], DATA["w"]
    base = ppi_mean(y, yhat, yhat_u, weights=w, lam=0.5)
    moved = ppi_mean(y + 10, yhat + 10, yhat_u + 10, weights=w, lam=0.5)
    assert moved.estimate == pytest.approx(base.estimate + 10)
    assert moved.se == pytest.approx(base.se)
    old = ppi_mean(y, yhat, yhat_u, weights=w, lam=0.5, variance="ppi_py")
    old_moved = ppi_mean(y + 10, yhat + 10, yhat_u + 10, weights=w, lam=0.5, variance="ppi_py")
    assert old_moved.se > 2 * old.se


def test_gap_is_one_estimate_with_added_variances() -> None:
    # By hand, lam = 1 and a perfect judge (y = yhat, so the rated part adds nothing): A's
    # estimate is mean([3, 5]) = 4 with variance var([3, 5]) / 2 = 1 / 2; B's mean([1, 3, 1,
    # 3]) = 2 with 1 / 4. The gap is 2 with variance 3 / 4.
    a = Group([3.0, 5], [3.0, 5], [3.0, 5])
    b = Group([1.0, 3], [1.0, 3], [1.0, 3, 1, 3])
    gap = ppi_gap(a, b, lam=1, alpha=0.1, t_below=0)
    assert gap.estimate == 2.0
    assert gap.se == pytest.approx(math.sqrt(0.5 + 0.25))
    z90 = float(norm.ppf(0.95))
    assert (gap.ci_low, gap.ci_high) == pytest.approx((2 - z90 * gap.se, 2 + z90 * gap.se))
    # With 2 ratings per group (under SMALL_N) the default is a t interval at min(2, 2) - 1
    # = 1 df: t(0.95, 1) = tan(0.45 pi) = 6.3138 (the Cauchy quantile, by hand).
    small = ppi_gap(a, b, lam=1, alpha=0.1)
    t90 = math.tan(0.45 * math.pi)
    assert (small.ci_low, small.ci_high) == pytest.approx((2 - t90 * gap.se, 2 + t90 * gap.se))
    assert small.interval == "t, 1 df" and gap.interval == "normal"
    # human-only gap variance: var([3, 5]) / 2 + var([1, 3]) / 2 = 1; effective n = 4 * 1 / 0.75
    assert gap.effective_n == pytest.approx(4 / 0.75)
    assert gap.a.lam == gap.b.lam == 1.0


def test_small_samples_are_flagged_and_get_t_intervals() -> None:
    y = np.arange(SMALL_N, dtype=float)
    assert not classical_mean(y).small_sample
    assert classical_mean(y).interval == "normal"
    assert classical_mean(y[:-1]).small_sample
    # 20 ratings: the interval is the normal one widened by t(0.975, 19) / z(0.975) = 2.0930 /
    # 1.9600 (scipy's quantiles), 6.8 % wider: the "7 % wider".
    y20 = np.arange(20, dtype=float)
    t_based, normal = classical_mean(y20), classical_mean(y20, t_below=0)
    assert t_based.interval == "t, 19 df"
    ratio = float(t.ppf(0.975, 19) / norm.ppf(0.975))
    assert t_based.half_width / normal.half_width == pytest.approx(ratio, rel=1e-12)
    assert ratio == pytest.approx(1.068, abs=1e-3)
    # ppi_mean the same way: 12 rated, 11 df.
    judged = ppi_mean(y20[:12], y20[:12] + 1, y20[12:] + 1)
    assert judged.interval == "t, 11 df" and judged.small_sample


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: ppi_mean([], [], [1.0]), "y is empty"),
        (lambda: ppi_mean([1.0, 2], [1.0], [1.0]), "same rated items"),
        (lambda: ppi_mean([1.0], [1.0], [1.0]), "at least 2 human ratings"),
        (lambda: ppi_mean([1.0, math.nan], [1.0, 2], [1.0]), "y contains 1 NaN"),
        (lambda: ppi_mean([1.0, 2], [1.0, 2], []), "yhat_unlabelled is empty"),
        (lambda: ppi_mean([1.0, 2], [1.0, 2], [1.0], weights=[1, 0]), "must be positive"),
        (lambda: ppi_mean([1.0, 2], [1.0, 2], [1.0], weights=[1.0]), "one weight per item"),
        (lambda: ppi_mean([1.0, 2], [1.0, 2], [1.0], lam=1.5), "lam must be None"),
        (lambda: ppi_mean([1.0, 2], [1.0, 2], [1.0], alpha=5), "alpha must be between"),
        (lambda: ppi_mean([1.0, 2], [1.0, 2], [1.0], strata=["a", "b"]), "fewer than 2"),
        (
            lambda: ppi_mean([1.0, 2], [1.0, 2], [1.0], strata=["a", "a"], variance="ppi_py"),
            "strata need variance='design'",
        ),
        (lambda: ppi_mean([1.0, 2], [1.0, 2], [1.0], variance="hajek"), "variance must be"),  # type: ignore[arg-type]
        (lambda: plan_human_ratings(rho=1.2, sd=1, half_width=0.1), "rho must be"),
        (
            lambda: plan_human_ratings(rho=0.5, sd=1, half_width=0),
            "half_width must be a positive number",
        ),
        (
            lambda: plan_human_ratings(rho=0.5, sd=-1, half_width=0.1),
            "sd must be a positive number",
        ),
        (lambda: plan_human_ratings(rho=math.nan, sd=1, half_width=0.1), "rho must be"),
        (lambda: plan_human_ratings(rho=0.5, half_width=0.1), "exactly one of sd and variance"),
        (
            lambda: plan_human_ratings(rho=0.5, sd=1, half_width=0.1, n_unlabelled=0),
            "n_unlabelled must be",
        ),
        (
            lambda: plan_human_ratings(rho=0.5, sd=1, half_width=0.1, n_unlabelled=10, n_judged=20),
            "at most one of n_unlabelled and n_judged",
        ),
        (
            lambda: plan_human_ratings(rho=0.5, sd=1, half_width=0.1, n_judged=0),
            "n_judged must be",
        ),
    ],
)
def test_impossible_input_is_refused(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


# ---------------------------------------------------------------- planning


def test_plan_with_unlimited_judge_scores_is_the_closed_form() -> None:
    # By hand: z = 1.959964; human-only n = z**2 * 1.5**2 / 0.2**2 = 216.08 -> 217; PPI++ with
    # rho 0.6 keeps 1 - 0.36 = 0.64 of the variance: 138.29 -> 139.
    plan = plan_human_ratings(rho=0.6, sd=1.5, half_width=0.2)
    assert (plan.n_human_only, plan.n_ppi, plan.ratings_saved) == (217, 139, 78)
    assert plan_human_ratings(rho=0.6, variance=2.25, half_width=0.2) == plan
    # A negative correlation is clipped to lam = 0: nothing saved.
    against = plan_human_ratings(rho=-0.9, sd=1.5, half_width=0.2)
    assert against.n_ppi == against.n_human_only == 217


@pytest.mark.parametrize(("rho", "big_n"), [(0.5, 300), (0.8, 1000), (0.9, 20_000)])
def test_plan_with_finite_judge_scores_meets_the_target_at_the_smallest_n(
    rho: float, big_n: int
) -> None:
    # Independent check: ppi_py's power analysis (ppi_power_analysis.py) rates a PPI estimate
    # from n ratings and N judge scores as worth n (n + N) / (n + (1 - rho**2) N) human-only
    # ratings. The planned n must be worth at least the human-only n, and n - 1 must not.
    plan = plan_human_ratings(rho=rho, sd=1.0, half_width=0.1, n_unlabelled=big_n)

    def worth(n: int) -> float:
        return n * (n + big_n) / (n + (1 - rho**2) * big_n)

    needed = Z95**2 * 1.0 / 0.1**2  # 384.15, the unrounded human-only count
    assert worth(plan.n_ppi) >= needed
    assert worth(plan.n_ppi - 1) < needed
    assert plan.n_human_only == 385


def test_planned_n_gives_the_target_width_in_simulation() -> None:
    # Humans N(3, 1); judge = 0.7 * human + noise of sd sqrt(1 - 0.49) + 0.5 (correlation
    # exactly 0.7, sd 1, biased by +0.5 + 0.7 * 3 - 3). At the planned n the tuned intervals'
    # average half-width must be the target 0.1 within 3 %, and the human-only plan's too.
    rho, big_n, target = 0.7, 5000, 0.1
    plan = plan_human_ratings(rho=rho, sd=1.0, half_width=target, n_unlabelled=big_n)
    rng = np.random.default_rng(41)
    reps, n = 300, plan.n_ppi
    human = rng.normal(3.0, 1.0, (reps, n + big_n))
    judge = rho * human + math.sqrt(1 - rho**2) * rng.normal(0, 1, human.shape) + 0.5
    widths = [ppi_mean(h[:n], j[:n], j[n:]).half_width for h, j in zip(human, judge, strict=True)]
    assert np.mean(widths) == pytest.approx(target, rel=0.03)
    alone = [classical_mean(h[: plan.n_human_only]).half_width for h in human]
    assert np.mean(alone) == pytest.approx(target, rel=0.03)


def test_plan_over_a_fixed_set_of_judged_items_gives_ppi_py_the_target_width(
    ppi_py: Any,
) -> None:
    # M = 1000 judged items, people rate n, the other M - n are the judge's part (ppi_py's
    # convention). By hand: T = (0.08 / 1.959964)**2 = 0.0016660; n = (1 - 0.64) /
    # (T - 0.64 / 1000) = 0.36 / 0.0010260 = 350.9 -> 351. Checked by simulation against
    # ppi_py's own tuned interval (ppi_mean_ci, lam=None): at the planned n its average
    # half-width is the target within 1 % (measured 0.0798). The count that plans with all M
    # items as the judge's part (n_unlabelled=M, 307) falls short: its intervals are wider
    # than the target by more than 2 % (measured 0.0833, 4 % over), which is what the rating
    # planner did when it counted rated items as unrated.
    rho, big_m, target = 0.8, 1000, 0.08
    plan = plan_human_ratings(rho=rho, sd=1.0, half_width=target, n_judged=big_m)
    quadratic = plan_human_ratings(rho=rho, sd=1.0, half_width=target, n_unlabelled=big_m)
    assert (plan.n_ppi, quadratic.n_ppi, plan.n_human_only, plan.n_judged) == (351, 307, 601, 1000)
    rng = np.random.default_rng(7)

    def mean_width(n: int) -> float:
        widths = []
        for _ in range(300):
            y = rng.normal(3.0, 1.0, big_m)
            yhat = rho * y + math.sqrt(1 - rho**2) * rng.normal(0, 1, big_m) + 0.5
            low, high = ppi_py.ppi_mean_ci(y[:n], yhat[:n], yhat[n:], alpha=0.05, lam=None)
            widths.append((float(np.squeeze(high)) - float(np.squeeze(low))) / 2)
        return float(np.mean(widths))

    assert mean_width(plan.n_ppi) == pytest.approx(target, rel=0.01)
    assert mean_width(quadratic.n_ppi) > 1.02 * target


def test_plan_over_too_few_judged_items_is_out_of_reach() -> None:
    # 100 judged items, sd 1: rating all of them gives a half-width of 1.959964 / 10 = 0.196,
    # so 0.15 cannot be had with one rating per item. The plan asks for the human-only count,
    # z**2 / 0.15**2 = 170.7 -> 171, more than the items, for the caller to say so. At 0.25
    # (T = 0.016270 > 1 / 100) it is within reach: 0.19 / (0.016270 - 0.81 / 100) = 23.26 -> 24.
    short = plan_human_ratings(rho=0.9, sd=1.0, half_width=0.15, n_judged=100)
    assert short.n_ppi == short.n_human_only == 171
    within = plan_human_ratings(rho=0.9, sd=1.0, half_width=0.25, n_judged=100)
    assert (within.n_ppi, within.n_human_only) == (24, 62)


# ---------------------------------------------------------------- coverage simulations


def mean_model(rng: np.random.Generator, size: tuple[int, ...], shift: float = 0.0) -> tuple:
    """(human, judge, level). Human y = q + e (q ~ N(3 + shift, 1), e ~ N(0, 0.5**2)): E[y]
    = 3 + shift exactly. Judge = 0.8 q + 1 + e' (e' ~ N(0, 0.6**2)): biased by +0.4 - 0.2
    shift, correlation 0.8 / sqrt(1.25 * 1.0) = 0.72 with the humans. Level: the judge's
    score rounded to 1-5, the strata annotation/sampling.py draws from."""
    q = rng.normal(3.0 + shift, 1.0, size)
    judge = 0.8 * q + 1.0 + rng.normal(0, 0.6, size)
    return q + rng.normal(0, 0.5, size), judge, np.clip(np.rint(judge), 1, 5)


def share_model(rng: np.random.Generator, size: tuple[int, ...], shift: float = 0.0) -> tuple:
    """(human, judge, level). Human y = 1{q + e > 3.5} (q, e as in mean_model): P(y = 1) =
    1 - Phi((0.5 - shift) / sqrt(1.25)), 0.327 at shift 0. The judge's verdict is 1{s > 3.2}
    for its score s = q + e'' (e'' ~ N(0, 0.5**2)): it says yes more often (0.43) and
    correlates 0.57 with the humans (measured on 2 million draws). Level: s rounded to 1-5,
    so a level holds both verdicts."""
    q = rng.normal(3.0 + shift, 1.0, size)
    human = q + rng.normal(0, 0.5, size) > 3.5
    score = q + rng.normal(0, 0.5, size)
    return human.astype(float), (score > 3.2).astype(float), np.clip(np.rint(score), 1, 5)


def share_truth(shift: float = 0.0) -> float:
    return float(1 - norm.cdf((0.5 - shift) / math.sqrt(1.25)))


def covered(results: list[tuple[float, float]], truth: float | np.ndarray) -> float:
    lows, highs = np.array(results).T
    return float(np.mean((lows <= truth) & (truth <= highs)))


MODELS = {
    "mean": (mean_model, lambda shift: 3.0 + shift),
    "share": (share_model, share_truth),
}


@pytest.mark.parametrize("kind", MODELS)
def test_random_sample_coverage_and_width(kind: str) -> None:
    # Truth known by construction (MODELS); n = 150 rated, N = 1500 judged only.
    model, truth = MODELS[kind]
    rng = np.random.default_rng(7)
    n = 150
    y, j, _ = model(rng, (REPS, n + 1500))
    results = [ppi_mean(a[:n], b[:n], b[n:]) for a, b in zip(y, j, strict=True)]
    assert 0.93 <= covered([(r.ci_low, r.ci_high) for r in results], truth(0.0)) <= 0.97
    # Correlation >= 0.5: never wider than the human-only interval on the same ratings.
    assert all(r.ratings_saved >= -1e-9 for r in results)  # 0 up to rounding
    judge_alone = judge_only_mean(j[0][n:])
    assert not judge_alone.ci_low <= truth(0.0) <= judge_alone.ci_high  # the bias shows


def test_random_sample_gap_coverage() -> None:
    # Group A's humans average 3.0, B's 2.6 (true gap 0.4); the judge is biased by +0.4 for
    # A and +0.48 for B (mean_model), so its own gap is 0.32.
    rng = np.random.default_rng(8)
    n, big_n = 120, 1200
    ya, ja, _ = mean_model(rng, (REPS, n + big_n))
    yb, jb, _ = mean_model(rng, (REPS, n + big_n), shift=-0.4)
    results = [
        ppi_gap(Group(a[:n], b[:n], b[n:]), Group(c[:n], d[:n], d[n:]))
        for a, b, c, d in zip(ya, ja, yb, jb, strict=True)
    ]
    assert 0.93 <= covered([(r.ci_low, r.ci_high) for r in results], 0.4) <= 0.97
    assert all(r.ratings_saved >= -1e-9 for r in results)  # 0 up to rounding


SIZE = 2000
PER_STRATUM = 40


def stratified_draw(
    rng: np.random.Generator, model: Callable[..., tuple], shift: float = 0.0
) -> tuple[Group, float]:
    """A judge run of SIZE items; strata are the judge's score levels (the model's third
    output), PER_STRATUM rated in each (all of a smaller one): weights N_h / n_h, unequal
    because the levels' sizes are. The unrated part is the judge's scores of the whole run,
    so the target is the run's human mean, known here."""
    y, j, level = model(rng, (SIZE,), shift)
    order = np.lexsort((rng.random(SIZE), level))
    _, starts, sizes = np.unique(level[order], return_index=True, return_counts=True)
    picked = np.concatenate(
        [order[s : s + min(PER_STRATUM, c)] for s, c in zip(starts, sizes, strict=True)]
    )
    weights = np.concatenate([np.full(min(PER_STRATUM, c), c / min(PER_STRATUM, c)) for c in sizes])
    return Group(y[picked], j[picked], j, weights, None, level[picked].tolist()), float(y.mean())


@pytest.mark.parametrize("kind", MODELS)
def test_stratified_sample_coverage(kind: str) -> None:
    model, _ = MODELS[kind]
    rng = np.random.default_rng(9)
    draws = [stratified_draw(rng, model) for _ in range(REPS)]
    results = [
        ppi_mean(g.y, g.yhat, g.yhat_unlabelled, weights=g.weights, strata=g.strata)
        for g, _ in draws
    ]
    truths = np.array([t for _, t in draws])
    assert 0.93 <= covered([(r.ci_low, r.ci_high) for r in results], truths) <= 0.97
    assert all(r.ratings_saved >= -1e-9 for r in results)  # 0 up to rounding


def test_stratified_gap_coverage() -> None:
    rng = np.random.default_rng(10)
    intervals, truths = [], []
    for _ in range(REPS):
        a, truth_a = stratified_draw(rng, mean_model)
        b, truth_b = stratified_draw(rng, mean_model, shift=-0.4)
        gap = ppi_gap(a, b)
        intervals.append((gap.ci_low, gap.ci_high))
        truths.append(truth_a - truth_b)
    assert 0.93 <= covered(intervals, np.array(truths)) <= 0.97


def test_ppi_py_weighted_interval_overcovers_a_stratified_sample() -> None:
    # Why the design variance is the default: on the same stratified samples ppi_py's weighted
    # human-only interval (variance of w * y, which counts the distance of the 1-5 scores from
    # 0) covers nearly always: it is far wider than it needs to be.
    rng = np.random.default_rng(11)
    draws = [stratified_draw(rng, mean_model) for _ in range(300)]
    old = [classical_mean(g.y, weights=g.weights, variance="ppi_py") for g, _ in draws]
    new = [classical_mean(g.y, weights=g.weights, strata=g.strata) for g, _ in draws]
    truths = np.array([t for _, t in draws])
    assert covered([(r.ci_low, r.ci_high) for r in old], truths) > 0.99
    assert np.median([o.half_width / n.half_width for o, n in zip(old, new, strict=True)]) > 1.5
