"""The dashboard in a real headless Chromium (Debian's chromium and chromedriver, driven by
selenium) against a real ``fairjudge serve`` (gunicorn and its job worker) on a free port,
with the scripted stub as the model: sign in with a key from ``fairjudge keys create``, read
the pages' numbers against the JSON API and the store, start a judge job from the form and
watch the page follow it to the end without a reload.

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

from judge.data.datasets import import_items
from judge.store.engine import make_engine, session_scope
from judge.store.tables import Judgment
from server import usecases
from tests.server.dashboard.helpers import S1_ITEMS
from tests.support.factories import FAIRJUDGE, SAMPLE, free_port, make_settings, write_config
from tests.support.stub_openai import StubServer

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WAIT_S = 60.0


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
    generation_run_id: int
    judge_run_id: int

    def api(self, path: str) -> Any:
        """GET an API path with the key, as a script would."""
        request = urllib.request.Request(
            self.url + path, headers={"Authorization": f"Bearer {self.key}"}
        )
        with urllib.request.urlopen(request, timeout=10) as reply:
            return json.load(reply)


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/api/v1/health", timeout=1) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A store with the 18 S1 items answered and judged, and `fairjudge serve` over it."""
    _need_browser()
    folder = tmp_path_factory.mktemp("browser")
    db_url = f"sqlite:///{folder / 'fairjudge.db'}"
    # 50 ms a reply and one call at a time: a job of 36 judgments takes about 2 s, long
    # enough for the page to show it running.
    with StubServer(latency=0.05) as stub:
        config = write_config(folder / "fairjudge.toml", stub.base_url, db_url)
        engine = make_engine(db_url)
        with session_scope(engine) as session:
            import_items(session, SAMPLE, "sample")
        settings = make_settings(stub.base_url, db_url)
        gen = usecases.generate(engine, settings, "sample", limit=S1_ITEMS)
        jud = usecases.judge(engine, settings, gen.run_id)
        engine.dispose()
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
            yield Served(url, key, db_url, folder / "serve.log", gen.run_id, jud.run_id)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            log.close()


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


def test_the_dashboard_in_a_real_browser(browser: Any, served: Served) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver, url = browser, served.url

    # Signing in: a stranger lands on the login page; a wrong key is refused.
    driver.get(url + "/")
    assert driver.current_url.startswith(url + "/login")
    _sign_in(driver, url, "fj_wrong-key-for-this-test")
    assert "unknown API key" in _text(driver, "#login-error")
    _sign_in(driver, url, served.key)
    _until(driver, lambda d: d.current_url == url + "/", "sign-in did not reach the overview")
    assert _text(driver, "#key-name") == "browser"
    assert served.key not in driver.page_source

    # The overview's run numbers are the API's.
    api_gen = served.api(f"/api/v1/generation-runs/{served.generation_run_id}")
    api_judge = served.api(f"/api/v1/judge-runs/{served.judge_run_id}")
    gen_row = f'tr[data-generation-run="{served.generation_run_id}"]'
    assert _text(driver, f'{gen_row} [data-k="answers"]') == str(api_gen["answers"]) == "18"
    judge_row = f'tr[data-judge-run="{served.judge_run_id}"]'
    for k in ("scored", "unscored", "status"):
        assert _text(driver, f'{judge_row} [data-k="{k}"]') == str(api_judge[k])

    # The judge run page: tables, plots the browser could decode, links to the reports.
    driver.find_element(By.CSS_SELECTOR, f"{judge_row} a").click()
    _until(driver, lambda d: "/judge-runs/" in d.current_url, "no judge run page")
    assert driver.find_elements(By.CSS_SELECTOR, "table.report-table")
    decoded = driver.execute_script(
        "const imgs = Array.from(document.images);"
        "return imgs.length > 0 && imgs.every(i => i.complete && i.naturalWidth > 0);"
    )
    assert decoded, "a score plot did not decode as an image"
    hrefs = [
        a.get_attribute("href") for a in driver.find_elements(By.CSS_SELECTOR, "#report-links a")
    ]
    assert hrefs == [
        f"{url}/api/v1/judge-runs/{served.judge_run_id}/report.{fmt}"
        for fmt in ("html", "json", "csv")
    ]

    # Start a judge job from the form and watch the page follow it, without a reload.
    driver.find_element(By.LINK_TEXT, "Start a judge job").click()
    _until(driver, lambda d: d.current_url.endswith("/jobs/new"), "no job form")
    Select(driver.find_element(By.ID, "generation_run_id")).select_by_value(
        str(served.generation_run_id)
    )
    Select(driver.find_element(By.ID, "prompt_variant")).select_by_visible_text("cot")
    samples = driver.find_element(By.ID, "samples")
    samples.clear()
    samples.send_keys("2")
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

    # The finished job: numbers as the API has them, its judge run linked, and as many
    # judgments as the store holds: 18 S1 items x 1 rubric (ICS) x 2 samples.
    api_job = served.api(f"/api/v1/jobs/{job_id}")
    assert api_job["status"] == "finished"
    assert _text(driver, '#job-status [data-k="done"]') == str(api_job["done"])
    assert _text(driver, '#job-status [data-k="total"]') == str(api_job["total"])
    run_id = api_job["result"]["judge_run_id"]
    link = driver.find_element(By.ID, "judge-run-link")
    assert link.get_attribute("href") == f"{url}/judge-runs/{run_id}"
    engine = make_engine(served.db_url)
    with Session(engine) as session:
        statuses = [
            j.status for j in session.exec(select(Judgment).where(Judgment.judge_run_id == run_id))
        ]
    engine.dispose()
    assert len(statuses) == S1_ITEMS * 2
    shown = int(_text(driver, '#job-status [data-k="scored"]')) + int(
        _text(driver, '#job-status [data-k="unscored"]')
    )
    assert shown == len(statuses)
    assert _text(driver, '#job-status [data-k="scored"]') == str(statuses.count("scored"))
    link.click()
    _until(driver, lambda d: d.current_url == f"{url}/judge-runs/{run_id}", "link broken")
    assert "cot prompt" in _text(driver, "main > p")

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
