"""The fleet's ``universal`` spider run outside the fleet, for ``bench.crawl``'s plain-Scrapy and scrapy-redis sides.

Only scheduling, dedup and dispatch may differ between the sides, so these are the very spider
(:class:`spiders.spiders.universal.UniversalSpider`: its ``parse_task`` applies the crawl's rule and builds the items)
with the fleet's downloader middlewares and item pipelines (``spiders/addon.py``: decode, clean, extract, MongoDB),
run as ``scrapy crawl`` from the project root with ``-s SPIDER_MODULES=bench.crawl_spiders``. What the fleet's
worker does around the spider is replaced by the smallest local equivalent:

- the crawl's rule comes from a spider argument (``-a crawls=<JSON {crawlid: start URL}>``, all with
  :data:`deploy.demo_rules.DEMO_UNIVERSAL_RULE`) instead of ``crawl:<crawlid>`` in Redis (:class:`StaticCatalog`);
- :class:`LocalTaskMiddleware` turns the requests the callback yields into requests that carry their child
  :class:`messaging.tasks.Task` (``request.meta["task"]``), as ``spiders.worker.output.TaskOutputMiddleware`` turns
  them into child tasks in ``seeds``; here they go to Scrapy's scheduler;
- ``bench_plain`` keeps Scrapy's memory scheduler and ``RFPDupeFilter``; ``bench_redis`` uses scrapy-redis's
  scheduler, priority queue and dupefilter (Redis) and reads its start requests from Redis, as a scrapy-redis
  ``RedisSpider`` does (:class:`bench.crawl_redis_spider.ScrapyRedisSpider`, with the adapter Scrapy 2.19 needs;
  a module of its own, ``-s SPIDER_MODULES=bench.crawl_redis_spider``, so that this one does not need scrapy-redis).

robots.txt is obeyed (Scrapy's ``ROBOTSTXT_OBEY``), as the fleet's politeness step obeys it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from scrapy import Request
from scrapy.http import Response

from deploy.demo_rules import DEMO_UNIVERSAL_RULE
from messaging.tasks import Task
from spiders.spiders.universal import UniversalSpider
from spiders.worker.crawls import CrawlInfo

SPIDER_TYPE = "universal"
PLAIN_SCHEDULER = {"SCHEDULER": "scrapy.core.scheduler.Scheduler",
                   "DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter"}
LOCAL_OUTPUT = {"spiders.worker.output.TaskOutputMiddleware": None,
                "bench.crawl_spiders.LocalTaskMiddleware": 20}


class StaticCatalog:
    """The crawls a fleet spider asks for (``crawl_for``), here from the spider's argument, not a worker's catalog."""

    def __init__(self, crawls: dict[str, str], rule: dict[str, Any] | None = None) -> None:
        rule = DEMO_UNIVERSAL_RULE if rule is None else rule
        self.crawls = {crawlid: CrawlInfo(crawlid=crawlid, spider_type=SPIDER_TYPE, rule=rule,
                                          url=url, userid="bench", state="running")
                       for crawlid, url in crawls.items()}

    def get(self, crawlid: str) -> CrawlInfo | None:
        return self.crawls.get(crawlid)


def task_request(task: Task) -> Request:
    """The request of a task, with the meta every fleet request carries (worker contracts)."""
    return Request(task.url, priority=task.priority,
                   meta={"task": task, "crawlid": task.crawlid, "spider_type": task.spider_type})


class LocalTaskMiddleware:
    """Spider middleware: each request the callback yields becomes the request of its child task (local queue)."""

    def process_spider_output(self, response: Response, result: Iterable[Any]) -> Iterator[Any]:
        parent: Task = response.meta["task"]
        for output in result:
            yield self._child(parent, output) if isinstance(output, Request) else output

    async def process_spider_output_async(self, response: Response, result: AsyncIterator[Any]) -> AsyncIterator[Any]:
        parent: Task = response.meta["task"]
        async for output in result:
            yield self._child(parent, output) if isinstance(output, Request) else output

    @staticmethod
    def _child(parent: Task, request: Request) -> Request:
        meta = request.meta
        return task_request(parent.child(request.url, meta.get("fleet_callback", ""), meta.get("fleet_meta")))


class PlainUniversalSpider(UniversalSpider):
    """The universal spider on Scrapy's own scheduler and dupefilter, one process."""

    name = "bench_plain"
    custom_settings = {**PLAIN_SCHEDULER, "SPIDER_MIDDLEWARES": LOCAL_OUTPUT, "ROBOTSTXT_OBEY": True}

    def __init__(self, crawls: str = "{}", rule: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.catalog = StaticCatalog(json.loads(crawls), json.loads(rule) if rule else None)

    @property
    def spider_type(self) -> str:
        return SPIDER_TYPE

    def crawl_for(self, task: Task) -> CrawlInfo | None:
        return self.catalog.get(task.crawlid)

    def start_tasks(self) -> list[Task]:
        return [Task(url=info.url, crawlid=crawlid, spider_type=SPIDER_TYPE, userid="bench")
                for crawlid, info in self.catalog.crawls.items()]

    async def start(self) -> AsyncIterator[Any]:
        for task in self.start_tasks():
            yield task_request(task)
