"""What the worker's factory decides without services (pure logic): the dupefilter comes from DUPEFILTER_CLASS and
must offer the batch interface the commits use; the feed's settings are read by field name; the tracker hears the
item signals itself; a spider asks its scheduler for a task's crawl."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from scrapy import Request, Spider, signals
from scrapy.utils.test import get_crawler

from frontier.client import Lease
from messaging.settings import load
from messaging.tasks import Task
from spiders.dupefilter import BloomDupeFilter, require_batch_interface
from spiders.spiders.base import FleetSpider
from spiders.worker.build import _dupefilter
from spiders.worker.crawls import CrawlInfo
from spiders.worker.feed import FeedConfig
from spiders.worker.tracker import TaskTracker

pytestmark = pytest.mark.unit


def test_a_dupefilter_without_the_batch_interface_stops_the_worker_with_the_reason() -> None:
    crawler = get_crawler(Spider, {"DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter"})
    with pytest.raises(TypeError, match=r"'scrapy.dupefilters.RFPDupeFilter' cannot serve the fleet's worker.*"
                                        r"BloomDupeFilter.*ADDONS=\{\}"):
        _dupefilter(crawler)


def test_the_fleet_dupefilter_and_its_subclasses_serve_the_worker() -> None:
    class Mine(BloomDupeFilter):
        pass

    mine = Mine.__new__(Mine)  # no Redis: only its interface is looked at
    assert require_batch_interface(mine, "project.Mine") is mine


def test_the_feed_reads_each_of_its_settings_by_its_field_name(tmp_path: Any) -> None:
    settings = load({"CRAWLFLEET_RUN_DIR": str(tmp_path), "CRAWLFLEET_PREFETCH": "7",
                     "CRAWLFLEET_READY_RECONCILE": "12"})
    config = FeedConfig.from_settings(settings)
    assert (config.prefetch, config.ready_reconcile) == (7, 12.0)
    assert config.lease_seconds == settings.lease_seconds and config == FeedConfig(prefetch=7, ready_reconcile=12.0)


def test_the_tracker_hears_stored_and_dropped_items_itself() -> None:
    crawler = get_crawler(Spider)
    task = Task(url="http://site.test/p", crawlid="c", spider_type="list")
    finished: list[Any] = []
    spider = SimpleNamespace(request_for=lambda task, crawl: Request(task.url))
    tracker = TaskTracker(spider, SimpleNamespace(get=lambda crawlid: None), lambda url: True, finished.append)
    tracker.connect(crawler.signals)
    request = tracker.start(Lease("site.test", task.encode(), 0.0))
    assert request is not None
    response = SimpleNamespace(meta=request.meta)
    tracker.item_produced(response)
    tracker.item_produced(response)
    tracker.output_done(response, [])
    crawler.signals.send_catch_log(signals.item_scraped, item={}, response=response, spider=None)
    assert not finished
    crawler.signals.send_catch_log(signals.item_dropped, item={}, response=response, spider=None, exception=None)
    [done] = finished
    assert done.items == 1 and done.lease.member == task.encode()


def test_a_fleet_spider_asks_its_scheduler_for_a_tasks_crawl() -> None:
    crawl = CrawlInfo(crawlid="c", url="http://site.test/")
    spider = FleetSpider(name="list")
    spider.crawler = SimpleNamespace(engine=SimpleNamespace(scheduler=SimpleNamespace(  # type: ignore[assignment]
        crawl_for=lambda crawlid: crawl if crawlid == "c" else None)))
    assert spider.crawl_for(Task(url="http://site.test/", crawlid="c", spider_type="list")) is crawl
    assert spider.crawl_for(Task(url="http://site.test/", crawlid="x", spider_type="list")) is None
    spider.crawler = SimpleNamespace(engine=SimpleNamespace(scheduler=object()))  # type: ignore[assignment]
    assert spider.crawl_for(Task(url="http://site.test/", crawlid="c", spider_type="list")) is None  # not a fleet's


def test_a_scheduler_holding_nothing_is_still_the_feeds_listener() -> None:
    """The scheduler has a ``__len__`` (Scrapy's interface): empty, it is falsy, and it must still hear the feed."""
    from frontier.client import FrontierClient
    from frontier.config_watch import StaticSiteConfig
    from frontier.politeness import Politeness
    from frontier.registry import WorkerInfo, WorkerRegistry
    from spiders.worker.feed import TaskFeed, Unheard

    class NoRedis:  # scripts are bound (their SHA computed here), nothing is asked of Redis
        def register_script(self, source: str) -> object:
            return object()

    class EmptyScheduler(Unheard):
        def __len__(self) -> int:
            return 0

    redis: Any = NoRedis()
    frontier = FrontierClient(redis, "j", "list", "10.0.0.1", Politeness(StaticSiteConfig()))
    listener = EmptyScheduler()
    feed = TaskFeed(WorkerInfo("j", "list", "10.0.0.1", "h", 1), frontier, WorkerRegistry(redis),
                    SimpleNamespace(), SimpleNamespace(), FeedConfig(), listener)  # type: ignore[arg-type]
    assert not listener and feed.listener is listener
