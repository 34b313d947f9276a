"""An ordinary Scrapy project on the fleet, as its users run it (issue 35): written here, deployed with
``scrapyd-deploy``, scheduled through scrapyd's ``schedule.json`` on 2 workers, against a real site on loopback
(:mod:`tests.plugins.shop_site`, whose access log counts every request), beside plain ``scrapy crawl`` of the same
spiders.

The project (:mod:`tests.plugins.shop_project`) has a ``CrawlSpider`` with rules, a ``Spider`` with callbacks by name,
``cb_kwargs``, ``meta``, an errback that sees a 404, a ``FormRequest`` POST and a login cookie, and a pipeline of its
own. One fleet (a Kafka monitor, a master), one manager and one deployment for the module:

- both spiders on 2 workers each yield exactly the items plain ``scrapy crawl`` yields; the project's pipeline ran on
  both workers of the crawl (their Scrapy stats, summed on the crawl's page); no page was fetched more often than
  plain Scrapy fetched it; each job is finished in ``listjobs.json`` when its crawl is;
- kill -9 of one worker in the middle of a paced crawl loses and doubles nothing.
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass
from typing import Any

import pytest
import requests

from deploy.procs import wait_for
from messaging import keys
from messaging.siteconfig import Rate
from tests.e2e.test_manager_api import ManagerProcess
from tests.plugins.fleet import Fleet
from tests.plugins.scrapy_project import deploy
from tests.plugins.services import Processes
from tests.plugins.shop_project import NAME, canonical, plain_crawl, write_shop
from tests.plugins.shop_site import ShopSite

pytestmark = pytest.mark.e2e
WAIT = 180
SPIDERS = ("catalog", "account")


@dataclass
class Setup:
    fleet: Fleet
    manager: ManagerProcess
    site: ShopSite
    plain: dict[str, list[dict[str, Any]]]  # spider -> plain Scrapy's items
    plain_hits: dict[tuple[str, str], int]  # what plain Scrapy fetched, both spiders


@pytest.fixture(scope="module")
def setup(fleet_module: Fleet, procs_module: Processes, shop_site: ShopSite,
          tmp_path_factory: pytest.TempPathFactory) -> Setup:
    fleet = fleet_module
    fleet.start(masters=1)
    manager = ManagerProcess(procs_module, fleet.env, tmp_path_factory.mktemp("manager"),
                             CRAWLFLEET_MANAGER_BUILTIN_PROJECT="0").start()
    root = write_shop(tmp_path_factory.mktemp("project") / NAME, manager.url)
    assert deploy(root, "1.0")["spiders"] == len(SPIDERS)
    shop_site.reset()
    out = tmp_path_factory.mktemp("plain")
    plain = {spider: plain_crawl(root, spider, shop_site.url, out / f"{spider}.jsonl") for spider in SPIDERS}
    return Setup(fleet, manager, shop_site, plain, dict(shop_site.counts()))


def schedule(setup: Setup, spider: str, job: str) -> None:
    answer = setup.manager.post("schedule.json", {"project": NAME, "spider": spider, "jobid": job,
                                                  "_workers": "2", "base": setup.site.url}).json()
    assert answer == {"node_name": answer["node_name"], "status": "ok", "jobid": job}, answer


def test_both_spiders_on_two_workers_yield_what_plain_scrapy_yields(setup: Setup) -> None:
    setup.site.reset()
    jobs = {spider: f"own-{spider}" for spider in SPIDERS}
    for spider, job in jobs.items():
        schedule(setup, spider, job)
    setup.fleet.wait_finished(list(jobs.values()), WAIT)
    hits = setup.site.counts()
    for spider, job in jobs.items():
        stored = setup.fleet.items(job)
        assert canonical(stored) == canonical(setup.plain[spider]), spider
        setup.manager.wait_state(job, "finished", timeout=60)  # the job ends with its crawl
        setup.manager.wait_state(f"{job}.2", "finished", timeout=60)
    # every page at most as often as plain Scrapy fetched it (dedup by the project's fingerprints, start once)
    more = {request: n for request, n in hits.items() if n > setup.plain_hits.get(request, 0)}
    assert not more, more
    assert hits == setup.plain_hits  # and nothing plain Scrapy fetched was left out

    # the project's own pipeline ran on both workers, and the crawl's page sums their Scrapy stats
    per_worker = {job.decode(): json.loads(stats) for job, stats in
                  setup.fleet.redis.hgetall(keys.crawl_scrapy_stats(jobs["catalog"])).items()}
    assert set(per_worker) == {"own-catalog", "own-catalog.2"}
    tallies = [stats.get("shop/pipeline/items", 0) for stats in per_worker.values()]
    assert all(tallies) and sum(tallies) == len(setup.plain["catalog"]), tallies
    page = requests.get(f"{setup.manager.url}/crawls/{jobs['catalog']}", timeout=30).text
    assert "summed over 2 workers" in page and f"<th>shop/pipeline/items</th><td>{sum(tallies)}</td>" in page


def test_kill_9_of_a_worker_mid_crawl_loses_and_doubles_nothing(setup: Setup) -> None:
    fleet, job = setup.fleet, "own-catalog-kill"
    fleet.set_default_rate(Rate(240, 60))  # 4 pages a second: a crawl that lasts long enough to kill a worker in
    try:
        schedule(setup, "catalog", job)
        second = f"{job}.2"
        wait_for(lambda: fleet.mongo[job].count_documents({"job": second}) >= 3, WAIT,
                 "the second worker storing items")
        (running,) = [r for r in setup.manager.get("listjobs.json", project=NAME)["running"] if r["id"] == second]
        os.kill(int(running["pid"]), signal.SIGKILL)  # no goodbye: its leases come back when its heartbeat expires
        event = fleet.wait_finished([job], WAIT)[job]
    finally:
        fleet.set_default_rate()
    stored = fleet.items(job)
    assert canonical(stored) == canonical(setup.plain["catalog"])  # nothing lost, nothing twice
    assert event["items"] == len(setup.plain["catalog"]) and event["failures"] == {}
    setup.manager.wait_state(job, "finished", timeout=60)
    assert setup.manager.finished(second)["exit_status"] == -signal.SIGKILL
