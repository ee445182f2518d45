"""One figure, one interval: on a judge run's page "The answer" and the heatmap give every
stage metric the same interval (both read judge.metrics.unit_interval), and that interval is
statsmodels' Wilson interval of the cell's counts, also for the cells of a handful of items."""

from __future__ import annotations

from flask.testing import FlaskClient
from statsmodels.stats.proportion import proportion_confint

from tests.server.dashboard.helpers import Store, tables

ANSWER = "Best figure per factor and stage metric (percent, 95 % interval)"
GRID = "Stage metrics per factor (percent, 95 % interval, n scored)"


def test_the_answer_and_the_heatmap_give_one_interval(signed_in: FlaskClient, store: Store) -> None:
    page = signed_in.get(f"/judge-runs/{store.judge_run_id}")
    assert page.status_code == 200
    found = tables(page.text)
    answer = {(r[0], r[1]): r[2] for r in found[ANSWER][1:]}
    grid = {(r[0], r[1]): r for r in found[GRID][1:]}
    assert answer and set(answer) == set(grid)  # no rating: every best figure is the judge's
    small = 0
    for key, (_, _, value, low, high, n_scored, *_) in grid.items():
        n = int(n_scored)
        hits = round(float(value) * n / 100)
        # Expected: statsmodels' own Wilson formula for the cell's counts, in percent.
        w_low, w_high = proportion_confint(hits, n, alpha=0.05, method="wilson")
        assert (low, high) == (f"{100 * w_low:.1f}", f"{100 * w_high:.1f}"), key
        assert answer[key] == f"{value} [{low}, {high}]", key
        assert float(high) > float(low), key  # never a point, even at 0 of n or n of n
        small += n <= 5
    assert small, "the store has cells of a handful of items"
