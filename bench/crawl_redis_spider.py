"""The universal spider as a scrapy-redis ``RedisSpider``, for ``bench.crawl``'s scrapy-redis side.

scrapy-redis (a benchmark-only dependency, the ``bench`` extra) gives the scheduler (requests pickled into a Redis
sorted set by priority), the dupefilter (request fingerprints in a Redis set) and ``RedisMixin``: start requests
read from ``<name>:start_urls`` in Redis, more read whenever the engine idles.

The adapter Scrapy 2.19 needs: ``RedisMixin`` hands its first start requests out through ``start_requests()``,
which Scrapy 2.19 no longer calls (only ``async def start()``); here ``start()`` yields what ``next_requests()``
reads from Redis. The mixin's ``spider_idle`` handler (connected by ``setup_redis``) then schedules what arrives
later, and closes the spider after MAX_IDLE_TIME_BEFORE_CLOSE seconds without work (a RedisSpider never ends by
itself). A start entry is JSON ``{"url": …, "crawlid": …}``: the request of that crawl's start task.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from scrapy import Request
from scrapy_redis.spiders import RedisMixin

from bench.crawl_spiders import LOCAL_OUTPUT, SPIDER_TYPE, PlainUniversalSpider, StaticCatalog, task_request
from messaging.tasks import Task

REDIS_SCHEDULER = {
    "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
    "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
    "SCHEDULER_PERSIST": False,
    "MAX_IDLE_TIME_BEFORE_CLOSE": 3,
}


class ScrapyRedisSpider(RedisMixin, PlainUniversalSpider):
    name = "bench_redis"
    custom_settings = {**REDIS_SCHEDULER, "SPIDER_MIDDLEWARES": LOCAL_OUTPUT, "ROBOTSTXT_OBEY": True}

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> ScrapyRedisSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider.setup_redis(crawler)
        return spider

    def make_request_from_data(self, data: bytes) -> Request:
        entry = json.loads(data)
        crawlid, url = entry["crawlid"], entry["url"]
        if crawlid not in self.catalog.crawls:
            self.catalog.crawls.update(StaticCatalog({crawlid: url}).crawls)
        return task_request(Task(url=url, crawlid=crawlid, spider_type=SPIDER_TYPE, userid="bench"))

    async def start(self) -> AsyncIterator[Any]:
        for request in self.next_requests():
            yield request
