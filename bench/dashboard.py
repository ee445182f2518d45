"""Dashboard page loads on a 10,000-judgment run rated by 3 people, in a real headless
Chromium against a real ``fairjudge serve`` (one gunicorn worker, no job worker).

Set-up (not timed): the bundled sample's 72 items repeated (each copy's texts marked with its
number) until their rubrics make exactly 10,000 judgments (6,658 items: an S2 item has three
rubrics, the others one), answers imported as produced elsewhere, judged through the
scripted stub (no latency, concurrency 32), and three raters' seeded scores for every judged
item and rubric (30,000 ratings) imported as a batch.

Then, as the worker of a judge job does when the job ends (``[server] warm_figures``), the
run's pages are computed ahead and kept in the store (``fairjudge dashboard warm RUN``: the
store here is built without jobs); the seconds each took are reported (``computed_ahead_s``:
what a first load would cost with nothing kept).

Timed: each page opened ``LOADS`` times in Chromium, read from the browser's Navigation
Timing (``performance.getEntriesByType('navigation')``): time to first byte (responseStart)
and full load (loadEventEnd), both from the navigation's start. The first load of a page
(``cold_*``) is the web worker's first: its process has just started and holds nothing in
memory, so a run's pages are read from the store (server/usecases/figures.py) and the others
computed; later loads reuse what the worker keeps in memory while the store is unchanged
(server/kept/cache.py) and are reported apart (``warm_*``: median and worst).
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from sqlmodel import Session, func, select

from bench import wire
from judge.data.datasets import import_items
from judge.store.engine import make_engine, session_scope
from judge.store.tables import HumanRating, Item, Judgment
from server import usecases
from server.usecases.ratings import import_rating_rows
from tests.support.factories import FAIRJUDGE, SAMPLE, make_settings, write_config
from tests.support.live import LiveServer

N_JUDGMENTS = 10_000
RATERS = ("rater-a", "rater-b", "rater-c")
RUBRICS = {"S1": 1, "S2": 3, "S3": 1, "S4": 1}
"""Rubrics each stage's items are judged with (fairmonitor): judgments per item."""
LOADS = 5
DATASET = "dashboard_bench"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
TIMING = """
const n = performance.getEntriesByType('navigation')[0];
return n && n.loadEventEnd > 0
  ? {ttfb: n.responseStart - n.startTime, load: n.loadEventEnd - n.startTime,
     bytes: n.transferSize}
  : null;
"""


def _items(folder: Path) -> tuple[Path, Path]:
    """Items whose rubrics make N_JUDGMENTS judgments, and one answer per part of each."""
    templates = [json.loads(line) for line in SAMPLE.open(encoding="utf-8")]
    items, answers, judgments, copy = [], [], 0, 0
    while judgments < N_JUDGMENTS:
        for t in templates:
            n = RUBRICS[t["stage"]]
            if judgments + n > N_JUDGMENTS:
                continue
            judgments += n
            item = {**t, "id": f"{t['id']}-c{copy}"}
            for field in ("question", "question_a", "question_b", "story_a", "story_b"):
                if field in item:
                    item[field] += f" (copy {copy})"
            items.append(item)
            parts = ("A", "B") if t["stage"] in ("S2", "S3") else ("answer",)
            answers += [
                {"item_id": item["id"], "part": p, "text": f"Answer {p} to {item['id']}."}
                for p in parts
            ]
        copy += 1
    paths = folder / "items.jsonl", folder / "answers.jsonl"
    paths[0].write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    paths[1].write_text("".join(json.dumps(a) + "\n" for a in answers), encoding="utf-8")
    return paths


def build_store(folder: Path) -> tuple[str, int, int]:
    """The store (its URL), its generation run and judge run: see the module."""
    db_url = f"sqlite:///{folder / 'dashboard.db'}"
    items, answers = _items(folder)
    engine = make_engine(db_url)
    stub = wire.Stub(0.0)
    try:
        settings = make_settings(stub.url, db_url, concurrency=32)
        with session_scope(engine) as session:
            import_items(session, items, DATASET)
        imported = usecases.import_responses(engine, settings, answers, DATASET, model="bench")
        judged = usecases.judge(
            engine, settings, usecases.JudgeRequest(generation_run_id=imported.generation_run_id)
        )
    finally:
        stub.stop()
    rng = random.Random(30)
    with Session(engine) as session:
        keys = dict(session.exec(select(Item.id, Item.key)).all())
        rows = [
            {
                "item_id": keys[j.item_id],
                "rubric": j.rubric,
                "rater": rater,
                "score": min(5, max(1, (j.score or 3) + rng.choice((-1, 0, 0, 1)))),
            }
            for j in session.exec(select(Judgment).where(Judgment.judge_run_id == judged.run_id))
            for rater in RATERS
        ]
        import_rating_rows(session, settings, imported.generation_run_id, rows)
        session.commit()
        n = session.exec(select(func.count()).where(Judgment.judge_run_id == judged.run_id)).one()
        rated = session.exec(select(func.count(func.distinct(HumanRating.rater)))).one()
    engine.dispose()
    if (n, rated) != (N_JUDGMENTS, len(RATERS)):
        raise RuntimeError(f"the bench store has {n} judgments and {rated} raters")
    return db_url, imported.generation_run_id, judged.run_id


def _driver() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument("--window-size=1400,1000")
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(600)
    return driver


def _load(driver: Any, url: str) -> dict[str, float]:
    driver.get(url)
    deadline = time.monotonic() + 30
    while (found := driver.execute_script(TIMING)) is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"no navigation timing for {url}")
        time.sleep(0.05)
    if "/login" in driver.current_url:  # a timing of the login page would be no timing
        raise RuntimeError(f"{url} sent the browser to the login page")
    return {k: float(v) for k, v in found.items()}


def _pages(gen: int, run: int) -> dict[str, str]:
    return {
        "overview": "/",
        "datasets": "/datasets",
        "dataset coverage": f"/datasets/{DATASET}",
        "judge run": f"/judge-runs/{run}",
        "judge run, items page 100": f"/judge-runs/{run}?page=100",
        "judge run, unscored items": f"/judge-runs/{run}?flag=unscored",
        "agreement": f"/judge-runs/{run}/agreement",
        "judge's checks": f"/judge-runs/{run}/checks",
        "campaigns": "/campaigns",
        "audits": "/audits",
        "jobs": "/jobs",
        "job form": f"/jobs/new?kind=judge&generation_run_id={gen}",
    }


def bench_dashboard(tmp: Path) -> dict[str, Any]:
    """Cold, median and worst time to first byte and full load of every page (ms)."""
    folder = tmp / "dashboard"
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    db_url, gen, run = build_store(folder)
    setup_s = time.perf_counter() - started
    config = write_config(folder / "fairjudge.toml", "http://127.0.0.1:9/v1", db_url)
    warmed = subprocess.run(
        [*FAIRJUDGE, "--config", str(config), "dashboard", "warm", str(run), "--json"],
        check=True,
        capture_output=True,
        text=True,
    )
    computed_ahead = json.loads(warmed.stdout)[str(run)]
    print(f"dashboard: run {run}'s pages computed ahead in {computed_ahead} s", flush=True)
    driver = None
    with LiveServer(config, workers=1, extra=("--no-worker",)) as server:
        base, key = server.base, server.member_key
        try:
            driver = _driver()
            driver.get(base + "/login")
            driver.find_element("id", "key").send_keys(key)
            driver.find_element("id", "sign-in").click()
            # The click only starts the form's POST: wait for its redirect (the session cookie)
            # before the first page, or that page may cut the sign-in short.
            deadline = time.monotonic() + 30
            while "/login" in driver.current_url:
                if time.monotonic() > deadline:
                    raise RuntimeError("signing in did not leave the login page")
                time.sleep(0.05)
            pages: dict[str, Any] = {}
            for name, path in _pages(gen, run).items():
                loads = [_load(driver, base + path) for _ in range(LOADS)]
                warm = loads[1:]
                pages[name] = {
                    "path": path,
                    "cold_ttfb_ms": round(loads[0]["ttfb"], 1),
                    "cold_load_ms": round(loads[0]["load"], 1),
                    "warm_median_ttfb_ms": round(statistics.median(t["ttfb"] for t in warm), 1),
                    "warm_median_load_ms": round(statistics.median(t["load"] for t in warm), 1),
                    "warm_worst_ttfb_ms": round(max(t["ttfb"] for t in warm), 1),
                    "warm_worst_load_ms": round(max(t["load"] for t in warm), 1),
                    "kb": round(loads[-1]["bytes"] / 1024, 1),
                }
                print(
                    f"dashboard {name}: cold {pages[name]['cold_load_ms']} ms, warm median "
                    f"{pages[name]['warm_median_load_ms']} ms",
                    flush=True,
                )
        finally:
            if driver is not None:
                driver.quit()
    warm_loads = [p["warm_median_load_ms"] for p in pages.values()]
    return {
        "judgments": N_JUDGMENTS,
        "raters": len(RATERS),
        "loads_per_page": LOADS,
        "gunicorn_workers": 1,
        "setup_s": round(setup_s, 1),
        "computed_ahead_s": computed_ahead,
        "pages": pages,
        "warm_median_load_ms_worst_page": max(warm_loads),
        "target": "every page under 1,000 ms",
    }


if __name__ == "__main__":
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        result = bench_dashboard(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(folder))
    print(json.dumps(result, indent=2))
