"""A real ``fairjudge serve`` (gunicorn and its job worker, whose warmer computes pages ahead)
over a copy of the small loop store (60 judgments a run, three raters; the store's size is
not what is checked, and each warm computes every statistic of the run's pages again): after
each write path that is not a job (``fairjudge ratings import``, ``POST /api/v1/ratings``, a
CLI ``fairjudge judge`` making a new run), the written run's pages are brought up to date by
the worker, and the first load of each, in a web worker that has not computed them, is
served from kept figures (its note says "kept since then") with the new rows counted.

Pages are loaded over HTTP, signed in with a session cookie as a browser is; Chromium is not
needed for what is checked here (which figures a page was served from). A campaign pull
needs Label Studio and is not a path here (its hook is the same watch of the store).
"""

from __future__ import annotations

import http.cookiejar
import json
import re
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, col, select

from judge.config import Settings, load_settings
from judge.store.engine import make_engine
from judge.store.tables import Item, Judgment
from server.usecases.dashboard import default_pages, page_key, run_version
from server.usecases.figures import read, signing_key, version_text
from tests.server.dashboard.loop_store import Loop, copy_loop
from tests.support.factories import FAIRJUDGE, write_config
from tests.support.live import LiveServer
from tests.support.stub_openai import StubServer

WAIT_S = 240.0
COMPUTED = re.compile(r'<p class="note computed" id="computed">(.*?)</p>', re.S)


@dataclass(frozen=True)
class Serving:
    url: str
    key: str
    config: Path
    settings: Settings
    db_url: str
    loop: Loop
    opener: Any
    log: Path

    def page(self, path: str) -> str:
        with self.opener.open(self.url + path, timeout=120) as reply:
            assert reply.status == 200 and "/login" not in reply.url, reply.url
            return str(reply.read().decode())

    def post(self, path: str, body: dict[str, Any]) -> Any:
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as reply:
            return json.load(reply)


def _fairjudge(config: Path, *args: str) -> str:
    done = subprocess.run(
        [*FAIRJUDGE, "--config", str(config), *args], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _signed_in(url: str, key: str) -> Any:
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    login = opener.open(url + "/login", timeout=30).read().decode()
    token = re.search(r'name="csrf" value="([^"]+)"', login)
    assert token is not None
    form = urllib.parse.urlencode({"csrf": token.group(1), "key": key}).encode()
    opener.open(url + "/login", data=form, timeout=30).read()
    return opener


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory, loop_template: Loop) -> Iterator[Serving]:
    folder = tmp_path_factory.mktemp("fresh-serve")
    loop = copy_loop(loop_template, folder)
    db_url = f"sqlite:///{loop.path}"
    with StubServer() as stub:
        config = write_config(
            folder / "fairjudge.toml", stub.base_url, db_url, server={"warm_figures": True}
        )
        with LiveServer(config, workers=1, extra=("--host", "127.0.0.1")) as server:
            _until_watched(server.log)
            settings = load_settings(config)
            key = server.admin_key
            yield Serving(
                server.base, key, config, settings, db_url, loop, _signed_in(server.base, key),
                server.log,
            )  # fmt: skip


def _until_watched(log: Path) -> None:
    """Wait until a process watches the store, and has taken its first look: the first look
    takes the store as it finds it (a run with nothing kept is computed when a page of it is
    first opened, not ahead), so a write the tests make before it would not count as one
    (server/usecases/warming.py, ``Warmer._changed``). The job worker starts beside the web
    worker, and on a loaded machine its first look came after the first write."""
    deadline = time.monotonic() + 120.0
    while "watches the store for writes" not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, "no process took the store's watch within 120 s"
        time.sleep(0.2)
    time.sleep(1.0)  # its first look follows the election in the same pass


def _kept_now(s: Serving, run: int) -> bool:
    """Whether the run's three dashboard pages are kept at the run's version now."""
    engine = make_engine(s.db_url)
    try:
        with Session(engine) as session:
            version = version_text(run_version(session, run), s.settings)
            sign = signing_key(s.settings)
            return all(
                read(session, page_key(p, run, o), version, sign) is not None
                for p, o in default_pages(s.settings)[:3]
            )
    finally:
        engine.dispose()


def _until_kept(s: Serving, run: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while not _kept_now(s, run):
        assert time.monotonic() < deadline, f"judge run {run}'s pages were not brought up to date"
        time.sleep(0.3)


def _rows(s: Serving, rater: str, n: int) -> list[dict[str, Any]]:
    engine = make_engine(s.db_url)
    with Session(engine) as session:
        found = session.exec(
            select(Item.key, Judgment.rubric)
            .join(Item, col(Item.id) == col(Judgment.item_id))
            .where(col(Judgment.judge_run_id) == s.loop.judge_run_id)
            .order_by(col(Judgment.id))
            .limit(n)
        ).all()
    engine.dispose()
    return [{"item_id": k, "rubric": r, "rater": rater, "score": 2} for k, r in found]


def _served_kept(s: Serving, run: int) -> dict[str, str]:
    """Each dashboard page of the run, first load: its 'computed' note."""
    notes = {}
    for suffix in ("", "/agreement", "/checks"):
        found = COMPUTED.search(s.page(f"/judge-runs/{run}{suffix}"))
        assert found is not None, suffix
        notes[suffix or "/"] = found.group(1)
    return notes


def test_pages_are_kept_fresh_after_each_write_path(serving: Serving) -> None:
    s = serving
    run = s.loop.judge_run_id
    # 1. `fairjudge ratings import` of 3 ratings by a new rater.
    csv = Path(s.config).parent / "late.csv"
    rows = _rows(s, "late-cli", 3)
    csv.write_text(
        "item_id,rubric,rater,score\n"
        + "".join(f"{r['item_id']},{r['rubric']},{r['rater']},{r['score']}\n" for r in rows),
        encoding="utf-8",
    )
    _fairjudge(s.config, "ratings", "import", str(csv), "--run", str(s.loop.generation_run_id))
    _until_kept(s, run)
    notes = _served_kept(s, run)
    assert all("kept since then" in n for n in notes.values()), notes
    # The agreement page counts the new rater: the loop's three raters and this one.
    assert "late-cli" in s.page(f"/judge-runs/{run}/agreement")

    # 2. The API's POST /ratings: 3 more by another rater.
    body = {"generation_run": s.loop.generation_run_id, "rows": _rows(s, "late-api", 3)}
    assert s.post("/api/v1/ratings", body)["added"] == 3
    _until_kept(s, run)
    assert all("kept since then" in n for n in _served_kept(s, run).values())
    assert "late-api" in s.page(f"/judge-runs/{run}/agreement")

    # 3. A CLI `judge` making a new run (another prompt variant): a run the server never saw.
    made = json.loads(
        _fairjudge(
            s.config, "judge", str(s.loop.generation_run_id), "--prompt-variant", "cot", "--json"
        )
    )
    new = int(made["run_id"])
    assert new != run
    _until_kept(s, new)
    assert all("kept since then" in n for n in _served_kept(s, new).values())


def _loaded(s: Serving, path: str) -> str:
    """The page's text, or "" while it is being computed (202)."""
    with s.opener.open(s.url + path, timeout=120) as reply:
        return "" if reply.status == 202 else str(reply.read().decode())


def _pids(log: str, pattern: str) -> set[int]:
    return {int(p) for p in re.findall(pattern, log)}


def test_the_web_process_never_computes_figures_and_one_process_watches(serving: Serving) -> None:
    s = serving
    run = s.loop.judge_run_id
    before = s.log.read_text(errors="replace")
    rows = _rows(s, "late-pid", 3)
    csv = Path(s.config).parent / "late-pid.csv"
    csv.write_text(
        "item_id,rubric,rater,score\n"
        + "".join(f"{r['item_id']},{r['rubric']},{r['rater']},{r['score']}\n" for r in rows),
        encoding="utf-8",
    )
    _fairjudge(s.config, "ratings", "import", str(csv), "--run", str(s.loop.generation_run_id))
    # At once after the write, a page with options no warmer computes ahead (a seed of its
    # own): the web worker must have it computed for the request, elsewhere.
    deadline = time.monotonic() + WAIT_S
    while "late-pid" not in _loaded(s, f"/judge-runs/{run}/agreement?seed=7"):
        assert time.monotonic() < deadline, "the page with seed=7 was never computed"
        time.sleep(0.5)
    _until_kept(s, run)  # the warm process brought the default pages up to date
    log = s.log.read_text(errors="replace")
    web = _pids(log, r"Booting worker with pid: (\d+)")
    job_worker = _pids(log, r"job worker pid (\d+)")
    on_request = _pids(log[len(before) :], r"computed off the request in [\d.]+ s \(pid (\d+)\)")
    ahead = _pids(log[len(before) :], r"computed ahead \(pid (\d+)\)")
    assert web and job_worker, log[-2000:]
    # The request's computation ran in a process of its own: neither gunicorn's worker
    # (whose request threads would wait behind it for the GIL) nor the job worker.
    assert on_request and not on_request & web and not on_request & job_worker, log[-3000:]
    # Computing ahead after the import ran in the job worker, never in a web worker.
    assert ahead and ahead <= job_worker, log[-3000:]
    # One process watches the store (the figures-watch lease): the job worker.
    assert _pids(log, r"process (\d+) watches the store") <= job_worker, log[-3000:]
