"""The dashboard in a real headless Chromium (Debian's chromium and chromedriver, driven by
selenium) against a real ``fairjudge serve`` (gunicorn and its job worker) on a free port,
over the small loop store (tests/server/dashboard/loop_store.py: 48 of the sample's items,
every stage, judged in both orders, three raters, a counterfactual copy, an award audit),
with the scripted stub as the model: sign in with a key from ``fairjudge keys create``, open
every page and read its numbers against the JSON API asked with the same key, check that a
member's key is refused the admin pages, start a judge job from the form and watch the page
follow it to the end without a reload. Each page is saved as a screenshot under
``FAIRJUDGE_TEST_SCREENSHOTS`` (a folder) when it is set, else under the test session's
temporary folder (its path is printed).

Selenium is given the driver's path, so Selenium Manager never looks for (or downloads) a
browser or driver. Without chromium the test is skipped on a developer's machine and fails in
CI (``CI=true``), where .ci/run installs it: a skip there would hide a broken setup.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from judge.store.engine import make_engine
from judge.store.tables import Item, Judgment
from tests.server.dashboard.loop_store import UNSCORED_ITEMS, Loop, copy_loop
from tests.support.factories import FAIRJUDGE, free_port, write_config
from tests.support.stub_openai import StubServer

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WAIT_S = 60.0
SCREENSHOTS_ENV = "FAIRJUDGE_TEST_SCREENSHOTS"
BOOTSTRAP = 20
"""Resamples the agreement page and the API are asked for (the default 1,000 takes
seconds on the sample; the numbers compared do not depend on it)."""


def _need_browser() -> None:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if not missing:
        return
    why = f"{' and '.join(missing)} missing: apt-get install chromium chromium-driver"
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"{why}; CI must run the browser test (.ci/run installs them)")
    pytest.skip(why)


@dataclass(frozen=True)
class Served:
    url: str
    key: str
    db_url: str
    log: Path  # what `fairjudge serve` wrote (gunicorn's access log included)
    loop: Loop
    screenshots: Path

    @property
    def generation_run_id(self) -> int:
        return self.loop.generation_run_id

    @property
    def judge_run_id(self) -> int:
        return self.loop.judge_run_id

    def api(self, path: str) -> Any:
        """GET an API path with the key, as a script would: a 202 (figures still being
        computed, docs/server.md), or figures marked stale (``X-Figures-Stale: true``, kept
        before the latest writes), is asked again after its Retry-After (1 s for stale), for
        up to 180 s."""
        request = urllib.request.Request(
            self.url + path, headers={"Authorization": f"Bearer {self.key}"}
        )
        deadline = time.monotonic() + 180
        while True:
            with urllib.request.urlopen(request, timeout=10) as reply:
                waiting = reply.status == 202 or reply.headers.get("X-Figures-Stale") == "true"
                if not waiting or time.monotonic() > deadline:
                    return json.load(reply)
                wait = float(reply.headers.get("Retry-After") or 1)
            time.sleep(min(wait, 2.0))


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/api/v1/health", timeout=1) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, loop_template: Loop) -> Iterator[Served]:
    """A copy of the small loop store, and `fairjudge serve` over it: every page and section
    of the whole loop's, and each figure the pages and the API compute takes about half as
    long (the numbers are read against the API, whatever the store's size)."""
    _need_browser()
    folder = tmp_path_factory.mktemp("browser")
    loop = copy_loop(loop_template, folder)
    db_url = f"sqlite:///{loop.path}"
    shots = Path(os.environ.get(SCREENSHOTS_ENV) or tmp_path_factory.mktemp("screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    # 40 ms a reply and one call at a time: the judge job of the form (60 judgments) takes
    # a few seconds (as the whole loop's 108 did at 20 ms), long enough for the page to show
    # it running.
    with StubServer(latency=0.04) as stub:
        config = write_config(folder / "fairjudge.toml", stub.base_url, db_url)
        made = subprocess.run(
            [*FAIRJUDGE, "--config", str(config), "keys", "create", "--role", "member"]
            + ["--name", "browser", "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
        key = json.loads(made.stdout)["key"]
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        log = (folder / "serve.log").open("w")
        proc = subprocess.Popen(
            [*FAIRJUDGE, "--config", str(config), "serve", "--host", "127.0.0.1"]
            + ["--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its gunicorn workers and job worker stop with it
        )
        try:
            _wait(lambda: _up(url), proc, folder / "serve.log")
            yield Served(url, key, db_url, folder / "serve.log", loop, shots)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            log.close()
            print(f"\ndashboard screenshots: {shots}")


def _wait(condition: Any, proc: subprocess.Popen[str], log: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"fairjudge serve exited ({proc.returncode}):\n{log.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"fairjudge serve did not answer within {WAIT_S} s:\n{log.read_text()}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def browser(served: Served) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.selenium_manager import SeleniumManager

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument("--window-size=1400,1000")

    def no_downloads(*_: object) -> None:
        raise AssertionError("Selenium Manager was asked for a driver; it must not download one")

    # Given the driver's path, selenium skips its manager; should that change, fail loudly.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SeleniumManager, "binary_paths", no_downloads)
        driver = webdriver.Chrome(
            service=Service(executable_path=str(CHROMEDRIVER)), options=options
        )
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()


def _text(driver: Any, css: str) -> str:
    """The element's text once it is on the page, read in one script: the live parts of a
    page are swapped out every second, so an element found in one call can be gone by the
    next."""
    script = (
        "const e = document.querySelector(arguments[0]);"
        "return e === null ? null : e.innerText.trim();"
    )

    def read(d: Any) -> list[str] | None:  # a list: an empty text is found, not "not yet"
        text = d.execute_script(script, css)
        return None if text is None else [str(text)]

    found: list[str] = _until(driver, read, f"no element {css} on {driver.current_url}")
    return found[0]


def _until(driver: Any, condition: Any, message: str) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_S, poll_frequency=0.1).until(condition, message)


def _sign_in(driver: Any, url: str, key: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.ID, "key").send_keys(key)
    driver.find_element(By.ID, "sign-in").click()


def _shoot(driver: Any, served: Served, name: str) -> None:
    """Save the whole page (the window grown to its height) as NAME.png."""
    height = int(driver.execute_script("return document.body.scrollHeight"))
    driver.set_window_size(1400, min(max(height + 80, 800), 8000))
    driver.save_screenshot(str(served.screenshots / f"{name}.png"))
    driver.set_window_size(1400, 1000)


def _open(driver: Any, served: Served, path: str, name: str) -> None:
    """Open a page, check that its charts were drawn (each SVG has a size) and that a chart's
    numbers are one click away, and keep a screenshot. A judge run's page whose figures are
    still being computed (the page that reloads itself, or the kept figures under a banner:
    server/dashboard/judge_runs.py) is loaded again until it shows the figures now."""
    driver.get(served.url + path)
    deadline = time.monotonic() + 180
    while driver.find_elements("css selector", "#computing, #stale"):
        assert time.monotonic() < deadline, f"{path} was still being computed after 180 s"
        time.sleep(0.5)
        driver.get(served.url + path)
    assert driver.current_url.startswith(served.url + path.split("?")[0]), driver.current_url
    drawn = driver.execute_script(
        "return Array.from(document.querySelectorAll('svg.chart')).every("
        "s => s.getBoundingClientRect().width > 0 && s.querySelector('title') !== null);"
    )
    assert drawn, f"a chart of {path} was not drawn"
    numbers = driver.find_elements("css selector", "details.numbers > summary")
    if numbers:
        numbers[0].click()
        table = driver.find_element("css selector", "details.numbers[open] table")
        assert table.is_displayed(), f"the numbers of {path} did not open"
    _shoot(driver, served, name)


def _cell(driver: Any, table: str, row: int, column: str) -> str:
    """A cell of the table titled ``table`` (row 1 is the first under the header)."""
    script = (
        'const t = document.querySelector(`table[data-table="${arguments[0]}"]`);'
        "if (!t) return null;"
        "const head = Array.from(t.rows[0].cells).map(c => c.textContent.trim());"
        "return t.rows[arguments[1]].cells[head.indexOf(arguments[2])].textContent.trim();"
    )
    found = driver.execute_script(script, table, row, column)
    assert found is not None, f"no table {table!r} on {driver.current_url}"
    return str(found)


def test_the_dashboard_in_a_real_browser(browser: Any, served: Served) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver, url = browser, served.url
    run, audit = served.judge_run_id, served.loop.audit_run_id

    # Signing in: a stranger lands on the login page; a wrong key is refused.
    driver.get(url + "/")
    assert driver.current_url.startswith(url + "/login")
    _sign_in(driver, url, "fj_wrong-key-for-this-test")
    assert "unknown API key" in _text(driver, "#login-error")
    _sign_in(driver, url, served.key)
    _until(driver, lambda d: d.current_url == url + "/", "sign-in did not reach the overview")
    assert _text(driver, "#key-name") == "browser"
    assert served.key not in driver.page_source
    _shoot(driver, served, "01-overview")

    # The overview's run numbers are the API's.
    api_gen = served.api(f"/api/v1/generation-runs/{served.generation_run_id}")
    api_judge = served.api(f"/api/v1/judge-runs/{run}")
    gen_row = f'tr[data-generation-run="{served.generation_run_id}"]'
    assert _text(driver, f'{gen_row} [data-k="answers"]') == str(api_gen["answers"])
    judge_row = f'tr[data-judge-run="{run}"]'
    for k in ("scored", "unscored", "status"):
        assert _text(driver, f'{judge_row} [data-k="{k}"]') == str(api_judge[k])

    # A dataset's coverage: items and empty cells as the API counts them.
    _open(driver, served, "/datasets/sample", "02-dataset-coverage")
    coverage = served.api("/api/v1/datasets/sample/coverage.json")["coverage"]
    assert _text(driver, '#coverage-summary [data-k="items"]') == str(coverage["items"])
    assert _text(driver, '#coverage-summary [data-k="empty"]') == str(len(coverage["empty_cells"]))

    # The judge run: counts, the planted unscored judgments, the grid's overall S1 cell.
    driver.get(url + "/")
    driver.find_element(By.CSS_SELECTOR, f"{judge_row} a").click()
    _until(driver, lambda d: d.current_url == f"{url}/judge-runs/{run}", "no judge run page")
    _open(driver, served, f"/judge-runs/{run}", "03-judge-run")
    assert _text(driver, '#run-summary [data-k="unscored"]') == str(api_judge["unscored"])
    unscored = served.api(f"/api/v1/judgments?judge_run={run}&status=unscored")["total"]
    assert _text(driver, "#unscored-count") == str(unscored) == str(len(UNSCORED_ITEMS))
    metrics = served.api(f"/api/v1/judge-runs/{run}/metrics")["overall"]
    s1 = next(m for m in metrics if m["metric"].startswith("S1 ICS"))
    grid = "Stage metrics per factor (percent, 95 % interval, n scored)"
    rows = int(
        driver.execute_script(
            f"return document.querySelector('table[data-table=\"{grid}\"]').rows.length"
        )
    )
    last = next(
        r
        for r in range(1, rows)
        if _cell(driver, grid, r, "factor") == "all"
        and _cell(driver, grid, r, "metric") == "S1 ICS>=3"
    )
    assert _cell(driver, grid, last, "value") == f"{s1['value']:.1f}"
    assert _cell(driver, grid, last, "n scored") == str(s1["n_scored"])

    # Agreement with people: the judge's weighted kappa and n per rubric, the API's.
    _open(driver, served, f"/judge-runs/{run}/agreement?n_bootstrap={BOOTSTRAP}", "04-agreement")
    agree = served.api(f"/api/v1/judge-runs/{run}/agreement?n_bootstrap={BOOTSTRAP}")
    for rubric, entry in agree["rubrics"].items():
        (judge,) = entry["judges"]
        row = f'#rubric-summary tr[data-rubric="{rubric}"]'
        assert _text(driver, f'{row} [data-k="n"]') == str(judge["n"])
        kappa = judge["coefficients"]["kappa_quadratic"]["value"]
        assert _text(driver, f'{row} [data-k="kappa_quadratic"]') == f"{kappa:.3f}"

    # The judge's own checks: the counterfactual copy and the order, as diagnostics.json.
    _open(driver, served, f"/judge-runs/{run}/checks", "05-judge-checks")
    payload = served.api(f"/api/v1/judge-runs/{run}/diagnostics.json")["judge_diagnostics"]
    assert _text(driver, '#check-summary [data-k="counterfactual"]') == str(
        len(payload["counterfactual"])
    )
    assert _text(driver, '#check-summary [data-k="order"]') == "measured"

    # The audit: answers by status and the judge's classes of the follow-ups.
    _open(driver, served, "/audits", "06-audits")
    _open(driver, served, f"/audits/{audit}", "07-audit")
    result = served.api(f"/api/v1/audit-runs/{audit}")
    assert _text(driver, '[data-turn="main"] [data-k="parsed"]') == str(
        result["answers"]["main"]["parsed"]
    )
    for source, counts in result["followup"]["classes"].items():
        cell = f'#followup-classes tr[data-source="{source}"] [data-k="labelled"]'
        assert _text(driver, cell) == str(counts["labelled"])

    # Campaigns (none in this store: test_campaign_page.py has Label Studio's), datasets, jobs.
    _open(driver, served, "/campaigns", "08-campaigns")
    assert _text(driver, "#no-campaigns").startswith("No campaigns yet")
    _open(driver, served, "/datasets", "09-datasets")
    _open(driver, served, "/jobs", "10-jobs")

    # A member's key is refused the admin pages.
    for path in ("/admin/keys", "/admin/annotators"):
        driver.get(url + path)
        assert "Error 403" in driver.title and "only an admin key" in _text(
            driver, "#error-message"
        )
    assert not driver.find_elements(By.LINK_TEXT, "Keys")
    _shoot(driver, served, "11-admin-refused")

    # Start a judge job from the form and watch the page follow it, without a reload.
    driver.get(url + "/")
    driver.find_element(By.LINK_TEXT, "Start a job").click()
    _until(driver, lambda d: d.current_url.endswith("/jobs/new"), "no job form")
    Select(driver.find_element(By.ID, "generation_run_id")).select_by_value(
        str(served.generation_run_id)
    )
    Select(driver.find_element(By.ID, "prompt_variant")).select_by_visible_text("cot")
    _shoot(driver, served, "12-job-form")
    driver.find_element(By.ID, "start-job").click()
    _until(driver, lambda d: "/jobs/" in d.current_url and "new" not in d.current_url, "no job")
    job_id = int(driver.current_url.rsplit("/", 1)[1])
    driver.execute_script("window.fairjudgeMarker = 'same page';")
    seen: set[str] = set()

    def finished(d: Any) -> bool:
        status = _text(d, '#job-status [data-k="status"]')
        seen.add(status)
        if status in ("failed", "cancelled"):
            pytest.fail(f"the job ended {status}: {_text(d, '#job-status')}")
        return status == "finished"

    _until(driver, finished, f"job {job_id} did not finish within {WAIT_S} s")
    assert driver.execute_script("return window.fairjudgeMarker") == "same page"
    assert seen & {"queued", "running"}, "the page never showed the job before it ended"
    _shoot(driver, served, "13-job-finished")

    # The finished job: numbers as the API has them, its judge run linked, and as many
    # judgments as the store holds: one per item and rubric of the small loop (48 items: S2's
    # 6 with three rubrics, the others one: 18 + 18 + 6 + 18), counted in the store.
    api_job = served.api(f"/api/v1/jobs/{job_id}")
    assert api_job["status"] == "finished"
    assert _text(driver, '#job-status [data-k="done"]') == str(api_job["done"])
    assert _text(driver, '#job-status [data-k="total"]') == str(api_job["total"])
    new_run = api_job["result"]["judge_run_id"]
    link = driver.find_element(By.ID, "judge-run-link")
    assert link.get_attribute("href") == f"{url}/judge-runs/{new_run}"
    engine = make_engine(served.db_url)
    with Session(engine) as session:
        stages = [i.stage for i in session.exec(select(Item))]
        statuses = [
            j.status for j in session.exec(select(Judgment).where(Judgment.judge_run_id == new_run))
        ]
    engine.dispose()
    assert len(statuses) == sum(3 if s == "S2" else 1 for s in stages) == 60
    shown = int(_text(driver, '#job-status [data-k="scored"]')) + int(
        _text(driver, '#job-status [data-k="unscored"]')
    )
    assert shown == len(statuses)
    assert _text(driver, '#job-status [data-k="scored"]') == str(statuses.count("scored"))

    # Back on the overview, the job's row matches the API's listing.
    driver.find_element(By.LINK_TEXT, "Overview").click()
    job_row = f'tr[data-job="{job_id}"]'
    _until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, job_row), "job not listed")
    for k in ("status", "done", "total"):
        assert _text(driver, f'{job_row} [data-k="{k}"]') == str(api_job[k])

    # The key was pasted into the login form and sent with every API call: the server's
    # log never shows it.
    assert served.key not in served.log.read_text()

    # Signing out ends the session.
    driver.find_element(By.CSS_SELECTOR, "form.who button").click()
    _until(driver, lambda d: "/login" in d.current_url, "sign-out did not reach the login page")
    driver.get(url + "/")
    assert driver.current_url.startswith(url + "/login")
