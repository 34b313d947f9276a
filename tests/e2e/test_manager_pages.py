"""The manager's pages in headless Chromium (Debian's ``chromium`` and ``chromium-driver``, driven by Selenium).

A person's path: start a spider on *Spiders*, see it on *Jobs*, submit a crawl on *Submit* (the rule checked first),
watch the *Stats* chart move and the crawl's progress on *Crawls*, stop the spider on *Jobs*. The browser and the
screenshots: :mod:`tests.plugins.browser`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from deploy.demo_rules import DEMO_LIST_RULE
from deploy.procs import wait_for
from tests.e2e.test_manager_api import ManagerProcess
from tests.plugins.browser import alert_open, shot
from tests.plugins.services import Processes

pytestmark = pytest.mark.e2e
WAIT = 90


def test_start_submit_watch_and_stop_from_the_pages(fleet: Any, procs: Processes, tmp_path: Path,
                                                     browser: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    fleet.start(redis_monitor=True)
    manager = ManagerProcess(procs, fleet.env, tmp_path / "manager").start()
    find = browser.find_element

    # Spiders: start a list spider on this host
    browser.get(f"{manager.url}/spiders")
    Select(find(By.ID, "spider")).select_by_value("list")
    assert [o.get_attribute("value") for o in Select(find(By.ID, "host")).options] == [f"node-{manager.port}"] \
        or find(By.ID, "host").get_attribute("value")
    shot(browser, "1-spiders")
    find(By.ID, "start").click()
    wait_for(lambda: "/jobs" in browser.current_url, 30, "the Jobs page after Start")
    message = find(By.ID, "message").text
    assert message.startswith("started list-")
    job = message.split()[1]
    fleet.wait_workers_registered(1, timeout=WAIT)
    browser.get(f"{manager.url}/jobs")
    assert find(By.CSS_SELECTOR, f"#running button.stop[data-job='{job}']")
    shot(browser, "2-jobs-running")

    # Submit: a bad rule is refused by the check; the demo's list rule is accepted
    browser.get(f"{manager.url}/submit")
    find(By.ID, "url").send_keys(fleet.url("news.fleet.test", "/world/"))
    Select(find(By.ID, "spider_type")).select_by_value("list")
    find(By.ID, "crawlid").send_keys("pages-news")
    rule = find(By.ID, "rule")
    rule.send_keys('{"first_page_xpath": {"list_from": "//["}}')
    find(By.ID, "check-rule").click()
    wait_for(lambda: "error" in find(By.ID, "rule-check").get_attribute("class"), 30, "the rule check's verdict")
    assert "$.rule" in find(By.ID, "rule-check").text
    rule.clear()
    browser.execute_script("arguments[0].value = arguments[1]", rule, json.dumps(DEMO_LIST_RULE, indent=1))
    find(By.ID, "check-rule").click()
    wait_for(lambda: find(By.ID, "rule-check").text == "valid", 30, "the rule checked valid")
    shot(browser, "3-submit-checked")
    find(By.ID, "send").click()
    wait_for(lambda: browser.find_elements(By.ID, "answer"), 60, "the Kafka monitor's answer")
    assert "accepted" in find(By.ID, "answer").text, find(By.ID, "answer").text
    shot(browser, "4-submit-accepted")

    # Stats: the pages-per-minute chart gets a point above zero while the crawl runs
    browser.get(f"{manager.url}/stats")

    def chart_moved() -> bool:
        rows = browser.execute_script("return window.crawlfleetCharts && window.crawlfleetCharts.pages.rows")
        return bool(rows) and len(rows[0]) >= 3 and any(v for row in rows[1:] for v in row if v)

    wait_for(chart_moved, WAIT, "pages per minute above zero on the Stats chart")
    wait_for(lambda: find(By.CSS_SELECTOR, f"#workers tr[data-job='{job}']"), 30, "the worker in the table")
    names = browser.execute_script("return window.crawlfleetCharts.pages.names")
    assert names and all(re.fullmatch(r"\S+ ([0-9]{3}|error)", name) for name in names), names  # statuses only
    for chart in ("chart-pages", "chart-queues"):  # a colour per series, and the latest values without hovering
        markers = browser.execute_script(
            "return [...document.querySelectorAll(arguments[0])].map(m => getComputedStyle(m).borderColor)",
            f"#{chart} .u-legend .u-series:not(:first-child) .u-marker")
        assert markers and len(set(markers)) == len(markers), (chart, markers)
        values = [e.text for e in browser.find_elements(By.CSS_SELECTOR,
                                                        f"#{chart} .u-legend .u-series:not(:first-child) .u-value")]
        assert values and "--" not in values, (chart, values)
    shot(browser, "5-stats")

    fleet.wait_finished(["pages-news"], WAIT)
    browser.get(f"{manager.url}/crawls?crawl=pages-news")
    row = find(By.CSS_SELECTOR, "#crawls tr[data-crawl='pages-news']")
    assert "finished" in row.text and "method" not in row.text
    assert len(browser.find_elements(By.CSS_SELECTOR, "#items tbody tr")) > 1
    shot(browser, "6-crawls")

    # Jobs: Stop the spider; it finishes (SIGTERM: it hands its tasks back) with exit status 0
    browser.get(f"{manager.url}/jobs")
    find(By.CSS_SELECTOR, f"button.stop[data-job='{job}']").click()
    wait_for(lambda: alert_open(browser), 10, "the confirmation")
    browser.switch_to.alert.accept()
    wait_for(lambda: "stopping" in find(By.ID, "message").text, 30, "the stop message")

    def finished() -> bool:
        browser.get(f"{manager.url}/jobs")
        return bool(browser.find_elements(By.XPATH, f"//tbody[@id='finished']/tr[td[3]='{job}']"))

    wait_for(finished, WAIT, "the job among the finished ones", interval=1)
    assert "exit 0" in find(By.XPATH, f"//tbody[@id='finished']/tr[td[3]='{job}']").text
    shot(browser, "7-jobs-finished")

