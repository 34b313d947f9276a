"""A 429 or 503 holds the whole cluster off the domain, and the task is retried once the site allows it.

``DOWNLOADER_MIDDLEWARES = {"spiders.middlewares.retry_after.RetryAfterMiddleware": 560}``. On a 429 or 503:

1. block the URL's domain for every worker with :func:`frontier.client.block_domain` (the call
   :meth:`frontier.client.FrontierClient.block` makes): ``block:{<domain>}``, written by ``frontier/lua/block.lua``,
   is only ever extended, and the politeness step refuses the domain until it ends. The seconds come from the
   Retry-After header (delta-seconds or an HTTP date,
   :func:`frontier.politeness.retry_after_seconds`), CRAWLFLEET_RETRY_AFTER_DEFAULT without one, at most
   CRAWLFLEET_RETRY_AFTER_MAX. The Redis call runs in a thread (``deferToThread``) that ``process_response``, a
   coroutine, awaits: the reactor never waits, and the block is in Redis before the retry is scheduled. A failed
   call is logged and the retry still happens (only the other workers lose the hint);
2. return a retry of the request (``dont_filter``) with ``meta["not_before"]`` = ``time.monotonic()`` + the
   seconds, which the scheduler holds until then, and ``meta["retry_after_times"]`` counting the retries. After
   CRAWLFLEET_RETRY_AFTER_TIMES retries, or when the request says ``dont_retry``, the response goes on as it is.

Order 560: responses travel from high orders to low, and Scrapy's RetryMiddleware (550, which retries 429 and 503
at once, without waiting) must see the response *after* this one. When this middleware gives up it sets
``meta["dont_retry"]``, so RetryMiddleware does not retry a response the site asked us to leave alone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from scrapy import Request
from scrapy.http import Response
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.threads import deferToThread

from frontier.client import block_domain
from frontier.politeness import retry_after_seconds
from messaging.clients import redis_client
from spiders.fleet_settings import crawlfleet_settings
from spiders.signals import domain_blocked
from spiders.worker.gate import site_of

logger = logging.getLogger(__name__)

STATUSES = frozenset({429, 503})


class DomainBlocker:
    """Blocks domains cluster-wide with :func:`frontier.client.block_domain`, at the Redis clock."""

    def __init__(self, redis: Any) -> None:
        self.redis = redis

    def block(self, domain: str, seconds: float) -> float:
        """Block ``domain`` cluster-wide for ``seconds``; returns when the block ends (Redis time, seconds)."""
        return block_domain(self.redis, domain, seconds)


async def _in_thread(function: Callable[..., Any], *args: Any) -> Any:
    return await maybe_deferred_to_future(deferToThread(function, *args))


class RetryAfterMiddleware:
    def __init__(
        self,
        blocker: DomainBlocker,
        default: float = 60.0,
        maximum: float = 600.0,
        times: int = 3,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        run: Callable[..., Awaitable[Any]] = _in_thread,
    ) -> None:
        self.blocker = blocker
        self.default = default
        self.maximum = maximum
        self.times = times
        self.monotonic = monotonic  # for not_before, which the scheduler compares with time.monotonic()
        self.wall_clock = wall_clock  # to read a Retry-After given as an HTTP date
        self.run = run  # runs the blocking Redis call off the reactor
        self.signals: Any = None  # the crawler's, to tell this process's scheduler at once

    @classmethod
    def from_crawler(cls, crawler: Any) -> RetryAfterMiddleware:
        settings = crawlfleet_settings(crawler.settings)
        middleware = cls(DomainBlocker(redis_client(settings)), settings["CRAWLFLEET_RETRY_AFTER_DEFAULT"],
                         settings["CRAWLFLEET_RETRY_AFTER_MAX"], settings["CRAWLFLEET_RETRY_AFTER_TIMES"])
        middleware.signals = crawler.signals
        return middleware

    def seconds_for(self, response: Response) -> float:
        """How long the site asks us to wait: its Retry-After, or the default; never more than the maximum."""
        asked = retry_after_seconds(response.headers.get(b"Retry-After"), self.wall_clock(), self.default)
        return min(max(0.0, asked), self.maximum)

    async def process_response(self, request: Request, response: Response, spider: Any = None) -> Request | Response:
        if response.status not in STATUSES:
            return response
        seconds = self.seconds_for(response)
        domain = site_of(request)  # the queue its hits count on (the crawl's partition): blocked for everyone
        if self.signals is not None:  # tasks of the domain this worker leased already wait too
            self.signals.send_catch_log(domain_blocked, domain=domain, until=self.monotonic() + seconds)
        try:
            await self.run(self.blocker.block, domain, seconds)
        except Exception as exc:  # Redis unreachable: this worker still waits, the others just don't know
            logger.warning("could not block %s for %.0f s after a %d: %s", domain, seconds, response.status, exc)
        retried = int(request.meta.get("retry_after_times", 0))
        if request.meta.get("dont_retry") or retried >= self.times:
            logger.info("gave up on %s after %d retries on %d", request.url, retried, response.status)
            request.meta["dont_retry"] = True  # and so does RetryMiddleware: the site asked us to back off
            return response
        retry = request.replace(dont_filter=True)
        retry.meta["not_before"] = self.monotonic() + seconds
        retry.meta["retry_after_times"] = retried + 1
        logger.debug("%d on %s: %s blocked for %.0f s, retry %d of %d", response.status, request.url, domain,
                     seconds, retried + 1, self.times)
        return retry
