"""The *Projects* page in headless Chromium: a person deploys an egg by upload (a broken one is refused with its
reason), sees its versions and spiders, runs a spider (a fleet crawl of its 2 workers, which a master ends), deletes
the version; the home page links the project."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deploy.procs import wait_for
from tests.e2e.test_manager_api import ManagerProcess
from tests.plugins.browser import alert_open, console_errors, shot
from tests.plugins.scrapy_project import build_egg, write_project
from tests.plugins.services import Isolated, Processes

pytestmark = pytest.mark.e2e
WAIT = 90
SPIDER = """\
import scrapy


class Hello(scrapy.Spider):
    name = "hello"

    async def start(self):
        self.logger.info("hello from the uploaded egg")
        return
        yield
"""


def test_deploy_by_upload_see_run_and_delete(cf: Isolated, procs: Processes, tmp_path: Path, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    env = cf.with_env(CRAWLFLEET_FINISH_INTERVAL="0.5", CRAWLFLEET_DISPATCH_INTERVAL="0.2")
    procs.crawlfleet("master", "--id", "m0", env=env, name="master")  # a crawl's end is the leading master's word
    manager = ManagerProcess(procs, env, tmp_path / "manager").start()
    good = build_egg(write_project(tmp_path / "good", "shop", manager.url, {"spiders/hello.py": SPIDER}),
                     tmp_path / "good.egg")
    broken = build_egg(write_project(tmp_path / "broken", "shop", manager.url,
                                     {"spiders/hello.py": "import no_such_module\n"}), tmp_path / "broken.egg")
    find = browser.find_element

    def upload(egg: Path, version: str) -> None:
        browser.get(f"{manager.url}/projects")
        find(By.ID, "project").send_keys("shop")
        find(By.ID, "version").send_keys(version)
        find(By.ID, "egg").send_keys(str(egg))
        find(By.ID, "deploy").click()

    upload(broken, "0.9")
    wait_for(lambda: browser.find_elements(By.ID, "message"), 60, "the deploy's answer")
    assert "not deployed" in find(By.ID, "message").text and "No module named 'no_such_module'" in find(
        By.ID, "message").text
    assert not browser.find_elements(By.CSS_SELECTOR, "#projects tr[data-project='shop']")
    shot(browser, "projects-1-refused")

    upload(good, "1.0")
    wait_for(lambda: "/projects/shop" in browser.current_url, 60, "the project's page after Deploy")
    assert find(By.ID, "message").text == "deployed shop 1.0: 1 spiders"
    assert find(By.CSS_SELECTOR, "#versions tr[data-version='1.0']").text.startswith("1.0 (latest)")
    assert [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#spiders td")] == ["hello"]
    shot(browser, "projects-2-deployed")

    find(By.ID, "run").click()
    wait_for(lambda: "/jobs" in browser.current_url, 30, "the Jobs page after Run")
    message = find(By.ID, "message").text
    assert message.startswith("started hello-") and message.endswith("(shop 1.0)"), message
    job = message.split()[1]
    manager.wait_state(job, "finished")
    manager.wait_state(f"{job}.2", "finished")
    assert manager.finished(job)["exit_status"] == 0 and manager.finished(f"{job}.2")["exit_status"] == 0
    logs = [(manager.base / "logs" / "shop" / "hello" / f"{name}.log").read_text() for name in (job, f"{job}.2")]
    assert sum("hello from the uploaded egg" in log for log in logs) == 1  # start() once for the crawl

    browser.get(manager.url + "/")
    assert find(By.LINK_TEXT, "shop").get_attribute("href") == f"{manager.url}/projects/shop"
    browser.get(f"{manager.url}/projects/shop")
    find(By.CSS_SELECTOR, "#versions tr[data-version='1.0'] button.stop").click()
    wait_for(lambda: alert_open(browser), 10, "the confirmation")
    browser.switch_to.alert.accept()
    wait_for(lambda: browser.current_url.startswith(f"{manager.url}/projects?"), 30, "the Projects page")
    assert find(By.ID, "message").text == "deleted shop 1.0"
    assert not browser.find_elements(By.CSS_SELECTOR, "#projects tr[data-project='shop']")
    assert manager.get("listprojects.json")["projects"] == ["crawlfleet"]
    shot(browser, "projects-3-deleted")
    assert console_errors(browser) == []
