"""The proxy pool end to end: proxies collected from a list page, checked, and a fleet's crawl going through them.

Real local forward proxies (:mod:`tests.plugins.proxies`) resolve the demo web's names through the same host map as
the workers and count what they forward. One proxy is broken on purpose (the validator removes it), one asks for
credentials (they reach no log), and one dies in the middle of a crawl (no page is lost: its requests go through
the other).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from deploy.demo_rules import DEMO_LIST_RULE, DEMO_UNIVERSAL_RULE
from deploy.demoweb.sites import build_sites
from deploy.procs import wait_for
from messaging import keys
from messaging.siteconfig import Rate
from spiders.proxies.store import ProxyStore
from tests.plugins.proxies import list_page, list_page_html, proxy_farm  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e

NEWS, CHINA = "news.fleet.test", "china.fleet.test"
SECRET = "Pr0xy-Secret"
CRAWL_TIMEOUT = 180
CREDENTIAL_RULE = {"list_from": "//table[@id='proxies']//tr[td[2]]", "ip": "td[1]", "port": "td[2]",
                   "location": "td[3]", "anonymity": "td[4]", "type": "td[5]", "speed": "td[6]",
                   "alive_time": "td[7]", "user": "td[8]", "password": "td[9]"}


def section_pages(demoweb: dict[str, Any], section: str) -> set[str]:
    news = next(s for s in build_sites(demoweb["pages"]) if getattr(s, "name", None) == NEWS)
    return {news.article_path(i) for i in news.section_ids(section)}


def test_a_crawl_goes_through_the_pools_proxies_and_a_dying_proxy_loses_no_page(
        fleet: Any, proxy_farm: Any, list_page: Any) -> None:  # noqa: F811
    private = proxy_farm.start(auth=f"ann:{SECRET}")
    mortal = proxy_farm.start()
    broken = proxy_farm.start(broken=True)
    env = {**fleet.env, "CRAWLFLEET_PROXY_TEST_URL": fleet.url(CHINA, "/"), "CRAWLFLEET_PROXY_MAX_FAILURES": "3",
           "CRAWLFLEET_PROXY_SPIDER_TYPES": "list", "CRAWLFLEET_PROXY_REFRESH": "0.5",
           "CRAWLFLEET_PROXY_COOLDOWN": "60"}
    store = ProxyStore(fleet.cf.mongo()["proxies"], 3)

    # Collect the list page, then check the pool until the broken proxy is gone (3 failed checks).
    page = list_page.publish(list_page_html([private, mortal, broken], credentials=True))
    collect = fleet.procs.crawlfleet("proxies", "collect", "--url", page, "--rule", json.dumps(CREDENTIAL_RULE),
                                     env=env)
    assert collect.wait(120) == 0, fleet.procs.log(collect)
    for _ in range(3):
        validate = fleet.procs.crawlfleet("proxies", "validate", env=env)
        assert validate.wait(60) == 0, fleet.procs.log(validate)
    assert store.get(broken.id) is None, "the broken proxy is still in the pool"
    assert {p.id for p in store.proxies(live_only=True)} == {private.id, mortal.id}

    fleet.start(rate=Rate(4, 1))  # slow enough for a proxy to die in the middle of the crawl
    job = f"{fleet.cf.name}-list-proxied"
    worker = fleet.procs.crawlfleet("worker", "--spider", "list", "--job", job, env=env, name=f"worker-{job}")
    fleet.workers[job] = worker
    fleet.procs.wait_log(worker, f"worker {job} ready", timeout=60)

    # 1. Every request of a crawl passes through a proxy of the pool, both of them used.
    before = fleet.served(NEWS)
    forwarded_before = private.forwarded(NEWS) + mortal.forwarded(NEWS)
    fleet.submit({"userid": "alice", "crawlid": "news-world", "spider_type": "list",
                  "url": fleet.url(NEWS, "/world/"), "rule": DEMO_LIST_RULE})
    fleet.wait_finished(["news-world"], CRAWL_TIMEOUT)
    world = section_pages(fleet.demoweb, "world")
    assert sorted(fleet.url(NEWS, p) for p in world) == sorted(i["url"] for i in fleet.items("news-world"))
    after = fleet.served(NEWS)
    served = {path: n - before.get(path, 0) for path, n in after.items()
              if n > before.get(path, 0) and path != "/robots.txt"}
    assert world <= set(served) and max(served.values()) == 1, served
    robots = after.get("/robots.txt", 0) - before.get("/robots.txt", 0)  # a paced hit too, through a proxy of the pool
    forwarded = private.forwarded(NEWS) + mortal.forwarded(NEWS) - forwarded_before
    assert forwarded == sum(served.values()) + robots, "every request came through a proxy, none went out directly"
    assert private.forwarded(NEWS) > 0 and mortal.forwarded(NEWS) > 0
    assert private.stats()["refused"] == {}, "the worker sent the private proxy's credentials"

    # 2. A proxy dies in the middle of a crawl: its requests go through the other one, no page is lost.
    tech = section_pages(fleet.demoweb, "tech")
    fleet.submit({"userid": "alice", "crawlid": "news-tech", "spider_type": "list",
                  "url": fleet.url(NEWS, "/tech/"), "rule": DEMO_LIST_RULE})
    stored = fleet.cf.mongo()["news-tech"]
    wait_for(lambda: stored.estimated_document_count() >= 1, 60, "the crawl's first item")
    proxy_farm.stop(mortal)  # mid-crawl: at 4 pages a second, most of the section is still to come
    assert stored.estimated_document_count() < len(tech), "the crawl ended before the proxy died"
    fleet.wait_finished(["news-tech"], CRAWL_TIMEOUT)
    assert sorted(fleet.url(NEWS, p) for p in tech) == sorted(i["url"] for i in fleet.items("news-tech"))
    dead = store.get(mortal.id)
    assert dead is None or dead.failures >= 1, "the worker did not report the dead proxy"

    for _, proc, _ in fleet.procs.started:
        assert SECRET not in fleet.procs.log(proc), "a proxy's password reached a log"


def test_the_per_ip_throttle_holds_per_proxy_address(fleet: Any, proxy_farm: Any, list_page: Any) -> None:  # noqa: F811
    """2 workers share 2 proxies: the per-IP windows are the proxies' exit addresses, never the workers' own."""
    first, second = proxy_farm.start(), proxy_farm.start()
    env = {**fleet.env, "CRAWLFLEET_PROXY_TEST_URL": fleet.url(CHINA, "/"), "CRAWLFLEET_PROXY_REFRESH": "0.5",
           "CRAWLFLEET_PROXY_SPIDER_TYPES": "universal", "CRAWLFLEET_WORKER_IP": "10.99.0.1"}
    page = list_page.publish(list_page_html([first, second]))
    for argv in (["collect", "--url", page], ["validate"]):
        run = fleet.procs.crawlfleet("proxies", *argv, env=env)
        assert run.wait(120) == 0, fleet.procs.log(run)
    fleet.start(rate=Rate(3, 1))
    for n in range(2):
        job = f"{fleet.cf.name}-proxied-{n}"
        fleet.workers[job] = fleet.procs.crawlfleet("worker", "--spider", "universal", "--job", job, env=env,
                                                    name=f"worker-{job}")
        fleet.procs.wait_log(fleet.workers[job], f"worker {job} ready", timeout=60)
    fleet.submit({"userid": "bob", "crawlid": "china-proxied", "spider_type": "universal",
                  "url": fleet.url(CHINA, "/"), "rule": DEMO_UNIVERSAL_RULE, "max_pages": 30})
    windows = {proxy.host: keys.throttle_ip(proxy.host, CHINA) for proxy in (first, second)}
    hits: dict[str, dict[bytes, float]] = {host: {} for host in windows}

    def record() -> None:  # each window keeps one second of hits: sampling every 0.1 s misses none
        for host, key in windows.items():
            hits[host].update(fleet.redis.zrange(key, 0, -1, withscores=True))

    collection = fleet.cf.mongo()["china-proxied"]
    wait_for(lambda: record() or collection.estimated_document_count() >= 20, 120, "20 items through the proxies")
    for host, seen in hits.items():
        times = sorted(score / 1e6 for score in seen.values())
        assert times, f"no hit was counted for proxy {host}"
        assert max(sum(1 for t in times if start <= t < start + 1.0) for start in times) <= 3, host
    assert fleet.redis.exists(keys.throttle_ip("10.99.0.1", CHINA)) == 0, "a hit was counted for the worker's own IP"
