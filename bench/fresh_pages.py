"""First and second loads of every page after each write path, on the 10,000-judgment store
rated by 3 people (bench/dashboard.py builds it), with a real ``fairjudge serve`` and its job
worker, whose warmer computes pages ahead (server/usecases/figures.py).

Write paths, one after another: ``fairjudge ratings import`` of 30 ratings (a new rater) into
the big run; ``POST /api/v1/ratings`` of 30 more (another rater); a CLI ``fairjudge judge``
of a small second run (18 answers imported); a judge job queued over the API on that run with
another prompt variant. A campaign pull needs Label Studio and is not timed here
(bench/labelstudio.py times pulls).

After each write, each page of the written run and of the big run is loaded twice over HTTP
(signed in, the body read whole) at once (``at_once``: before the warmer caught up, a page
answers within its bound with the run's older kept figures under a banner, an API route with
them marked ``X-Figures-Stale: true``, "stale", or the page that reloads itself or a 202,
"computing"); then ``behind_s``, the seconds until every page of the
written run is kept at the run's version (read from the store), and the same loads again
(``loads``, "fresh"). ``first_ms`` and ``second_ms`` each time; a first load under a second
both times is the target.

``FAIRJUDGE_BENCH_JUDGMENTS`` shrinks the store for a quick try (default 10,000).
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from sqlmodel import Session, select

from bench import dashboard as store_bench
from bench import wire
from judge.store.engine import make_engine
from judge.store.tables import Item, Judgment
from server.usecases.dashboard import default_pages, page_key, run_version
from server.usecases.figures import read, signing_key, version_text
from tests.support.factories import FAIRJUDGE, SAMPLE, write_config
from tests.support.live import LiveServer

BEHIND_MAX_S = 900.0


def _fairjudge(config: Path, *args: str) -> Any:
    done = subprocess.run(
        [*FAIRJUDGE, "--config", str(config), *args], check=True, capture_output=True, text=True
    )
    return done.stdout


class Client:
    """A signed-in browser without a browser: the session cookie, and the key for the API."""

    def __init__(self, base: str, key: str) -> None:
        self.base, self.key = base, key
        jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        page = self.opener.open(base + "/login", timeout=60).read().decode()
        token = re.search(r'name="csrf" value="([^"]+)"', page)
        if token is None:
            raise RuntimeError("the login page has no form token")
        form = urllib.parse.urlencode({"csrf": token.group(1), "key": key}).encode()
        self.opener.open(base + "/login", data=form, timeout=60).read()

    def get(self, path: str) -> tuple[float, int, str]:
        """Milliseconds to the whole body, the status, and what the body was: "stale" (kept
        figures of an older version: under the banner, or the API's ``X-Figures-Stale:
        true``), "computing" (the page that reloads itself, or the API's 202) or "fresh"."""
        request = urllib.request.Request(self.base + path)
        if path.startswith("/api/"):
            request.add_header("Authorization", f"Bearer {self.key}")
        start = time.perf_counter()
        body, marked = b"", ""
        try:
            with self.opener.open(request, timeout=600) as reply:
                body = reply.read()
                status, marked = reply.status, reply.headers.get("X-Figures-Stale", "")
        except urllib.error.HTTPError as exc:
            status = exc.code
        took = (time.perf_counter() - start) * 1000
        if "/login" in path or status == 302:
            raise RuntimeError(f"{path} was not served signed in")
        stale = marked == "true" or b'id="stale"' in body
        kind = "computing" if status == 202 else "stale" if stale else "fresh"
        return took, status, kind

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            self.base + path,
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
        )
        with self.opener.open(request, timeout=600) as reply:
            found: dict[str, Any] = json.loads(reply.read())
        return found


def _pages(run: int) -> dict[str, str]:
    return {
        "judge run": f"/judge-runs/{run}",
        "agreement": f"/judge-runs/{run}/agreement",
        "judge's checks": f"/judge-runs/{run}/checks",
        "API report.json": f"/api/v1/judge-runs/{run}/report.json",
        "API report.html": f"/api/v1/judge-runs/{run}/report.html",
        "API agreement": f"/api/v1/judge-runs/{run}/agreement",
        "API diagnostics.json": f"/api/v1/judge-runs/{run}/diagnostics.json",
    }


def _behind(db_url: str, config_settings: Any, run: int) -> float:
    """Seconds until every page of ``run`` is kept at its version now (or BEHIND_MAX_S)."""
    engine = make_engine(db_url)
    sign = signing_key(config_settings)
    start = time.monotonic()
    try:
        while time.monotonic() - start < BEHIND_MAX_S:
            with Session(engine) as session:
                version = version_text(run_version(session, run), config_settings)
                missing = [
                    p
                    for p, o in default_pages(config_settings)
                    if p != "agreement-json" or _rated(session, run)
                    if read(session, page_key(p, run, o), version, sign) is None
                ]
            if not missing:
                return round(time.monotonic() - start, 1)
            time.sleep(0.25)
    finally:
        engine.dispose()
    return BEHIND_MAX_S


def _rated(session: Session, run: int) -> bool:
    from judge.store.tables import HumanRating, JudgeRun

    jrun = session.get(JudgeRun, run)
    return (
        jrun is not None
        and session.exec(
            select(HumanRating.id).where(HumanRating.generation_run_id == jrun.generation_run_id)
        ).first()
        is not None
    )


def _ratings(db_url: str, run: int, rater: str, n: int = 30) -> list[dict[str, Any]]:
    engine = make_engine(db_url)
    with Session(engine) as session:
        rows = session.exec(
            select(Item.key, Judgment.rubric, Judgment.score)
            .join(Item, Item.id == Judgment.item_id)  # type: ignore[arg-type]
            .where(Judgment.judge_run_id == run)
            .limit(n)
        ).all()
    engine.dispose()
    return [
        {"item_id": k, "rubric": r, "rater": rater, "score": min(5, (s or 3) + 1)}
        for k, r, s in rows
    ]


def _loads(client: Client, runs: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for run in runs:
        for name, path in _pages(run).items():
            first, status, kind = client.get(path)
            second, _, second_kind = client.get(path)
            out[f"run {run}: {name}"] = {
                "first_ms": round(first, 1),
                "second_ms": round(second, 1),
                "status": status,
                "first": kind,
                "second": second_kind,
            }
    return out


def bench_fresh_pages(tmp: Path) -> dict[str, Any]:
    """``behind_s`` and first/second loads of every page after each write path."""
    from judge.config import load_settings

    store_bench.N_JUDGMENTS = int(os.environ.get("FAIRJUDGE_BENCH_JUDGMENTS", "10000"))
    folder = tmp / "fresh_pages"
    folder.mkdir(parents=True, exist_ok=True)
    db_url, gen, run = store_bench.build_store(folder)
    stub = wire.Stub(0.0)
    config = write_config(
        folder / "fairjudge.toml", stub.url, db_url, server={"warm_figures": True}
    )
    settings = load_settings(config)
    # The small second run's answers: the sample's S1 items (18), imported as answered.
    small = folder / "small.jsonl"
    lines = [json.loads(x) for x in SAMPLE.open(encoding="utf-8")][:18]
    small.write_text("".join(json.dumps(i) + "\n" for i in lines), encoding="utf-8")
    answers = folder / "small_answers.jsonl"
    answers.write_text(
        "".join(json.dumps({"item_id": i["id"], "part": "answer", "text": "An answer."}) + "\n"
                for i in lines),
        encoding="utf-8",
    )  # fmt: skip
    _fairjudge(config, "dataset", "import", str(small), "--name", "small")
    imported = json.loads(
        _fairjudge(config, "responses", "import", str(answers), "--dataset", "small",
                   "--model", "bench", "--json")
    )  # fmt: skip
    small_gen = int(imported["generation_run_id"])
    results: dict[str, Any] = {}
    try:
        with LiveServer(config, workers=1, start_s=120.0) as server:
            client = Client(server.base, server.admin_key)
            # The big run's pages computed once to begin with, as after the job that judged it
            # (the store is built without jobs): the seconds each page took from the rows.
            warmed = _fairjudge(config, "dashboard", "warm", str(run), "--json")
            results["start"] = {"computed_ahead_s": json.loads(warmed)[str(run)]}
            csv = folder / "ratings.csv"
            rows = _ratings(db_url, run, "bench-cli")
            csv.write_text(
                "item_id,rubric,rater,score\n"
                + "".join(
                    f"{r['item_id']},{r['rubric']},{r['rater']},{r['score']}\n" for r in rows
                ),
                encoding="utf-8",
            )
            writes: list[tuple[str, Any]] = [
                ("ratings import", lambda: (_fairjudge(config, "ratings", "import", str(csv),
                                                       "--run", str(gen)), run)),
                ("API post of ratings", lambda: (client.post("/api/v1/ratings", {
                    "generation_run": gen, "rows": _ratings(db_url, run, "bench-api")}), run)),
                ("CLI judge", lambda: (None, json.loads(_fairjudge(
                    config, "judge", str(small_gen), "--json"))["run_id"])),
                ("judge job over the API", lambda: (None, _job(client, db_url, small_gen))),
            ]  # fmt: skip
            for name, write in writes:
                started = time.perf_counter()
                _, written = write()
                took = round(time.perf_counter() - started, 1)
                pages = list(dict.fromkeys([int(written), run]))
                # At once after the write, before the warmer caught up: each page answers within
                # its bound, stale (the banner) or computing where nothing is kept at its version.
                at_once = _loads(client, pages)
                behind = _behind(db_url, settings, int(written))
                loads = _loads(client, pages)
                results[name] = {"write_s": took, "run": written, "at_once": at_once,
                                 "behind_s": behind, "loads": loads}  # fmt: skip
                worst_now = max(v["first_ms"] for v in at_once.values())
                worst = max(v["first_ms"] for v in loads.values())
                print(f"fresh_pages {name}: worst first load at once {worst_now} ms, behind "
                      f"{behind} s, worst first load after {worst} ms", flush=True)  # fmt: skip
    finally:
        stub.stop()
    return {
        "judgments": store_bench.N_JUDGMENTS,
        "raters": len(store_bench.RATERS),
        "writes": results,
        "target": "first load of every page under 1,000 ms, at once after the write (stale "
        "or computing) and once behind_s has passed (fresh)",
    }


def _job(client: Client, db_url: str, gen: int) -> int:
    """Queue a judge job over the API (prompt variant cot: a run of its own); its run."""
    job = client.post(
        "/api/v1/jobs",
        {"kind": "judge", "params": {"generation_run_id": gen, "prompt_variant": "cot"}},
    )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        request = urllib.request.Request(
            f"{client.base}/api/v1/jobs/{job['id']}",
            headers={"Authorization": f"Bearer {client.key}"},
        )
        with client.opener.open(request, timeout=60) as reply:
            found = json.loads(reply.read())
        if found["status"] in ("finished", "failed", "cancelled"):
            if found["status"] != "finished":
                raise RuntimeError(f"the judge job ended {found['status']}: {found.get('error')}")
            return int(found["result"]["judge_run_id"])
        time.sleep(0.2)
    raise RuntimeError("the judge job did not end")


if __name__ == "__main__":
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        result = bench_fresh_pages(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(folder))
    print(json.dumps(result, indent=2))
