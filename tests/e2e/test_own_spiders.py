"""One's own Scrapy project on the fleet without eggs (issue 35, scrapy-redis's way): ``scrapy crawl S`` with the
fleet's add-on in the project's ``ADDONS`` joins the fleet as a worker of that spider's crawl.

One fleet (a Kafka monitor, a master) and one shop site (:mod:`tests.plugins.shop_site`) for the module:

- a Kafka crawl request that names ``project``, ``spider`` and ``args`` begins a crawl that two ``scrapy crawl
  account`` workers, started without a crawl id, join: they log in once (a ``FormRequest`` POST whose cookie is kept
  in the crawl's jar in Redis), the order pages go to both workers and carry the session on either, ``cb_kwargs``
  and ``meta`` travel with them, the errback sees the dead link's 404; the items are exactly plain ``scrapy crawl``'s,
  every page is fetched once, the start request once although two workers ran ``start()``, and both workers end
  with the crawl;
- a spider whose requests cannot all travel (a lambda callback, an object in ``meta``): they are refused where they
  are yielded, with a message in the worker's log and a reason in the crawl's failure counts, and the rest of the
  crawl goes on;
- ``DEPTH_LIMIT`` from the crawl request's ``settings``: Scrapy's depth middleware on each worker drops what is too
  deep, and the depth stats summed over the workers are plain Scrapy's;
- a crawl paused mid-crawl keeps its workers (they hand its tasks back and wait; one that joins meanwhile joins the
  paused crawl), and once resumed it ends with every page once; a worker that comes after its end closes at once.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from deploy.procs import wait_for
from messaging import keys
from messaging.clients import as_text
from messaging.counts import read_counts
from messaging.pause import pause, resume
from tests.plugins.fleet import Fleet
from tests.plugins.services import Processes
from tests.plugins.shop_project import canonical, plain_crawl, write_shop
from tests.plugins.shop_site import ORDERS, SESSION, ShopSite

pytestmark = pytest.mark.e2e
WAIT = 120

PROBE = """\
import scrapy


class Probe(scrapy.Spider):
    name = "probe"

    def __init__(self, base="", *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.base = base

    async def start(self):
        yield scrapy.Request(self.base + "/", callback=self.parse_home)
        yield scrapy.Request(self.base + "/category/1", callback=lambda response: None)

    def parse_home(self, response):
        yield {"kind": "home", "links": len(response.css("a"))}
        yield scrapy.Request(self.base + "/category/2", callback=self.parse_category, meta={"basket": object()})
        yield response.follow("/category/3", callback=self.parse_category)

    def parse_category(self, response):
        yield {"kind": "category", "title": response.css("h1::text").get()}
"""


DEEP = """\
import scrapy


class Deep(scrapy.Spider):
    name = "deep"

    def __init__(self, base="", *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.base = base

    async def start(self):
        yield scrapy.Request(self.base + "/")

    def parse(self, response):
        yield {"kind": "page", "path": response.url[len(self.base):], "depth": response.meta["depth"]}
        yield from response.follow_all(css="a")
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, shop_site: ShopSite) -> Path:
    return write_shop(tmp_path_factory.mktemp("own") / "shop", "http://127.0.0.1:1", addon=True,
                      spiders={"spiders/probe.py": PROBE, "spiders/deep.py": DEEP})


@pytest.fixture(scope="module")
def fleet(fleet_module: Fleet) -> Fleet:
    fleet_module.start(masters=1)
    return fleet_module


def scrapy_crawl(fleet: Fleet, procs: Processes, project: Path, spider: str, job: str, *args: str) -> Any:
    """``scrapy crawl <spider>`` in the project, as its user starts it on a host of the fleet."""
    return procs.start([sys.executable, "-m", "scrapy", "crawl", spider, "-s", f"CRAWLFLEET_JOB={job}", *args],
                       env=fleet.env, name=job, cwd=project)


def test_a_kafka_request_names_project_and_spider_and_scrapy_crawl_workers_join_it(
        fleet: Fleet, procs_module: Processes, project: Path, shop_site: ShopSite, tmp_path: Path) -> None:
    shop_site.reset()
    crawl = "acct-kafka"
    fleet.submit({"userid": "ann", "crawlid": crawl, "project": "shop", "spider": "account",
                  "args": {"base": shop_site.url}})
    wait_for(lambda: fleet.redis.hget(keys.crawl(crawl), "spider_type") == b"shop.account", 60, "the crawl stored")
    # paused until both workers serve it (what the Redis monitor does with a pause request; this fleet runs none): on
    # a loaded machine the first to start would otherwise crawl it all before the second is up, and the session
    # cookie's travel between workers (below) would go unseen
    pause(fleet.redis, crawl)
    workers = [scrapy_crawl(fleet, procs_module, project, "account", f"acct-w{n}") for n in (1, 2)]
    for worker in workers:
        wait_for(lambda w=worker: f"serving crawl {crawl} of shop.account" in procs_module.log(w), 120,
                 "the worker serves the crawl")
    resume(fleet.redis, crawl)
    event = fleet.wait_finished([crawl], WAIT)[crawl]
    hits = shop_site.counts()  # the fleet's fetches (plain Scrapy's come below)
    for worker in workers:  # both joined the Kafka request's crawl, and ended with it
        wait_for(lambda w=worker: w.poll() is not None, 60, "the worker ended with its crawl")
        log = procs_module.log(worker)
        assert worker.returncode == 0 and f"serving crawl {crawl} of shop.account" in log, log[-3000:]

    stored = fleet.items(crawl)
    plain = plain_crawl(project, "account", shop_site.url, tmp_path / "plain.jsonl")
    assert canonical(stored) == canonical(plain)
    orders = [item for item in stored if item["kind"] == "order"]
    assert sorted(item["number"] for item in orders) == list(range(1, ORDERS + 1))
    assert all(item["who"] == "ann" and item["via"] == "account" and item["title"] == f"Order {item['number']}"
               for item in orders)  # cb_kwargs, meta and the session cookie travelled with each request
    # the session cookie went into the crawl's jar in Redis, which every worker of the crawl reads: which worker
    # fetched which order is the dispatcher's choice (a domain's tasks go to one worker's queue), not this test's
    saved = fleet.redis.hgetall(keys.cookie_jar(crawl, ""))
    jar = {as_text(name): json.loads(cookie) for name, cookie in saved.items()}
    assert [cookie["value"] for name, cookie in jar.items() if name.endswith(" session")] == [SESSION], jar
    jobs = {item["job"] for item in stored}
    print(f"pages stored by {sorted(jobs)}")
    assert [item["status"] for item in stored if item["kind"] == "gone"] == [404]

    assert hits[("GET", "/login")] == 1 and hits[("POST", "/login")] == 1
    assert all(n == 1 for n in hits.values()), hits  # every page once: the start request too, with two workers
    assert event["items"] == len(stored) == len(plain)
    assert event["failures"] == {"HTTP 404": 1}


def test_requests_that_cannot_travel_are_refused_and_counted(
        fleet: Fleet, procs_module: Processes, project: Path, shop_site: ShopSite) -> None:
    shop_site.reset()
    crawl = "probe-own"
    args = ["-a", f"base={shop_site.url}", "-s", f"CRAWLFLEET_CRAWL={crawl}"]
    workers = [scrapy_crawl(fleet, procs_module, project, "probe", f"probe-w{n}", *args) for n in (1, 2)]
    fleet.wait_finished([crawl], WAIT)
    hits = shop_site.counts()
    assert hits[("GET", "/")] == 1 and hits[("GET", "/category/3")] == 1
    assert ("GET", "/category/1") not in hits and ("GET", "/category/2") not in hits
    counts = read_counts(fleet.redis, crawl)
    assert counts.failures == {"untravelable: callback": 1, "untravelable: meta": 1}
    assert counts.items == 2
    logs = "".join(procs_module.log(worker) for worker in workers)
    assert f"refused GET {shop_site.url}/category/1 yielded by start(): its callback" in logs
    assert "is not a method of the spider" in logs
    assert f"refused GET {shop_site.url}/category/2 yielded on {shop_site.url}/: its meta['basket'] holds a " \
           "builtins.object, not JSON" in logs
    assert logs.count("turns the start requests of crawl probe-own into tasks") == 1



def test_depth_limit_from_the_crawl_request_and_the_depth_stats(
        fleet: Fleet, procs_module: Processes, project: Path, shop_site: ShopSite, tmp_path: Path) -> None:
    shop_site.reset()
    crawl = "deep-own"
    settings = {"DEPTH_LIMIT": "1", "DEPTH_STATS_VERBOSE": "True"}
    fleet.submit({"userid": "ann", "crawlid": crawl, "project": "shop", "spider": "deep",
                  "args": {"base": shop_site.url}, "settings": settings})
    wait_for(lambda: fleet.redis.hget(keys.crawl(crawl), "spider_type") == b"shop.deep", 60, "the crawl stored")
    workers = [scrapy_crawl(fleet, procs_module, project, "deep", f"deep-w{n}") for n in (1, 2)]
    fleet.wait_finished([crawl], WAIT)
    hits = shop_site.counts()
    for worker in workers:
        wait_for(lambda w=worker: w.poll() is not None, 60, "the worker ended with its crawl")
    stored = fleet.items(crawl)
    plain = plain_crawl(project, "deep", shop_site.url, tmp_path / "plain.jsonl",
                        *(f"-s{name}={value}" for name, value in settings.items()))
    assert canonical(stored) == canonical(plain)
    assert sorted(item["path"] for item in stored) == ["/", "/category/1", "/category/2", "/category/3", "/login"]
    assert not [path for _, path in hits if path.startswith("/product/")]  # depth 2: dropped where it was yielded
    assert all(n == 1 for n in hits.values()), hits

    per_worker = [json.loads(raw) for raw in fleet.redis.hgetall(keys.crawl_scrapy_stats(crawl)).values()]
    assert len(per_worker) == 2
    assert max(stats.get("request_depth_max", 0) for stats in per_worker) == 1
    depth_counts = {name: sum(stats.get(name, 0) for stats in per_worker)
                    for name in ("request_depth_count/0", "request_depth_count/1")}
    assert depth_counts == {"request_depth_count/0": 1, "request_depth_count/1": 5}


def test_a_paused_crawl_keeps_its_workers_and_ends_once_resumed(
        fleet: Fleet, procs_module: Processes, project: Path, shop_site: ShopSite) -> None:
    shop_site.reset()
    crawl = "pause-own"
    args = ["-a", f"base={shop_site.url}", "-s", f"CRAWLFLEET_CRAWL={crawl}", "-s", "CRAWLFLEET_CRAWL_REFRESH=0.2"]
    shop_site.delay = 0.3  # product pages: the crawl lasts long enough to be paused in the middle
    try:
        first = scrapy_crawl(fleet, procs_module, project, "catalog", "pause-w1", *args)
        wait_for(lambda: fleet.items(crawl), WAIT, "a first item")
        pause(fleet.redis, crawl)
        wait_for(lambda: "crawls paused: pause-own" in procs_module.log(first), 30, "the worker heard the pause")
        later = scrapy_crawl(fleet, procs_module, project, "catalog", "pause-w2", *args)  # joins the paused crawl
        wait_for(lambda: f"serving crawl {crawl} of shop.catalog" in procs_module.log(later), 60, "w2 joined")
        # many looks at the crawl's state later (refresh 0.2 s, the watch every second), neither worker has ended
        time.sleep(3)
        assert first.poll() is None and later.poll() is None, procs_module.log(first)[-2000:]
        resume(fleet.redis, crawl)
        fleet.wait_finished([crawl], WAIT)
    finally:
        shop_site.delay = 0.0
    for worker in (first, later):
        wait_for(lambda w=worker: w.poll() is not None, 60, "the worker ended with its crawl")
        assert worker.returncode == 0 and "Spider closed (finished)" in procs_module.log(worker)
    products = [item for item in fleet.items(crawl) if item["kind"] == "product"]
    assert len(products) == len({item["url"] for item in products}) == 36
    assert all(n == 1 for n in shop_site.counts().values()), shop_site.counts()

    # a worker that comes after the crawl's end closes at once, as done, without running start() or fetching
    hits = shop_site.counts()
    late = scrapy_crawl(fleet, procs_module, project, "catalog", "pause-w3", *args)
    wait_for(lambda: late.poll() is not None, 60, "the late worker ended")
    log = procs_module.log(late)
    assert late.returncode == 0 and "Spider closed (finished)" in log and "ERROR" not in log, log[-3000:]
    assert "start requests" not in log and shop_site.counts() == hits
