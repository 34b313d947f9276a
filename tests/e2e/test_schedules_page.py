"""Schedules through the manager: ``/api/schedules`` (the manager's JSON envelope) and the *Schedules* page in headless
Chromium (Debian's chromium and chromium-driver): add (a bad expression refused with the reason, the form kept),
see the next firing and, once the leader fired it, the last one with a link to its crawl; pause, resume, remove."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests

from deploy.procs import wait_for
from master.schedules import ScheduleFirer
from messaging import keys
from messaging.schedules import ScheduleStore, crawl_id
from tests.e2e.test_manager_api import ManagerProcess
from tests.plugins.browser import shot
from tests.plugins.services import Processes

pytestmark = pytest.mark.e2e

REQUEST = {"url": "http://news.fleet.test/world/", "spider_type": "universal", "userid": "ops",
           "rule": {"rules": [{"allow": "/world/"}]},
           "notify": {"url": "http://hooks.test/in?token=PAGE-TOKEN-5", "on": ["finished"]}}


def test_schedules_through_the_api_and_the_page(cf: Any, procs: Processes, tmp_path: Path, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    manager = ManagerProcess(procs, cf.env, tmp_path / "manager").start()
    api = f"{manager.url}/api/schedules"

    # the API: the envelope, a refusal with its reason, an addition, one schedule, 404s
    refused = requests.post(api, json={"name": "bad", "cron": "61 * * * *", "request": REQUEST}, timeout=30)
    assert refused.status_code == 400 and refused.json()["status"] == "error"
    assert "cron expression '61 * * * *'" in refused.json()["message"] and refused.json()["node_name"]
    added = requests.post(api, json={"name": "api-daily", "cron": "0 3 * * *", "tz": "Europe/Berlin",
                                     "request": REQUEST}, timeout=30).json()
    assert added["status"] == "ok" and added["schedule"]["next"]["crawlid"].startswith("api-daily-")
    assert added["schedule"]["request"]["notify"]["url"] == "http://hooks.test/in?***"
    listed = requests.get(api, timeout=30).json()
    assert listed["status"] == "ok" and [s["name"] for s in listed["schedules"]] == ["api-daily"]
    one = requests.get(f"{api}/api-daily", timeout=30).json()["schedule"]
    assert one["tz"] == "Europe/Berlin" and one["history"] == [] and one["state"] == "active"
    assert requests.get(f"{api}/nothing", timeout=30).status_code == 404
    assert requests.post(f"{api}/api-daily/pause", timeout=30).json()["action"] == "pause"
    assert requests.get(f"{api}/api-daily", timeout=30).json()["schedule"]["state"] == "paused"
    assert requests.delete(f"{api}/api-daily", timeout=30).json()["status"] == "ok"
    assert requests.post(f"{api}/api-daily/resume", timeout=30).status_code == 404

    # the page: a bad expression is refused with the reason and the form kept; then added
    find = browser.find_element
    browser.get(f"{manager.url}/schedules")
    assert "no schedule yet" in find(By.ID, "schedules").text
    find(By.ID, "name").send_keys("nightly")
    find(By.ID, "cron").send_keys("0 3 * *")
    tz = find(By.ID, "tz")
    tz.clear()
    tz.send_keys("Europe/Berlin")
    browser.execute_script("arguments[0].value = arguments[1]", find(By.ID, "request"), json.dumps(REQUEST))
    find(By.ID, "add-schedule").click()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, ".message.error"), 30, "the refusal")
    assert "five fields" in find(By.CSS_SELECTOR, ".message.error").text
    assert find(By.ID, "name").get_attribute("value") == "nightly"  # what was typed is kept
    cron = find(By.ID, "cron")
    cron.clear()
    cron.send_keys("*/5 * * * *")
    find(By.ID, "add-schedule").click()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "tr[data-schedule='nightly']"), 30, "the new row")
    assert "schedule nightly added: next firing nightly-" in find(By.ID, "message").text
    row = find(By.CSS_SELECTOR, "tr[data-schedule='nightly']")
    store = ScheduleStore(cf.redis())
    upcoming = store.get("nightly").next_due()
    assert crawl_id("nightly", upcoming) in row.find_element(By.CSS_SELECTOR, ".next").text
    assert "CET" in row.text or "CEST" in row.text  # times in the schedule's zone
    assert "PAGE-TOKEN-5" not in browser.page_source
    shot(browser, "schedules-1-added")

    # the leader fires it (in-process here, at its due time): the page shows the last firing and links to the crawl
    redis = cf.redis()
    redis.set(keys.MASTER_EPOCH, 1)
    ScheduleFirer(redis, 1, cf.settings).round(upcoming + 1)
    browser.get(f"{manager.url}/schedules")
    last = find(By.CSS_SELECTOR, "tr[data-schedule='nightly'] .last a")
    assert last.text == crawl_id("nightly", upcoming)
    assert last.get_attribute("href").endswith(f"/crawls/{crawl_id('nightly', upcoming)}")
    shot(browser, "schedules-2-fired")

    # pause, resume, remove (its confirmation accepted)
    find(By.CSS_SELECTOR, "tr[data-schedule='nightly'] button.pause").click()
    wait_for(lambda: "paused" in find(By.CSS_SELECTOR, "tr[data-schedule='nightly']").text, 30, "paused")
    assert store.get("nightly").paused is not None
    find(By.CSS_SELECTOR, "tr[data-schedule='nightly'] button.resume").click()
    wait_for(lambda: "active" in find(By.CSS_SELECTOR, "tr[data-schedule='nightly']").text, 30, "resumed")
    find(By.CSS_SELECTOR, "tr[data-schedule='nightly'] button.stop").click()
    browser.switch_to.alert.accept()
    wait_for(lambda: not browser.find_elements(By.CSS_SELECTOR, "tr[data-schedule='nightly']"), 30, "removed")
    assert store.get("nightly") is None
