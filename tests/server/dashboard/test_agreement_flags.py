"""The dashboard's agreement page shows exact agreement beside the majority baseline, kappa
and AC1, with the flags next to them: a planted flattering case is flagged, a clean one
shows none. Counted here from the stored judge scores (the stub scores 1 + sha256 mod 5)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from flask.testing import FlaskClient
from sqlmodel import Session, select

from judge.store.tables import HumanRating, Judgment
from tests.server.dashboard.helpers import Store, fields


@pytest.fixture
def rate(store: Store) -> Iterator[Callable[[Callable[[int], int]], dict[int, int]]]:
    """Store two raters' ratings (each item's score given by a function of the judge's);
    removed afterwards, the store being the module's."""

    def add(score: Callable[[int], int]) -> dict[int, int]:
        with Session(store.engine) as session:
            judged = list(
                session.exec(select(Judgment).where(Judgment.judge_run_id == store.judge_run_id))
            )
            scores = {j.item_id: int(j.score) for j in judged if j.score is not None}
            session.add_all(
                HumanRating(
                    generation_run_id=store.generation_run_id,
                    item_id=item,
                    rubric="ICS",
                    rater=rater,
                    score=float(score(value)),
                )
                for item, value in scores.items()
                for rater in ("r1", "r2")
            )
            session.commit()
        return scores

    yield add
    with Session(store.engine) as session:
        for rating in session.exec(select(HumanRating)):
            session.delete(rating)
        session.commit()


def test_a_judge_no_better_than_the_majority_is_flagged_on_the_page(
    signed_in: FlaskClient, store: Store, rate: Callable[[Callable[[int], int]], dict[int, int]]
) -> None:
    # Planted: the people rate every item 3. By hand: baseline 18/18 = 1.000, exact
    # agreement = the share of items the judge scored 3, kappa 0.
    scores = rate(lambda judge: 3)
    share = Counter(scores.values())[3] / len(scores)
    page = signed_in.get(f"/judge-runs/{store.judge_run_id}/agreement?n_bootstrap=100").text
    row = fields(page, "rubric", "ICS")
    assert row["majority_baseline"].startswith("1.000")
    assert row["exact_agreement"].startswith(f"{share:.3f}")
    assert row["kappa"].startswith("0.000")
    assert "AC1" in page and row["ac1"] != "—"
    assert "no better than always answering the majority class" in row["flags"]
    assert "kappa's interval covers 0" in row["flags"]
    codes = re.findall(r'class="flag" data-code="([a-z_]+)"', page)
    assert codes == ["kappa_covers_zero", "no_better_than_majority"]


def test_a_judge_that_copies_the_people_shows_no_flag(
    signed_in: FlaskClient, store: Store, rate: Callable[[Callable[[int], int]], dict[int, int]]
) -> None:
    # Clean: the people give the judge's own scores: exact agreement 1, kappa 1. (Another
    # n_bootstrap than the test above: ratings deleted behind the app's back and added again
    # reuse SQLite's row ids, so the run's fingerprint, and the page kept for it, would be
    # the same.)
    rate(lambda judge: judge)
    page = signed_in.get(f"/judge-runs/{store.judge_run_id}/agreement?n_bootstrap=101").text
    row = fields(page, "rubric", "ICS")
    assert row["exact_agreement"].startswith("1.000") and row["kappa"].startswith("1.000")
    assert row["flags"] == "none"
    assert 'class="flag"' not in page
