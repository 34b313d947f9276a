"""Counts every response by spider type and HTTP status in the cluster's counters (seed 4.3.1.2, tables 4-6, 4-8).

``DOWNLOADER_MIDDLEWARES = {"spiders.middlewares.status.HttpStatusCounterMiddleware": 860}``. Keys are
``stats:crawler:<spider_type>:<status>:<window>`` (:func:`messaging.keys.stats_crawler`): the plugin of
``Stats(redis, "crawler")`` is ``"<spider_type>:<status>"``; the spider type is ``request.meta["spider_type"]``
(set on every task's request), else the spider's name. A download that fails (DNS, connection refused, timeout)
counts as status ``error``; a request that a middleware ignores (robots.txt, offsite) is not a download and is not
counted. The Redis monitor sums the spider types into ``all``.

Order 860, next to Scrapy's DownloaderStats (850): responses travel from high orders to low, so here the
middleware sees every response as it came off the wire, before RedirectMiddleware (600) turns a 301/303 into a new
request and before RetryMiddleware (550) / RetryAfterMiddleware (560) turn a 500/503/429 into a retry. Seed table
4-8 counts exactly those statuses (301, 303, 500...), which a lower order would never see; and every failed
attempt counts as one ``error``, since RetryMiddleware answers the exception only further down.

Counting never waits for Redis on the reactor: :class:`~messaging.stats.BufferedStats` adds in memory and flushes
once a second from a thread; the last flush runs in a thread when the spider closes.
"""

from __future__ import annotations

from typing import Any

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.threads import deferToThread

from messaging import modules
from messaging.clients import redis_client
from messaging.stats import BufferedStats, Stats
from spiders.fleet_settings import crawlfleet_settings

STATS_MODULE = modules.CRAWLER
ERROR = "error"


class HttpStatusCounterMiddleware:
    def __init__(self, counters: BufferedStats, crawler: Any = None) -> None:
        self.counters = counters
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Any) -> HttpStatusCounterMiddleware:
        redis = redis_client(crawlfleet_settings(crawler.settings))
        middleware = cls(BufferedStats(Stats(redis, STATS_MODULE)), crawler)
        crawler.signals.connect(middleware.spider_closed, signal=signals.spider_closed)
        return middleware

    def spider_type(self, request: Request) -> str:
        spider = getattr(self.crawler, "spider", None)
        return str(request.meta.get("spider_type") or getattr(spider, "name", None) or "unknown")

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Response:
        self.counters.incr(f"{self.spider_type(request)}:{response.status}")
        return response

    def process_exception(self, request: Request, exception: BaseException, spider: Any = None) -> None:
        if not isinstance(exception, IgnoreRequest):
            self.counters.incr(f"{self.spider_type(request)}:{ERROR}")
        return None

    async def spider_closed(self) -> None:
        await maybe_deferred_to_future(deferToThread(self.counters.close))  # the last flush waits for Redis
