"""A judge run's pages never computed in the request: after a write, the run's latest kept
figures with a banner until the figures now are computed (then the fresh page, no banner);
a run with nothing ever kept gets a page that reloads itself, then the real page.

The store is ``two_runs`` (tests/support/two_runs.py): runs ``a`` and ``b`` of 18 S1 items,
one ICS judgment each; run ``a`` has 2 raters' ratings of its first 3 items (6 ratings,
counted by hand), run ``b`` none and nothing kept. The pages wait ``PAGE_WAIT_S = 0`` for
figures being computed: a load that finds none kept at the run's version now never waits for
them, whatever the machine's speed.
"""

from __future__ import annotations

import re
import time

from flask import Flask
from flask.testing import FlaskClient
from sqlmodel import Session, col, select
from werkzeug.test import TestResponse

from server import create_app
from server.tables import DashboardFigure
from server.usecases.figures import warm_run
from tests.server.dashboard.helpers import fields, sign_in
from tests.support.two_runs import TwoRuns, import_ratings

BANNER = 'id="stale"'
FRESH_LINE = 'id="computed"'
PAGES = {"judge-run": "", "agreement": "/agreement", "checks": "/checks"}
"""Each page's name as kept (``PageKey.page``) -> its path after /judge-runs/<id>."""


def _client(t: TwoRuns) -> FlaskClient:
    app: Flask = create_app(
        {"SETTINGS": t.settings, "TESTING": True, "SECRET_KEY": "test-secret", "PAGE_WAIT_S": 0.0}
    )
    client = app.test_client()
    assert sign_in(client, t.key).status_code == 302
    return client


def _figures_part(html: str) -> str:
    """The page without its line on when the figures were computed (or the banner that
    stands in its place), and with its charts' element ids (a counter of the process,
    server/dashboard/charts.py ``_uid``) numbered from 1 in order: what the kept figures
    alone draw."""
    shown = re.sub(
        r'<p class="(?:note computed|stale)" id="(?:computed|stale)".*?</p>', "", html, flags=re.S
    )
    numbers: dict[str, str] = {}

    def renumber(m: re.Match[str]) -> str:
        return m.group(1) + numbers.setdefault(m.group(2), str(len(numbers) + 1))

    return re.sub(r'(?<=["# ])([ch])(\d+)(?=[td]?["\) ])', renumber, shown)


def _until_fresh(client: FlaskClient, path: str, timeout_s: float = 180.0) -> TestResponse:
    """Load ``path`` until it shows the figures as they are now (no banner, not 202)."""
    deadline = time.monotonic() + timeout_s
    while True:
        page = client.get(path)
        if page.status_code == 200 and BANNER not in page.text:
            return page
        assert time.monotonic() < deadline, f"{path} still not fresh: {page.text[:300]}"
        time.sleep(0.2)


def _kept_at(t: TwoRuns, run: int) -> set[str]:
    """When the store's kept figures of the run were computed, as the pages write it."""
    with Session(t.engine) as session:
        times = session.exec(
            select(DashboardFigure.computed_at).where(col(DashboardFigure.judge_run_id) == run)
        ).all()
    return {at.strftime("%Y-%m-%d %H:%M:%S") for at in times}


def test_a_run_never_kept_gets_a_page_that_reloads_then_the_real_page(two_runs: TwoRuns) -> None:
    t = two_runs
    b = t.runs["b"]
    assert _kept_at(t, b) == set()  # nothing kept for run b: no job, no warm, no load
    client = _client(t)
    start = time.monotonic()
    first = client.get(f"/judge-runs/{b}")
    took = time.monotonic() - start
    assert first.status_code == 202, first.text[:300]
    assert 'id="computing"' in first.text
    # It reloads itself (a meta refresh to the page's own URL) as often as it says.
    every = first.headers["Retry-After"]
    assert f'<meta http-equiv="refresh" content="{every}; url=/judge-runs/{b}">' in first.text
    assert took < 10.0, took  # rendering only: the run page's figures are not awaited
    page = _until_fresh(client, f"/judge-runs/{b}")
    assert 'id="computing"' not in page.text and FRESH_LINE in page.text
    # 18 S1 items, one ICS judgment each, every one scored by the stub (counted by hand).
    got = fields(page.text, "judge-run", b)
    assert (got["scored"], got["unscored"]) == ("18", "0")


def test_after_a_write_each_page_shows_its_kept_figures_with_a_banner_then_the_fresh_page(
    two_runs: TwoRuns,
) -> None:
    t = two_runs
    a = t.runs["a"]
    warm_run(t.engine, t.settings, a)  # every page of run a kept at its version now
    client = _client(t)
    before = {}
    for name, tail in PAGES.items():
        page = client.get(f"/judge-runs/{a}{tail}")
        # Kept at the run's version now: the page as it is, no banner (no false alarm).
        assert page.status_code == 200 and BANNER not in page.text, name
        assert "kept since then" in page.text, name
        before[name] = page.text
    raters = fields(before["agreement"], "rubric", "ICS")
    assert raters["raters"] == "2"  # r1 and r2 (the fixture's ratings)
    kept_at = _kept_at(t, a)
    # A third rater's ratings of the same 3 items: 9 ratings, run a's rows changed.
    import_ratings(t, "a", ("r3",), 3)
    for name, tail in PAGES.items():
        start = time.monotonic()
        page = client.get(f"/judge-runs/{a}{tail}")
        took = time.monotonic() - start
        assert page.status_code == 200, (name, page.text[:300])
        assert BANNER in page.text and FRESH_LINE not in page.text, name
        assert took < 10.0, (name, took)  # rendering only: nothing awaited (PAGE_WAIT_S = 0)
        # What changed, from the run's versions before and after: the ratings.
        assert "before the latest writes to this run's rows (ratings)" in page.text, name
        # The banner's time is when the kept figures were computed (read from the store).
        banner = re.search(r"computed (\S+ \S+) UTC", page.text)
        assert banner is not None and banner.group(1) in kept_at, name
        # The figures are the kept ones word for word: the page before the write, banner aside.
        assert _figures_part(page.text) == _figures_part(before[name]), name
    for name, tail in PAGES.items():
        fresh = _until_fresh(client, f"/judge-runs/{a}{tail}")
        assert FRESH_LINE in fresh.text, name
    agreement = _until_fresh(client, f"/judge-runs/{a}/agreement")
    # The fresh agreement counts the third rater (r1, r2, r3: 3), so it differs from the
    # stale page, which could therefore not have passed for it.
    assert fields(agreement.text, "rubric", "ICS")["raters"] == "3"
    assert _figures_part(agreement.text) != _figures_part(before["agreement"])


def test_compute_again_shows_the_kept_figures_until_the_new_ones_are_ready(
    two_runs: TwoRuns,
) -> None:
    t = two_runs
    a = t.runs["a"]
    warm_run(t.engine, t.settings, a)
    client = _client(t)
    kept = client.get(f"/judge-runs/{a}/checks")
    assert kept.status_code == 200 and BANNER not in kept.text
    again = client.get(f"/judge-runs/{a}/checks?fresh=1")
    assert again.status_code == 200 and BANNER in again.text
    assert "and are being computed again:" in again.text
    assert _figures_part(again.text) == _figures_part(kept.text)
    # Its reload link is the plain page (not ?fresh=1, which would compute them once more).
    assert f'href="/judge-runs/{a}/checks" id="reload"' in again.text
