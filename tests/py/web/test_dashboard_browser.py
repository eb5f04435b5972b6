"""The dashboard in a real browser: Debian's chromium driven by selenium through chromedriver.

One dashboard and one browser for the module. Screenshots go to .screenshots/ (git-ignored),
or to $PGQ_SCREENSHOTS: every page at 1400x900 and at 1024x768.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from conftest import admin_execute
from pgq.web.app import Config
from support.dashboard_server import Served, dead_job, serve, succeeded_jobs

SHOTS = Path(os.environ.get("PGQ_SCREENSHOTS") or Path(__file__).resolve().parents[3] / ".screenshots")
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
        c.execute("SELECT pgq.schedule('nightly', '0 3 * * *', 'report', '{\"kind\": \"daily\"}')")
        dead = dead_job(c, "email", {"to": "dead@example.com"}, error="SMTP 550 <b>mailbox</b> unavailable")
        hostile = dead_job(c, "hostile", {"html": HOSTILE}, error=HOSTILE)
        scheduled = c.execute(
            "SELECT pgq.enqueue('resize', '{\"w\": 100}', run_at => now() + interval '1 hour')"
        ).fetchone()[0]
        parent = c.execute("SELECT pgq.enqueue('resize', '{}')").fetchone()[0]
        child = c.execute(
            "SELECT pgq.enqueue('resize', '{}', depends_on => ARRAY[%s::bigint])", (parent,)
        ).fetchone()[0]
    return {"dead": dead, "hostile": hostile, "parent": parent, "child": child, "scheduled": scheduled}


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


# Whether any button or link-button of the page is cut off: narrower than its text, or
# past the right edge of the window (the settings page's Pause buttons once showed "Pa").
CLIPPED = """
return Array.from(document.querySelectorAll('main button, main a.button')).filter(function (b) {
  var r = b.getBoundingClientRect();
  return b.scrollWidth > b.clientWidth + 1 || r.right > document.documentElement.clientWidth + 1;
}).map(function (b) { return b.textContent.trim() + ' (' + b.clientWidth + '/' + b.scrollWidth + ' px)'; });
"""


def test_every_page_loads(
    server: Served, browser: webdriver.Chrome, seeded: dict[str, int], dsn: str
) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        worker = c.execute("SELECT pgq.register_worker('shots', ARRAY['email'])").fetchone()[0]
    pages = {
        "overview": ("/", "#queues-table"),
        "jobs": ("/jobs", "#jobs-table"),
        "dead": ("/jobs?status=dead", "#jobs-table"),
        "succeeded": ("/jobs?status=succeeded", "#jobs-table"),
        "workers": ("/workers", "#workers-table"),
        "worker": (f"/workers/{worker}", "#worker-facts"),
        "schedules": ("/schedules", "#schedules-table"),
        "settings": ("/settings", "#settings-table"),
        "entrypoint": ("/entrypoint?name=email", "#configure"),
        "job": (f"/jobs/{seeded['child']}", "#history"),
        "dead-job": (f"/jobs/{seeded['dead']}", "#history"),
        "confirm": ("/jobs/bulk/confirm?verb=retry&status=dead", "#confirm"),
    }
    # Every page at a laptop's and a small window's size: nothing is cut off.
    for width, height in ((1400, 900), (1024, 768)):
        browser.set_window_size(width, height)
        for name, (path, selector) in pages.items():
            browser.get(server.url + path)
            assert browser.find_elements(By.CSS_SELECTOR, selector), f"{path} has no {selector}"
            assert browser.execute_script(CLIPPED) == [], f"{path} at {width} px"
            browser.save_screenshot(str(SHOTS / f"{name}-{width}.png"))
    browser.set_window_size(1400, 1000)
    browser.get(server.url + "/favicon.ico")
    assert "<svg" in browser.page_source
    browser.get(f"{server.url}/jobs/{seeded['child']}")
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


def checked_count(driver: webdriver.Chrome) -> str:
    return driver.find_element(By.ID, "selected-count").text


def test_bulk_select_and_confirm_all(
    server: Served, browser: webdriver.Chrome, seeded: dict[str, int], dsn: str
) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        more = [dead_job(c, "email", {"n": n}) for n in range(3)]
    browser.get(server.url + "/jobs?status=dead&entrypoint=email")
    # Select two rows: the count follows; "select this page" selects every row.
    for job in more[:2]:
        browser.find_element(By.CSS_SELECTOR, f'tr[data-id="{job}"] input[name="ids"]').click()
    assert checked_count(browser) == "2 selected"
    browser.find_element(By.ID, "select-page").click()
    assert checked_count(browser) == "4 selected"
    browser.find_element(By.ID, "select-page").click()
    assert checked_count(browser) == "0 selected"
    for job in more[:2]:
        browser.find_element(By.CSS_SELECTOR, f'tr[data-id="{job}"] input[name="ids"]').click()
    browser.find_element(By.CSS_SELECTOR, "button.bulk-retry").click()
    wait_for(browser, lambda d: "re-queued 2 of 2 jobs" in d.find_element(By.ID, "flash").text)
    # All that the filter matches: a confirmation page first, that counts them.
    browser.find_element(By.ID, "cancel-all").click()
    assert "2 jobs" in browser.find_element(By.TAG_NAME, "h1").text
    browser.save_screenshot(str(SHOTS / "confirm-discard.png"))
    browser.find_element(By.ID, "confirm").click()
    wait_for(browser, lambda d: "canceled or discarded 2 of 2 jobs" in d.find_element(By.ID, "flash").text)
    with psycopg.connect(dsn) as c:
        left = c.execute("SELECT count(*) FROM pgq.jobs WHERE status = 'dead' AND entrypoint = 'email'")
        assert left.fetchone()[0] == 0
        assert (
            c.execute(
                "SELECT count(*) FROM pgq.jobs WHERE id = ANY (%s) AND status = 'queued'", (more[:2],)
            ).fetchone()[0]
            == 2
        )


def test_run_now_and_trigger_a_schedule(
    server: Served, browser: webdriver.Chrome, seeded: dict[str, int], dsn: str
) -> None:
    browser.get(f"{server.url}/jobs/{seeded['scheduled']}")
    browser.find_element(By.ID, "run-now").click()
    wait_for(browser, lambda d: "due now" in d.find_element(By.ID, "flash").text)
    assert browser.find_elements(By.ID, "run-now") == []  # due: nothing to run now
    browser.get(server.url + "/schedules")
    browser.find_element(By.CSS_SELECTOR, 'tr[data-schedule="nightly"] button.trigger').click()
    wait_for(browser, lambda d: "schedule nightly: enqueued job" in d.find_element(By.ID, "flash").text)
    with psycopg.connect(dsn) as c:
        run_at = c.execute("SELECT run_at <= now() FROM pgq.jobs WHERE id = %s", (seeded["scheduled"],))
        assert run_at.fetchone()[0] is True
        headers = c.execute("SELECT headers FROM pgq.jobs WHERE entrypoint = 'report'").fetchone()[0]
        assert headers["manual"] is True


def test_settings_edited_by_an_admin_and_refused_for_a_read_only_role(
    server: Served, browser: webdriver.Chrome, seeded: dict[str, int], dsn: str
) -> None:
    browser.get(server.url + "/entrypoint?name=email")
    field = browser.find_element(By.ID, "set-max_attempts")
    field.clear()
    field.send_keys("8")
    browser.find_element(By.ID, "save-settings").click()
    wait_for(browser, lambda d: "email: set max_attempts = 8" in d.find_element(By.ID, "flash").text)
    assert browser.find_element(By.ID, "set-max_attempts").get_attribute("value") == "8"
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT max_attempts FROM pgq.settings(ARRAY['email'])").fetchone()[0] == 8

    role = f"pgq_dash_browser_ro_{uuid.uuid4().hex[:8]}"
    admin_execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    try:
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(
                sql.SQL(
                    "GRANT USAGE ON SCHEMA pgq TO {0};"
                    " GRANT SELECT ON pgq.jobs, pgq.outcomes, pgq.workers, pgq.schedules, pgq.queues TO {0};"
                    " GRANT EXECUTE ON FUNCTION pgq.stats(interval), pgq.settings(text[]),"
                    " pgq.settings(text[], integer), pgq._queue_counts(integer) TO {0}"
                ).format(sql.Identifier(role))
            )
        with serve(Config(dsn=make_conninfo(dsn, user=role))) as ro:
            browser.get(ro.url + "/entrypoint?name=email")
            assert browser.find_elements(By.ID, "configure") == []
            assert "may not change settings" in browser.find_element(By.ID, "no-edit").text
            browser.save_screenshot(str(SHOTS / "entrypoint-read-only.png"))
            # A POST anyway (the page's own token and cookie) is refused, saying why.
            status, text = browser.execute_script(
                """
                var body = new URLSearchParams({entrypoint: "email", max_attempts: "2", back: "/",
                  csrf: document.querySelector('meta[name="csrf-token"]').content});
                return fetch("/entrypoints/configure", {method: "POST", body: body})
                  .then(function (r) { return r.text().then(function (t) { return [r.status, t]; }); });
                """
            )
            assert status == 403 and f"database role {role} may not run pgq.configure" in text
        with psycopg.connect(dsn) as c:
            assert c.execute("SELECT max_attempts FROM pgq.settings(ARRAY['email'])").fetchone()[0] == 8
    finally:
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        admin_execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
