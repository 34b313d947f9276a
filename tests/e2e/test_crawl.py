"""The crawl, end to end: requests through Kafka, masters, Scrapy workers, pipelines, MongoDB — on the demo web."""

from __future__ import annotations

import re
from typing import Any

import pytest

from deploy.demo_rules import DEMO_LIST_RULE, DEMO_UNIVERSAL_RULE
from deploy.demoweb.sites import build_sites
from deploy.procs import wait_for
from messaging import keys
from messaging.clock import RedisClock
from messaging.siteconfig import Rate

pytestmark = pytest.mark.e2e

NEWS, CHINA = "news.fleet.test", "china.fleet.test"
CRAWL_TIMEOUT = 180
CJK = re.compile(r"[\u4e00-\u9fff]")


def site_model(demoweb: dict[str, Any], name: str) -> Any:
    return next(s for s in build_sites(demoweb["pages"]) if getattr(s, "name", None) == name)


@pytest.fixture(params=["single", pytest.param("cluster", marks=pytest.mark.cluster)])
def any_fleet(request: pytest.FixtureRequest) -> Any:
    """The fleet on one Redis, and on the local 3-master Redis Cluster: the same crawl passes unchanged."""
    return request.getfixturevalue("fleet" if request.param == "single" else "fleet_cluster")


def test_a_list_and_a_universal_crawl_store_exactly_the_expected_items(any_fleet: Any) -> None:
    fleet = any_fleet
    news, china = site_model(fleet.demoweb, NEWS), site_model(fleet.demoweb, CHINA)
    before = {NEWS: fleet.served(NEWS), CHINA: fleet.served(CHINA)}
    fleet.start(list_workers=2, universal_workers=2)
    fleet.submit(
        {"userid": "alice", "crawlid": "news-world", "spider_type": "list", "url": fleet.url(NEWS, "/world/"),
         "rule": DEMO_LIST_RULE},
        {"userid": "bob", "crawlid": "china-all", "spider_type": "universal", "url": fleet.url(CHINA, "/"),
         "rule": DEMO_UNIVERSAL_RULE},
    )
    events = fleet.wait_finished(["news-world", "china-all"], CRAWL_TIMEOUT)

    world = {news.article_path(i) for i in news.section_ids("world")}
    items = fleet.items("news-world")
    assert sorted(fleet.url(NEWS, path) for path in world) == sorted(item["url"] for item in items)
    for item in items:
        article_id = int(re.search(r"-([0-9]+)\.html$", item["url"]).group(1))
        assert item["title"] == news.headline(article_id).title
        assert item["body"] and item["text"] and item["author"]
        assert item["crawlid"] == "news-world" and item["spider_type"] == "list" and item["status"] == 200
        assert item["referer"].startswith(fleet.url(NEWS, "/world/")) and item["depth"] in (1, 2)
    assert events["news-world"]["items"] == len(world)

    items = fleet.items("china-all")
    assert len(items) == china.articles == len({item["url"] for item in items})
    for item in items:
        article_id = int(re.search(r"content_([0-9]+)\.htm$", item["url"]).group(1))
        assert item["title"] == china.headline(article_id).title and CJK.search(item["title"])
        assert item["encoding"] == "gb18030" and CJK.search(item["text"])
    assert events["china-all"]["items"] == china.articles

    for site in (NEWS, CHINA):  # the demo web's own count: no page was fetched twice
        after = fleet.served(site)
        twice = {path: n - before[site].get(path, 0) for path, n in after.items() if n - before[site].get(path, 0) > 1}
        assert not twice, f"{site}: fetched more than once: {twice}"


def test_robots_txt_and_the_calendar_trap_are_contained(fleet: Any) -> None:
    trap = "trap.fleet.test"
    before = fleet.served(trap)
    fleet.start(universal_workers=2)
    follow_all = {"rules": [{"follow": True, "extract": {"title": "//h1"}}], "required": ["title"]}
    fleet.submit({"userid": "carol", "crawlid": "trap-all", "spider_type": "universal", "url": fleet.url(trap, "/"),
                  "rule": follow_all, "maxdepth": 3})
    fleet.wait_finished(["trap-all"], CRAWL_TIMEOUT)
    served = {path: n - before.get(path, 0) for path, n in fleet.served(trap).items() if n > before.get(path, 0)}
    assert not [path for path in served if path.startswith("/private/")], "robots.txt disallows /private/"
    assert served.get("/robots.txt") == 1, "one robots.txt fetch for both workers"
    calendar = [path for path in served if path.startswith("/calendar/")]
    assert 0 < len(calendar) <= 3 ** 3, calendar  # depth 3 from the home page: at most 3 links a day, 3 levels
    retried = {"/search"}  # answers 500: Scrapy's RetryMiddleware asks again (RETRY_TIMES), as it should
    assert not {path: n for path, n in served.items() if n > 1 and path not in retried}


def test_a_rate_set_mid_crawl_is_obeyed_by_every_worker(fleet: Any) -> None:
    fleet.start(universal_workers=2, redis_monitor=True, rate=Rate(5, 1))
    throttle = keys.throttle_type("universal", NEWS)
    fleet.submit({"userid": "erin", "crawlid": "news-rate", "spider_type": "universal", "url": fleet.url(NEWS, "/"),
                  "rule": DEMO_UNIVERSAL_RULE})
    hits: dict[bytes, float] = {}

    def record() -> None:  # the window keeps one second of hits: sampling every 0.1 s misses none
        hits.update(fleet.redis.zrange(throttle, 0, -1, withscores=True))

    collection = fleet.cf.mongo()["news-rate"]
    wait_for(lambda: record() or collection.estimated_document_count() >= 10, 60, "10 items at the first rate")
    changer = fleet.procs.crawlfleet("site", "rate", NEWS, "2", "--window", "1", env=fleet.env, name="site-rate")
    wait_for(lambda: record() or changer.poll() is not None, 60, "crawlfleet site rate to answer")
    assert changer.returncode == 0, fleet.procs.log(changer)
    changed = RedisClock(fleet.redis).now()  # the rate is in ZooKeeper now; workers apply it within 1 s

    def after_change() -> list[float]:
        return sorted(score / 1e6 for score in hits.values() if score / 1e6 >= changed + 1.0)

    wait_for(lambda: record() or len(after_change()) >= 12, 90, "12 hits at the new rate")
    later = after_change()
    busiest = max(sum(1 for t in later if start <= t < start + 1.0) for start in later)
    assert busiest <= 2, f"{busiest} hits within one second after the rate became 2 per second"
