"""Grouped and system-level correlations, self-consistency and items needed, by hand and
against pandas / krippendorff."""

from __future__ import annotations

import itertools
import math
import warnings

import krippendorff
import numpy as np
import pandas as pd
import pytest

from judge.stats.coefficient import BootstrapOptions, Coefficient, UndefinedWarning
from judge.stats.levels import grouped_correlations, items_needed, self_consistency, system_level


def test_grouped_and_system_levels_by_hand() -> None:
    # group a: perfect agreement (rho 1); group b: reversed (rho -1); group c: judge constant
    # (skipped). Average over used groups: 0.
    judge = [1, 2, 3, 1, 2, 3, 4, 4, 4]
    human = [1, 2, 3, 3, 2, 1, 1, 2, 5]
    groups = list("aaabbbccc")
    g = grouped_correlations(judge, human, groups, options=BootstrapOptions(n_bootstrap=100))
    assert g.coefficients["spearman"].value == pytest.approx(0.0)
    assert (g.n_groups, g.n_groups_skipped) == (2, 1)
    # System means: a (2, 2), b (2, 2), c (4, 2.667): too few points to be useful -> 3 points.
    s = system_level(judge, human, groups, options=BootstrapOptions(n_bootstrap=200))
    assert s.n_systems == 3 and s.systems["c"].human == pytest.approx(8 / 3)
    assert s.to_dict()["systems"]["c"] == {"judge": 4.0, "human": pytest.approx(8 / 3)}
    # Means: judge (2, 2, 4), human (2, 2, 2.667): both are affine images of (0, 0, 1) -> r = 1.
    pearson = s.coefficients["pearson"]
    assert pearson.value == pytest.approx(1.0)
    assert pearson.n == 3
    # The CI resamples items within each system. With 3 items a system there are only 27^3
    # resamples, so the exact bootstrap distribution can be enumerated here: about 2.5 % of it
    # must lie below the CI and about 2.5 % above (undefined resamples left out).
    x, y = np.array(judge, dtype=float).reshape(3, 3), np.array(human, dtype=float).reshape(3, 3)
    picks = np.array(list(itertools.product(range(3), repeat=3)))  # 27 resamples of 3 items
    means_x, means_y = x[:, picks].mean(axis=2), y[:, picks].mean(axis=2)  # (system, 27)
    grid = np.array(list(itertools.product(range(27), repeat=3)))  # one resample per system
    mx = np.stack([means_x[s, grid[:, s]] for s in range(3)], axis=1)
    my = np.stack([means_y[s, grid[:, s]] for s in range(3)], axis=1)
    dx, dy = mx - mx.mean(1, keepdims=True), my - my.mean(1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        exact = (dx * dy).sum(1) / np.sqrt((dx**2).sum(1) * (dy**2).sum(1))
    exact = exact[np.isfinite(exact)]
    s = system_level(judge, human, groups, options=BootstrapOptions(n_bootstrap=4000, seed=1))
    low, high = s.coefficients["pearson"].ci_low, s.coefficients["pearson"].ci_high
    assert 0.01 <= np.mean(exact < low) <= 0.05 and 0.0 <= np.mean(exact > high) <= 0.05


def test_undefined_levels_say_why() -> None:
    # Every group has a constant judge: nothing to average.
    with pytest.warns(UndefinedWarning) as caught:
        g = grouped_correlations([3, 3, 4, 4], [1, 2, 3, 4], list("aabb"))
    assert [str(w.message).split(" is undefined")[0] for w in caught] == [
        "grouped pearson",
        "grouped spearman",
        "grouped kendall",
    ]
    assert math.isnan(g.coefficients["spearman"].value)
    assert g.to_dict()["spearman"]["undefined_reason"] == (
        "no group with two or more items and varying scores on both sides (2 skipped)"
    )
    # Two systems are two points: a correlation needs at least three.
    with pytest.warns(UndefinedWarning, match=r"fewer than 3 systems \(n=2\)"):
        s = system_level([1, 2, 3, 4], [1, 2, 3, 4], list("aabb"))
    assert s.coefficients["kendall"].undefined_reason == "fewer than 3 systems (n=2)"


def test_self_consistency_by_hand() -> None:
    samples: list[list[float]] = [[3, 3, 3], [2, 4, 2], [5, 5, np.nan], [1, np.nan, np.nan]]
    result = self_consistency(samples, options=BootstrapOptions(n_bootstrap=100))
    # The last item has one scored sample and is left out; 1 of 3 items disagrees.
    assert result.n_items == 3 and result.share_disagreeing == pytest.approx(1 / 3)
    usable = np.array(samples[:3], dtype=float).T  # samples as raters, items as units
    assert result.to_dict()["alpha_ordinal"]["value"] == pytest.approx(
        krippendorff.alpha(
            reliability_data=usable, level_of_measurement="ordinal", value_domain=[1, 2, 3, 4, 5]
        )
    )


def test_self_consistency_of_a_judge_that_always_agrees_with_itself() -> None:
    # Every sample of every item is 4: no item disagrees, and alpha is 0/0 (no variation).
    with pytest.warns(UndefinedWarning, match="constant ratings: every rating is 4"):
        result = self_consistency([[4, 4], [4, 4], [4, 4]], options=BootstrapOptions(10))
    assert result.share_disagreeing == 0.0
    assert result.to_dict()["alpha_interval"]["undefined_reason"] == (
        "constant ratings: every rating is 4"
    )


def test_items_needed_scales_with_the_square_of_the_width() -> None:
    pilot = Coefficient(0.7, 0.6, 0.8, None, 40)  # half-width 0.1
    assert items_needed(pilot, 0.05) == 160  # (0.1 / 0.05)^2 x 40
    assert items_needed(pilot, 0.2) == 40  # never fewer than the pilot already has
    assert items_needed(Coefficient.undefined(40, "constant ratings"), 0.05) is None


def test_summeval_grouped_correlation(
    summeval_coherence: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    # Grouped (summary-level) Spearman: crowd mean as the "judge", expert mean as the human,
    # per source document, averaged; recomputed with pandas groupby.
    df, experts = summeval_coherence
    human = experts.groupby("item").score.mean()
    crowd = df[df.rater == "turkers"].set_index("item").score.loc[human.index]
    doc = df.drop_duplicates("item").set_index("item").doc.loc[human.index]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # constant groups are skipped before scipy sees them
        g = grouped_correlations(
            crowd.to_numpy(), human.to_numpy(), doc.to_numpy(), options=BootstrapOptions(200)
        )
    frame = pd.DataFrame({"j": crowd.to_numpy(), "h": human.to_numpy(), "d": doc.to_numpy()})
    per_doc = [
        grp.j.corr(grp.h, method="spearman")
        for _, grp in frame.groupby("d")
        if grp.j.nunique() > 1 and grp.h.nunique() > 1
    ]
    assert g.n_groups == len(per_doc)
    assert g.coefficients["spearman"].value == pytest.approx(np.mean(per_doc), abs=1e-12)
    assert g.n_groups + g.n_groups_skipped == 100
