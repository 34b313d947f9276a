"""ScrapydWeb 1.6.0 (from PyPI, in its own virtualenv) against a manager with basic authentication: its Jobs
dashboard, Node Reports, a job's Stats and its Items, read for a job that crawled the demo web; its Deploy page
(an egg uploaded, sent to ``addversion.json``) and its Run Spider page (``schedule.json`` with arguments and
``_workers``), which start a fleet crawl of an ordinary Scrapy project (issue 35).

One fleet, one manager, one crawl and one ScrapydWeb for the module: the manager runs the list worker (scheduled
through scrapyd's API, as ScrapydWeb's *Run Spider* does), a crawl of the demo news site goes through Kafka, and
ScrapydWeb reads the manager as it would read a scrapyd node.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from deploy.demo_rules import DEMO_LIST_RULE
from deploy.procs import wait_for
from messaging import keys
from tests.e2e.test_manager_api import ManagerProcess
from tests.plugins.scrapy_project import build_egg
from tests.plugins.scrapydweb import ScrapydWeb
from tests.plugins.services import Processes
from tests.plugins.shop_project import write_shop
from tests.plugins.shop_site import CATEGORIES, PAGES, PER_PAGE, ShopSite

pytestmark = pytest.mark.e2e
AUTH = ("ops", "s3cret-pass")
JOB = "sw-list-1"
CRAWL = "sw-news"
WAIT = 120


@dataclass
class Setup:
    manager: ManagerProcess
    web: ScrapydWeb
    stored: list[dict[str, Any]]  # the job's items in MongoDB


@pytest.fixture(scope="module")
def setup(fleet_module: Any, procs_module: Processes, scrapydweb_venv: Path) -> Setup:
    fleet = fleet_module
    fleet.start(masters=1)
    manager = ManagerProcess(procs_module, fleet.env, procs_module.log_dir / "manager",
                             CRAWLFLEET_MANAGER_AUTH=":".join(AUTH))
    manager.auth = AUTH
    manager.start()
    scheduled = manager.post("schedule.json", {"project": "crawlfleet", "spider": "list", "jobid": JOB}).json()
    assert scheduled["status"] == "ok", scheduled
    fleet.wait_workers_registered(1, timeout=WAIT)
    fleet.submit({"userid": "sw", "crawlid": CRAWL, "spider_type": "list", "rule": DEMO_LIST_RULE,
                  "url": fleet.url("news.fleet.test", "/world/")})
    fleet.wait_finished([CRAWL], WAIT)
    stored = fleet.items(CRAWL)
    assert stored and {item["job"] for item in stored} == {JOB}  # every item names the job that fetched it
    wait_for(lambda: fleet.redis.sismember(keys.worker_crawls(JOB), CRAWL), 30, "the job's crawls registered")
    web = ScrapydWeb(scrapydweb_venv, procs_module, procs_module.log_dir / "scrapydweb",
                     f"{AUTH[0]}:{AUTH[1]}@127.0.0.1:{manager.port}").start()
    return Setup(manager, web, stored)


def test_the_jobs_dashboard_lists_the_running_job(setup: Setup) -> None:
    for style in ("database", "classic"):
        page = setup.web.get("/1/jobs/", params={"style": style}).text
        assert "Oops" not in page and "Something went wrong" not in page, page[:3000]
        assert JOB in page, style
    classic = setup.web.get("/1/jobs/", params={"style": "classic"}).text
    # its links: the log (ScrapydWeb's Stats and Log views) and the items, on the manager
    assert f"/1/log/stats/crawlfleet/list/{JOB}/" in classic
    assert f"127.0.0.1:{setup.manager.port}/items/crawlfleet/list/{JOB}.jl" in classic
    jobs = setup.web.get("/1/jobs/", params={"listjobs": "True"}).json()  # what ScrapydWeb parsed of /jobs
    (mine,) = [job for job in jobs if job["job"] == JOB]
    assert mine["project"] == "crawlfleet" and mine["spider"] == "list" and int(mine["pid"]) > 0
    assert mine["start"] and not mine["finish"]


def test_node_reports_show_the_job(setup: Setup) -> None:
    page = setup.web.get("/1/nodereports/")
    assert page.status_code == 200 and "Oops" not in page.text, page.text[:3000]
    assert f"job: '{JOB}'," in page.text and "spider: 'list'," in page.text  # a row of its (Vue) table
    started = re.search(rf"job: '{JOB}',.*?start: '([^']*)'", page.text, re.S)
    assert started and started.group(1)  # a running job: started, not finished


def test_a_jobs_stats_are_logparsers_with_the_fleets_figures(setup: Setup) -> None:
    page = setup.web.get(f"/1/log/stats/crawlfleet/list/{JOB}/").text
    assert "Oops" not in page, page[:3000]
    assert "LogParser v0.8.4" in page  # ScrapydWeb used the manager's JSON, not a parse of the whole log
    own = requests.get(f"{setup.manager.url}/logs/crawlfleet/list/{JOB}.json", auth=AUTH, timeout=60).json()
    assert own["items"] == len(setup.stored) and own["pages"] >= len(setup.stored)
    assert re.search(rf"\b{own['items']}\b", page) and re.search(rf"\b{own['pages']}\b", page)
    liststats = setup.web.get(f"/1/api/liststats/crawlfleet/{JOB}/").json()  # the Servers page's "List Stats"
    assert liststats["status"] == "ok" and liststats["details"]["items"] == len(setup.stored), liststats


def test_a_jobs_items_are_its_documents_in_mongodb(setup: Setup) -> None:
    page = setup.web.get("/1/items/crawlfleet/list/").text
    assert "Oops" not in page, page[:3000]
    assert f"{JOB}.jl" in page and f"{len(setup.stored)} items" in page
    served = requests.get(f"{setup.manager.url}/items/crawlfleet/list/{JOB}.jl", auth=AUTH, timeout=60)
    lines = [json.loads(line) for line in served.text.splitlines()]
    assert sorted(item["url"] for item in lines) == sorted(item["url"] for item in setup.stored)
    assert all(item["job"] == JOB and item["crawlid"] == CRAWL for item in lines)
    assert requests.get(f"{setup.manager.url}/items/", timeout=30).status_code == 401  # behind the manager's auth


def test_the_deploy_and_run_pages_start_a_fleet_crawl_of_an_ordinary_project(
        setup: Setup, fleet_module: Any, shop_site: ShopSite, tmp_path: Path) -> None:
    egg = build_egg(write_shop(tmp_path / "shop", setup.manager.url), tmp_path / "shop.egg")
    deployed = setup.web.post("/1/deploy/upload/", data={"project": "shop", "version": "r1"},
                              files={"file": ("shop.egg", egg.read_bytes())}, allow_redirects=False)
    assert deployed.status_code == 302 and "/1/schedule/" in deployed.headers["Location"], deployed.text[:3000]
    assert setup.manager.get("listversions.json", project="shop")["versions"] == ["r1"]
    page = setup.web.get("/1/schedule/", params={"project": "shop", "version": "r1"})
    assert page.status_code == 200 and "Oops" not in page.text, page.text[:3000]

    form = {"project": "shop", "_version": "r1", "spider": "catalog", "jobid": "sw-shop",
            "additional": f"-d base={shop_site.url} -d _workers=1"}
    checked = setup.web.post("/1/schedule/check/", data=form).json()
    ran = setup.web.post("/1/schedule/run/", data={"filename": checked["filename"]}, allow_redirects=False)
    assert ran.status_code == 302 and "/1/jobs/" in ran.headers["Location"], ran.text[:3000]
    fleet_module.wait_finished(["sw-shop"], WAIT)
    products = CATEGORIES * PAGES * PER_PAGE
    assert len(fleet_module.items("sw-shop")) == products
    setup.manager.wait_state("sw-shop", "finished", timeout=60)
    jobs = setup.web.get("/1/jobs/", params={"listjobs": "True"}).json()
    assert any(job["job"] == "sw-shop" and job["project"] == "shop" for job in jobs), jobs
