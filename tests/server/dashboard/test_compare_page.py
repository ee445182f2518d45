"""The comparison page (/compare) on the planted pairs of tests/support/planted_pairs.py: the
form lists every judge run, the overview links it, and the numbers under its charts are the
ones derived by hand from the planted scores.

Hand derivations (40 S1 items, ICS, factor gender; people's truth 1-3 on both models'
answers; the judge: A = truth, B = truth + 1, "same" = A):

- B - A on the S1 ICS mean (% of 5): +20 points on every pair, so no interval (no spread),
  p = 2 / 2**40, flagged after Holm; flips at ICS >= 3: fail -> pass on the items of truth 2,
  none pass -> fail.
- same - A: 0 on every pair, not flagged. Its verdicts bound what unseen pairs could change:
  80 x (1 - 0.05 ** (1 / 40)) = 5.78 points on the mean (80: the 1-5 scale's range in % of
  5), so not equivalent at the default margin 5, equivalent at margin 10.
- corrected (imported ratings of 30 items, assumed random): people see 0 on every rated
  pair, so the prediction-powered B - A is +0.0 where the judge-only one is +20.0.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from flask.testing import FlaskClient

from judge.store.engine import make_engine
from server import create_app
from server.auth import create_key
from tests.server.dashboard.helpers import sign_in, tables
from tests.support.factories import make_settings
from tests.support.planted_pairs import PlantedPairs, plant_pairs

MEAN = "S1 ICS mean"


@dataclass(frozen=True)
class Page:
    client: FlaskClient
    runs: PlantedPairs
    truth: list[float]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory, empty_template: object) -> Iterator[Page]:
    from tests.support import stores

    folder = tmp_path_factory.mktemp("compare-page")
    path = folder / "fairjudge.db"
    stores.copy_store(empty_template, path)  # type: ignore[arg-type]
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    truth = np.random.default_rng(7).integers(1, 4, 40).astype(float).tolist()
    runs = plant_pairs(engine, truth, [*truth[:30], *[float("nan")] * 10])
    name = f"member-{uuid.uuid4().hex[:8]}"
    _, raw = create_key(engine, name, "member")
    settings = make_settings("http://127.0.0.1:9/v1", url)  # nothing calls a model
    app = create_app({"SETTINGS": settings, "TESTING": True, "SECRET_KEY": "compare-secret"})
    client = app.test_client()
    assert sign_in(client, raw).status_code == 302
    yield Page(client, runs, truth)
    app.extensions["fairjudge_engine"].dispose()
    engine.dispose()


def _query(*runs: int, extra: str = "") -> str:
    return "/compare?" + "&".join(f"judge_run={r}" for r in runs) + extra


def _numbers(found: dict[str, list[list[str]]], starts: str) -> dict[tuple[str, str], dict]:
    (title,) = [t for t in found if t.startswith(starts) and "per factor" in t]
    header, *rows = found[title]
    return {(r[0], r[1]): dict(zip(header, r, strict=True)) for r in rows}


def test_the_overview_links_the_page_and_the_form_lists_every_run(page: Page) -> None:
    overview = page.client.get("/").text
    assert 'href="/compare"' in overview
    form = page.client.get("/compare")
    assert form.status_code == 200
    for run in (page.runs.a, page.runs.b, page.runs.same, page.runs.other):
        assert f'name="judge_run" value="{run}"' in form.text
    assert "Pick two or more judge runs" in form.text


def test_differences_flips_and_refusals_are_the_hand_derived_ones(page: Page) -> None:
    r = page.runs
    reply = page.client.get(_query(r.a, r.b, r.same, r.other))
    assert reply.status_code == 200, reply.text[:500]
    found = tables(reply.text)
    b = _numbers(found, "model-b")[("all", MEAN)]
    assert b["B - A"] == "20.0" and b["CI low"] == "—" and b["flagged"] == "yes"
    assert b["p"] == f"{2 / 2**40:.3g}"  # 1.82e-12
    share = _numbers(found, "model-b")[("all", "S1 ICS>=3")]
    assert share["fail->pass"] == str(page.truth.count(2.0)) and share["pass->fail"] == "0"
    same = _numbers(found, "model-under-test (judge run")
    assert same[("all", MEAN)]["B - A"] == "0.0" and same[("all", MEAN)]["flagged"] == "no"
    assert same[("all", MEAN)]["equivalent"] == "no"  # 5.78 > 5
    # The run of other items is refused with the counts, the others still compared.
    assert "did not judge the same items" in reply.text
    assert "0 item x rubric pairs in both" in reply.text
    assert 'class="chart-box"' in reply.text and "<svg" in reply.text
    # A wider margin: equivalent (5.78 < 10)
    wider = tables(page.client.get(_query(r.a, r.same, extra="&margin=10")).text)
    assert _numbers(wider, "model-under-test")[("all", MEAN)]["equivalent"] == "yes"


def test_the_corrected_difference_needs_a_design_then_shows_people_s_figure(page: Page) -> None:
    r = page.runs
    plain = page.client.get(_query(r.a, r.b)).text
    assert "No corrected difference" in plain and "assume" in plain
    assumed = tables(page.client.get(_query(r.a, r.b, extra="&assume_random=true")).text)
    (title,) = [t for t in assumed if "corrected by people" in t]
    header, *rows = assumed[title]
    row = dict(zip(header, next(x for x in rows if x[0] == MEAN), strict=True))
    assert (row["pairs"], row["rated pairs"]) == ("40", "30")
    assert row["judge-only"].startswith("+20.0")
    assert row["prediction-powered"].startswith("+0.0")


def test_bad_picks_are_one_clear_line(page: Page) -> None:
    bad = page.client.get("/compare?judge_run=x&judge_run=2")
    assert bad.status_code == 400 and "is not a judge run" in bad.text
    margin = page.client.get(_query(page.runs.a, page.runs.b, extra="&margin=-1"))
    assert margin.status_code == 400 and "margin" in margin.text
    missing = page.client.get(_query(page.runs.a, 99999))
    assert missing.status_code == 404 and "99999" in missing.text
