"""Does a judge's correction transport across models (judge/stats/transport.py)?

Expected values: statsmodels' OLS with a model interaction (``human ~ x * C(model)``, its
classical covariance and F-test) to 1e-9, and seeded simulations whose truth is known by
construction: a judge biased on one model only is caught and each model's own interval
covers its truth; a judge whose relation to people is the same on both is pooled.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf

from judge.stats.ppi import Group, MeanEstimate, ppi_mean
from judge.stats.transport import TransportRefused, pooled_calibration, relation_by_model

LEVEL = 0.05  # the config's transport_alpha (judge/config_estimates.py)


def test_equals_statsmodels() -> None:
    rng = np.random.default_rng(3)
    models = np.array(["a"] * 30 + ["b"] * 35 + ["c"] * 25)
    judge = rng.normal(3, 1, models.size)
    human = 0.2 + 0.8 * judge + np.where(models == "b", 0.5, 0) + rng.normal(0, 0.5, models.size)
    got = relation_by_model(human, judge, list(models))
    frame = pd.DataFrame({"y": human, "x": judge - judge.mean(), "model": models})
    fit = smf.ols("y ~ x * C(model)", frame).fit()
    ci = fit.conf_int(0.05)
    for d in got.differences:
        bias, slope = f"C(model)[T.{d.model}]", f"x:C(model)[T.{d.model}]"
        assert d.bias == pytest.approx(fit.params[bias], abs=1e-9)
        assert (d.bias_low, d.bias_high) == pytest.approx(tuple(ci.loc[bias]), abs=1e-9)
        assert d.slope == pytest.approx(fit.params[slope], abs=1e-9)
        assert (d.slope_low, d.slope_high) == pytest.approx(tuple(ci.loc[slope]), abs=1e-9)
    f, p, df = fit.compare_f_test(smf.ols("y ~ x", frame).fit())
    assert (got.f_statistic, got.p_value, got.df_num) == pytest.approx((f, p, df), abs=1e-9)
    assert got.reference == "a" and got.df_den == models.size - 6


JUDGE_MEAN = {"a": 3.4, "b": 2.9}  # the judge's mean score of each model's answers


def truth(model: str, bias_b: float) -> float:
    """E[human] of a model's answers: 0.2 + 0.8 * its judge mean, less the bias on b."""
    return 0.2 + 0.8 * JUDGE_MEAN[model] - (bias_b if model == "b" else 0.0)


def two_models(seed: int, bias_b: float) -> dict[str, Group]:
    """Per model: 1,000 answers, 150 rated at random. The judge's score x ~ N(JUDGE_MEAN,
    1); people say 0.2 + 0.8 x + e (e ~ N(0, 0.5**2)) on both models, less ``bias_b`` on
    model b's: a judge that overrates b by ``bias_b`` relative to a (0: one relation)."""
    rng = np.random.default_rng(seed)
    out = {}
    for model, mean in JUDGE_MEAN.items():
        judge = rng.normal(mean, 1.0, 1000)
        human = 0.2 + 0.8 * judge + rng.normal(0, 0.5, 1000)
        human -= bias_b if model == "b" else 0.0
        out[model] = Group(human[:150], judge[:150], judge[150:])
    return out


def transports(groups: dict[str, Group]) -> bool:
    ys = np.concatenate([np.asarray(g.y) for g in groups.values()])
    js = np.concatenate([np.asarray(g.yhat) for g in groups.values()])
    models = [m for m, g in groups.items() for _ in range(np.size(g.y))]
    return relation_by_model(ys, js, models).transports(LEVEL)


def covers(estimate: MeanEstimate, value: float) -> bool:
    return estimate.ci_low <= value <= estimate.ci_high


def test_a_judge_biased_on_one_model_is_not_pooled() -> None:
    # 1,000 seeded data sets, the judge overrating model b by 0.8: the F-test refuses to pool
    # (power: every data set at this size), each model's own interval covers its truth 93-97
    # % of the time, and the pooled correction, had it been used, would miss b's truth
    # nearly always (why the refusal matters).
    refused, own, pooled_b = 0, {"a": 0, "b": 0}, 0
    for seed in range(1000):
        groups = two_models(seed, bias_b=0.8)
        refused += not transports(groups)
        for model, g in groups.items():
            own[model] += covers(ppi_mean(g.y, g.yhat, g.yhat_unlabelled), truth(model, 0.8))
        pooled_b += covers(pooled_calibration(groups, "b"), truth("b", 0.8))
    assert refused >= 990
    assert all(0.93 <= k / 1000 <= 0.97 for k in own.values()), own
    assert pooled_b / 1000 < 0.05


def test_an_unbiased_judge_is_pooled() -> None:
    # One relation on both models: the F-test at 0.05 lets about 95 % through (binomial sd
    # 0.007), and the pooled correction covers each model's truth 93-97 % of the time.
    allowed, pooled = 0, {"a": 0, "b": 0}
    for seed in range(1000):
        groups = two_models(seed + 50_000, bias_b=0.0)
        allowed += transports(groups)
        for model in groups:
            pooled[model] += covers(pooled_calibration(groups, model), truth(model, 0.0))
    assert 0.93 <= allowed / 1000 <= 0.97
    assert all(0.93 <= k / 1000 <= 0.97 for k in pooled.values()), pooled


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: relation_by_model([1.0, 2, 3], [1.0, 2, 3], ["a"] * 3), "two models"),
        (
            lambda: relation_by_model([1.0, 2, 3, 4, 5], [1.0, 2, 3, 4, 5], list("aaabb")),
            "has 2 rated item",
        ),
        (
            lambda: relation_by_model([1.0] * 6, [1.0, 2, 3, 4, 4, 4], list("aaabbb")),
            "same value",
        ),
    ],
)
def test_impossible_input_is_refused(call: Callable[[], object], message: str) -> None:
    with pytest.raises(TransportRefused, match=message):
        call()
