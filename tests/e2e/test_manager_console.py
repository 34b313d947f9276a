"""The operator's console in headless Chromium: a crawl watched live without a reload (its page count rises on the
page), its export downloaded from its page (JSON lines and CSV) and compared with MongoDB, the fleet view, a job's
log followed, a site's rate edited on *Sites* and seen in ZooKeeper; no JavaScript error in the console on any page.
Screenshots go to ``test-artifacts/manager/console-*.png``, the downloaded exports beside them."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from deploy.demo_rules import DEMO_LIST_RULE
from deploy.procs import wait_for
from messaging.siteconfig import Rate, SitePaths, read_site
from tests.e2e.test_manager_api import ManagerProcess
from tests.e2e.test_manager_pages import WAIT
from tests.plugins.browser import ARTIFACTS, alert_open, console_errors, downloaded, shot
from tests.plugins.services import Processes

pytestmark = pytest.mark.e2e
SLOW = Rate(2, 1)  # two pages a second on the demo site: the crawl lasts long enough to be watched


def test_watch_a_crawl_export_it_follow_a_log_and_edit_a_site(fleet: Any, procs: Processes, tmp_path: Path,
                                                              browser: Any, downloads: Path) -> None:
    from selenium.webdriver.common.by import By

    fleet.start(redis_monitor=True, rate=SLOW)
    manager = ManagerProcess(procs, fleet.env, tmp_path / "manager").start()
    find = browser.find_element
    errors: list[str] = []
    job = manager.post("schedule.json", {"project": "crawlfleet", "spider": "list", "jobid": "console-list"}).json()
    assert job["status"] == "ok", job
    fleet.wait_workers_registered(1, timeout=WAIT)

    # a crawl, watched on its own page: the page count rises without a reload
    sent = manager.post("api/crawl", json={"userid": "op", "crawlid": "watched", "spider_type": "list",
                                           "url": fleet.url("news.fleet.test", "/world/"), "rule": DEMO_LIST_RULE})
    assert sent.json()["status"] == "accepted", sent.text
    browser.get(f"{manager.url}/crawls/watched")
    browser.execute_script("window.notReloaded = true")
    first = int(find(By.ID, "crawl-pages").text)

    def risen() -> bool:
        return int(find(By.ID, "crawl-pages").text) > first

    wait_for(risen, WAIT, "the page count to rise on the open crawl page", interval=0.5)
    assert browser.execute_script("return window.notReloaded === true"), "the page was reloaded"
    wait_for(lambda: int(find(By.ID, "crawl-pages").text) >= first + 3, WAIT, "more pages", interval=0.5)
    assert browser.execute_script("return window.notReloaded === true")
    assert browser.find_elements(By.ID, "stop-crawl")  # still running: it can be stopped (with a confirmation)
    wait_for(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#items tbody td.url")) >= 2, WAIT,
             "stored items in the item browser, without a reload", interval=0.5)
    wait_for(lambda: browser.execute_script("return window.crawlfleetProgress.rows[2].slice(-1)[0] || 0") >= 2, 30,
             "the progress chart's total")
    points, rows = browser.execute_script("return [JSON.parse(document.getElementById('progress-data').textContent),"
                                          " window.crawlfleetProgress.rows]")
    if points[-1]["partial"]:  # the current minute: drawn apart, never as a full minute's dip
        assert rows[1][-1] is None and rows[3][-1] == points[-1]["items"], rows
    else:
        assert rows[1][-1] == points[-1]["items"] and set(rows[3]) == {None}, rows
    assert browser.execute_script("return window.notReloaded === true")
    shot(browser, "console-1-crawl-live")
    errors += console_errors(browser)

    # its export, downloaded from its page once it finished, holds what MongoDB holds (JSON lines and CSV)
    wait_for(lambda: find(By.ID, "crawl-state").text == "finished", WAIT * 2, "the crawl finished, on its page",
             interval=0.5)
    assert browser.execute_script("return window.notReloaded === true")
    stored = sorted((str(doc["_id"]), doc["url"]) for doc in fleet.cf.mongo()["watched"].find({}, {"url": 1}))
    assert len(stored) >= 3 and int(find(By.ID, "crawl-items").text) == len(stored)
    for format in ("jsonl", "csv"):
        link = find(By.ID, f"export-{format}")
        assert link.get_attribute("href") == f"{manager.url}/api/crawls/watched/export?format={format}"
        link.click()
        path = wait_for(lambda format=format: downloaded(downloads, f"watched.{format}"), 30,
                        f"the {format} export downloaded", interval=0.2)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, ARTIFACTS / f"console-export-watched.{format}")
        text = path.read_text("utf-8-sig")
        if format == "jsonl":
            rows = [json.loads(line) for line in text.splitlines()]
        else:
            rows = list(csv.DictReader(io.StringIO(text, newline="")))
        assert sorted((row["_id"], row["url"]) for row in rows) == stored, format  # same items, same count
        assert all(row["crawlid"] == "watched" for row in rows)
    shot(browser, "console-1b-crawl-exported")
    errors += console_errors(browser)

    # the fleet: the manager's worker, alive, with its host and usage
    browser.get(f"{manager.url}/fleet")
    row = find(By.CSS_SELECTOR, "#workers tr[data-job='console-list']")
    assert "list" in row.text and "s ago" in row.text
    assert "m0" in find(By.ID, "leader").text
    wait_for(lambda: "MiB" in find(By.CSS_SELECTOR, "#workers tr[data-job='console-list']").text, 30,
             "the worker's memory (its first report)", interval=0.5)
    shot(browser, "console-2-fleet")
    errors += console_errors(browser)

    # the job's log: tailed, then followed (a probe line appended to the file shows up), filtered
    browser.get(f"{manager.url}/logview/job/console-list")
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#log .line"), 30, "the log's tail")
    log = manager.base / "logs" / "crawlfleet" / "list" / "console-list.log"
    with log.open("a") as out:
        out.write("2026-11-26 12:00:00 [probe] ERROR: followed by the browser\n")
    wait_for(lambda: "followed by the browser" in find(By.ID, "log").text, 30, "the appended line", interval=0.5)
    find(By.ID, "log-search").send_keys("followed by the browser")
    shown = [line for line in browser.find_elements(By.CSS_SELECTOR, "#log .line") if line.is_displayed()]
    assert [line.text for line in shown] == ["2026-11-26 12:00:00 [probe] ERROR: followed by the browser"]
    shot(browser, "console-3-log")
    errors += console_errors(browser)

    # Sites: the crawled site's rate, edited on the page, is in ZooKeeper
    browser.get(f"{manager.url}/sites")  # the whole list: after the edit it is still the whole list
    form = find(By.CSS_SELECTOR, "tr[data-domain='news.fleet.test'] form.rate-form")
    hits, window = form.find_element(By.NAME, "hits"), form.find_element(By.NAME, "window")
    hits.clear()
    hits.send_keys("7")
    window.clear()
    window.send_keys("10")
    form.find_element(By.CSS_SELECTOR, "button.set-rate").click()
    wait_for(lambda: browser.find_elements(By.ID, "message"), 60, "the answer to the rate change")
    assert "news.fleet.test: rate set; it applies 7 per 10 s (one every 1.42857 s)" in find(By.ID, "message").text, \
        find(By.ID, "message").text  # what applies now, not a bare "ok"
    assert "q=" not in browser.current_url and find(By.ID, "q").get_attribute("value") == ""  # not filtered
    config = read_site(fleet.cf.zk(), SitePaths(fleet.cf.settings.zk_root), "news.fleet.test")
    assert (config.rate, config.window) == (7, 10.0)
    wait_for(lambda: "7 per 10 s" in find(By.CSS_SELECTOR, "tr[data-domain='news.fleet.test'] td.rate").text, 30,
             "the new rate on the page")
    shot(browser, "console-4-sites")
    errors += console_errors(browser)

    # Jobs (scrapyd's table) and Stop with its confirmation
    browser.get(f"{manager.url}/jobs")
    find(By.CSS_SELECTOR, "button.stop[data-job='console-list']").click()
    wait_for(lambda: alert_open(browser), 10, "the confirmation")
    browser.switch_to.alert.dismiss()  # cancelled: nothing happens
    assert manager.state("console-list") == "running"
    shot(browser, "console-5-jobs")
    errors += console_errors(browser)
    browser.get(f"{manager.url}/no-such-page")
    assert "Not found" in find(By.TAG_NAME, "h1").text
    assert not errors, errors
