"""No link of the dashboard leads to a page that does not exist: every link of every page,
followed from the overview, on the loop store (a counterfactual copy's judge run, an award
audit the judge classified) with a second award audit nobody has classified. Both used to
link to routes that answer 404 (the copy's agreement and alt-test, the unclassified run's
follow-up estimates).

The loop store holds 48 of the sample's 72 items (loop_store.py's ``small_sample``): its
pages carry the same 50 kinds of link as a loop over the whole sample (paths with their ids
and query names compared, 2026-12-04); the whole sample's item browser has a third page
this one does not, the second page is crawled on both. Each figure the crawl computes (a
page, its ``?fresh=1``, the API's JSON and report) takes about half as long."""

from __future__ import annotations

import html
import re
import time
import uuid
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest
from flask.testing import FlaskClient

from judge.store.engine import make_engine
from server import create_app
from server.auth import create_key
from server.usecases import audits
from tests.server.dashboard.helpers import Key, sign_in
from tests.server.dashboard.loop_store import AWARD, Loop, _audit_responder, copy_loop
from tests.support.factories import make_settings
from tests.support.stub_openai import StubServer

HREF = re.compile(r'href="([^"]+)"')
SKIP = ("/logout", "/dashboard/static/")
"""Not pages: signing out ends the crawl's session; static files are checked elsewhere."""
MOST = 600
"""Pages the crawl follows at most (the loop store has 88 distinct links)."""


@dataclass(frozen=True)
class Crawl:
    client: FlaskClient
    key: Key
    loop: Loop
    unclassified: int


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory, loop_template: Loop) -> Iterator[Crawl]:
    loop = copy_loop(loop_template, tmp_path_factory.mktemp("links"))
    url = f"sqlite:///{loop.path}"
    engine = make_engine(url)
    with StubServer(responder=_audit_responder) as stub:
        settings = make_settings(stub.base_url, url)
        unclassified = audits.run_audit(engine, settings, "award", AWARD, max_tokens=50)
    settings = make_settings("http://127.0.0.1:9/v1", url)  # nothing calls a model now
    app = create_app({"SETTINGS": settings, "TESTING": True, "SECRET_KEY": "test-secret"})
    name = f"member-{uuid.uuid4().hex[:8]}"
    key = Key(name, create_key(engine, name, "member")[1])
    client = app.test_client()
    assert sign_in(client, key.raw).status_code == 302
    yield Crawl(client, key, loop, unclassified.run_id)
    engine.dispose()


def _links(page: str) -> list[str]:
    out = []
    for href in HREF.findall(page):
        link = html.unescape(href)
        parts = urlsplit(link)
        if parts.scheme or parts.netloc or not link.startswith("/") or link.startswith(SKIP):
            continue
        out.append(parts._replace(fragment="").geturl())
    return out


def test_no_link_of_the_dashboard_is_a_404(crawl: Crawl) -> None:
    seen: dict[str, int] = {}
    linked_from: dict[str, str] = {}
    queue = deque(["/"])
    took: dict[str, float] = {}
    while queue and len(seen) < MOST:
        path = queue.popleft()
        if path in seen:
            continue
        api = path.startswith("/api/")
        start = time.perf_counter()
        reply = crawl.client.get(path, headers=crawl.key.header if api else {})
        took[path] = time.perf_counter() - start
        seen[path] = reply.status_code
        if not api and reply.status_code == 200 and "text/html" in reply.content_type:
            for link in _links(reply.text):
                if link not in seen:
                    linked_from.setdefault(link, path)
                    queue.append(link)
        reply.close()
    assert len(seen) < MOST, "the crawl stopped before it had seen every link"
    # The pages the issue found dead links on were reached.
    run, copy = crawl.loop.judge_run_id, crawl.loop.copy_judge_run_id
    for reached in (f"/audits/{crawl.unclassified}", f"/judge-runs/{copy}/agreement"):
        assert any(p.split("?")[0] == reached for p in seen), reached
    assert any(p.startswith(f"/api/v1/judge-runs/{run}/alt-test") for p in seen)
    assert any(
        p.startswith(f"/api/v1/audit-runs/{crawl.loop.audit_run_id}/estimates") for p in seen
    )
    dead = {
        p: f"{code}, linked from {linked_from.get(p)}" for p, code in seen.items() if code >= 400
    }
    assert not dead
    slow = sorted(took.items(), key=lambda kv: -kv[1])[:8]
    print(len(seen), "links;", [(p, round(t, 1)) for p, t in slow])


def test_the_routes_no_longer_linked_are_404s(crawl: Crawl) -> None:
    """The other way round: the routes the pages used to link answer 404 on this store, so a
    crawl that met such a link would have failed."""
    copy = crawl.loop.copy_judge_run_id
    # The queries the agreement page's links carried (its default options).
    for path in (
        f"/api/v1/audit-runs/{crawl.unclassified}/estimates",
        f"/api/v1/judge-runs/{copy}/agreement?n_bootstrap=200&seed=0&human_score=mean",
        f"/api/v1/judge-runs/{copy}/alt-test?epsilon=expert",
    ):
        reply = crawl.client.get(path, headers=crawl.key.header)
        assert reply.status_code == 404, (path, reply.text)
        reply.close()
