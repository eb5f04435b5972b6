"""The dashboard in a real browser: Debian's chromium driven by selenium through chromedriver.

One dashboard and one browser for the module. Screenshots go to .screenshots/ (git-ignored).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from dashboard_server import Served, dead_job, serve, succeeded_jobs
from pgq.web.app import Config

SHOTS = Path(__file__).resolve().parents[2] / ".screenshots"
HOSTILE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
WAIT = 20  # seconds a condition may take to appear (not a timing assertion)

pytestmark = pytest.mark.skipif(
    not (shutil.which("chromium") and shutil.which("chromedriver")),
    reason="needs Debian's chromium and chromium-driver (make deps installs them)",
)


@pytest.fixture
def seeded(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn, autocommit=True) as c:
        succeeded_jobs(c, "email", 20)
        c.execute(
            "SELECT pgq.enqueue_batch('email', array_fill('{\"to\": \"a@example.com\"}'::jsonb, ARRAY[30]))"
        )
        c.execute("SELECT pgq.enqueue('resize', '{\"w\": 100}', run_at => now() + interval '1 hour')")
        c.execute("SELECT pgq.schedule('nightly', '0 3 * * *', 'report', '{\"kind\": \"daily\"}')")
        dead = dead_job(c, "email", {"to": "dead@example.com"}, error="SMTP 550 <b>mailbox</b> unavailable")
        hostile = dead_job(c, "hostile", {"html": HOSTILE}, error=HOSTILE)
        parent = c.execute("SELECT pgq.enqueue('resize', '{}')").fetchone()[0]
        child = c.execute(
            "SELECT pgq.enqueue('resize', '{}', depends_on => ARRAY[%s::bigint])", (parent,)
        ).fetchone()[0]
    return {"dead": dead, "hostile": hostile, "parent": parent, "child": child}


@pytest.fixture(scope="module")
def server(dsn: str) -> Iterator[Served]:
    with serve(Config(dsn=dsn)) as served:
        yield served


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    profile = tempfile.mkdtemp(prefix="pgq-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    SHOTS.mkdir(exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_for(driver: webdriver.Chrome, condition) -> None:  # type: ignore[no-untyped-def]
    # htmx swaps the overview's table every 2 s: an element found may go stale at once.
    WebDriverWait(driver, WAIT, ignored_exceptions=[StaleElementReferenceException]).until(condition)


def cell(driver: webdriver.Chrome, table: str, entrypoint: str, column: int) -> str:
    return driver.find_element(
        By.CSS_SELECTOR, f'#{table} tr[data-entrypoint="{entrypoint}"] td:nth-child({column})'
    ).text


def test_overview_updates_live_and_draws_charts(
    server: Served, browser: webdriver.Chrome, seeded: dict[str, int], dsn: str
) -> None:
    browser.get(server.url + "/")
    wait_for(browser, lambda d: cell(d, "queues-table", "email", 2) == "30")
    wait_for(browser, lambda d: cell(d, "queues-table", "resize", 3) == "1")  # scheduled
    wait_for(browser, lambda d: cell(d, "queues-table", "resize", 4) == "1")  # waiting
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("SELECT pgq.enqueue_batch('email', array_fill('{}'::jsonb, ARRAY[5]))")
    # htmx polls the table: the new jobs appear without a reload.
    wait_for(browser, lambda d: cell(d, "queues-table", "email", 2) == "35")
    wait_for(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".chart canvas")) == 4)
    browser.save_screenshot(str(SHOTS / "overview.png"))


def test_every_page_loads(server: Served, browser: webdriver.Chrome, seeded: dict[str, int]) -> None:
    pages = {
        "jobs": ("/jobs", "#jobs-table"),
        "succeeded": ("/jobs?status=succeeded", "#jobs-table"),
        "workers": ("/workers", "#workers-table"),
        "schedules": ("/schedules", "#schedules-table"),
        "settings": ("/settings", "#settings-table"),
        "job": (f"/jobs/{seeded['child']}", "#history"),
    }
    for name, (path, selector) in pages.items():
        browser.get(server.url + path)
        assert browser.find_elements(By.CSS_SELECTOR, selector), f"{path} has no {selector}"
        browser.save_screenshot(str(SHOTS / f"{name}.png"))
    # The job page shows the job it waits for.
    assert str(seeded["parent"]) in browser.find_element(By.TAG_NAME, "main").text
    browser.get(server.url + "/jobs?status=succeeded")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#jobs-table tbody tr")) == 20
    browser.get(server.url + "/schedules")
    assert "nightly" in browser.find_element(By.ID, "schedules-table").text


def test_retry_a_dead_job_from_its_page(
    server: Served, browser: webdriver.Chrome, seeded: dict[str, int]
) -> None:
    browser.get(server.url + "/jobs?status=dead")
    browser.find_element(By.LINK_TEXT, str(seeded["dead"])).click()
    assert browser.find_element(By.ID, "job-status").text == "dead"
    assert "SMTP 550 <b>mailbox</b> unavailable" in browser.find_element(By.ID, "history").text
    browser.find_element(By.ID, "retry").click()
    wait_for(browser, lambda d: d.find_element(By.ID, "job-status").text == "queued")
    assert "re-queued" in browser.find_element(By.ID, "flash").text
    browser.save_screenshot(str(SHOTS / "retried.png"))


def test_pause_and_resume_from_the_settings_page(
    server: Served, browser: webdriver.Chrome, seeded: dict[str, int], dsn: str
) -> None:
    browser.get(server.url + "/settings")
    browser.find_element(By.CSS_SELECTOR, 'tr[data-entrypoint="email"] button.pause').click()
    wait_for(browser, lambda d: cell(d, "settings-table", "email", 2) == "paused")
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT paused FROM pgq.settings(ARRAY['email'])").fetchone()[0] is True
    browser.find_element(By.CSS_SELECTOR, 'tr[data-entrypoint="email"] button.resume').click()
    wait_for(browser, lambda d: cell(d, "settings-table", "email", 2) == "no")


def test_a_hostile_payload_stays_text(
    server: Served, browser: webdriver.Chrome, seeded: dict[str, int]
) -> None:
    browser.get(f"{server.url}/jobs/{seeded['hostile']}")
    assert HOSTILE.replace('"', '\\"') in browser.find_element(By.ID, "payload").text
    assert HOSTILE in browser.find_element(By.ID, "history").text
    assert browser.find_elements(By.CSS_SELECTOR, "main script, main img") == []
    assert browser.execute_script("return window.pwned === undefined")
    browser.get(f"{server.url}/jobs?status=dead&q=window.pwned")
    assert str(seeded["hostile"]) in browser.find_element(By.ID, "jobs-table").text
    assert browser.execute_script("return window.pwned === undefined")
