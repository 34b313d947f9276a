"""robots.txt fetched through Scrapy for the cluster's shared cache (:mod:`frontier.robots_cache`), by RFC 9309.

The politeness step asks the cache on the feed thread; when a host's robots.txt is known nowhere, :class:`ScrapyRobots`
claims its fetch for the cluster and asks the reactor to download it (:class:`RobotsFetcher`) through Scrapy's own
downloader (``engine.download_async``: downloader middlewares only, so proxies, the resolver and cookies apply):

- **redirects** are followed by Scrapy's RedirectMiddleware, at most five (``redirect_ttl``), across hosts; the file
  they end at is stored for the *original* host (RFC 9309 2.3.1.2). A sixth redirect, or one that cannot be
  followed, means "unavailable" (allow all);
- **statuses**: 2xx the rules, 4xx allow all, 5xx / 429 / a network error an outage: nothing of the host is fetched
  and the cache tries again later (:meth:`RobotsCache.store_failure`). There are no Scrapy retries (``dont_retry``):
  the cluster-wide outage is the retry, so a robots.txt that never answers costs one download per attempt, not
  three, and never outlives its claim;
- **size**: the download stops after 500 KiB (``StopDownload`` from the ``bytes_received`` signal) and what was read
  is used, cut after its last complete line;
- **the claim** is renewed while the download runs (:meth:`RobotsCache.renew_claims` every third of the claim's TTL,
  in a thread), so a slow robots.txt is never fetched a second time by another worker.

Storing (a Redis call) runs in a thread; the feed is then told, and asks the host's domain again at once (its walk
does not poll a fetch of its own: :data:`frontier.robots_cache.MINE_WAIT`).

:class:`RobotsFetcher` makes the cache it fetches for (:attr:`RobotsFetcher.cache`, which the politeness rules ask)
and is started on the reactor once the worker runs (:meth:`RobotsFetcher.start`: the download's byte count and the
claims' renewal).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, StopDownload
from scrapy.utils.defer import deferred_from_coro
from twisted.internet import task, threads
from twisted.python.failure import Failure

from frontier.robots_cache import Robots, RobotsCache
from frontier.robots_rules import MAX_BODY, MAX_REDIRECTS, MISSING, OK, UNREACHABLE, cap_body, robots_url, status_kind
from messaging.clients import RedisClient
from messaging.reactor import running_reactor

logger = logging.getLogger(__name__)
META = "fleet_robots"  # marks the robots.txt downloads (their bytes are counted against the cap)
BYTES_META = "fleet_robots_bytes"


class ScrapyRobots(RobotsCache):
    """The shared robots.txt cache, fetched through Scrapy: a miss claims the fetch and asks the reactor for it."""

    def __init__(self, redis: RedisClient, request_fetch: Callable[[str], None], **kwargs: Any) -> None:
        super().__init__(redis, None, **kwargs)
        self.request_fetch = request_fetch

    def lookup(self, url: str) -> Any:
        state = self.state(url)
        if state == "claimed":
            self.fetched += 1
            self.request_fetch(url)
            return None
        return state if isinstance(state, Robots) else None


class RobotsFetcher:
    """The reactor side: downloads claimed robots.txt files and publishes what they say. ``cache_options`` are
    :class:`~frontier.robots_cache.RobotsCache`'s (ttl, lock_seconds, …)."""

    def __init__(self, crawler: Any, redis: RedisClient, **cache_options: Any) -> None:
        self.crawler = crawler
        self.cache = ScrapyRobots(redis, self._fetch_from_thread, **cache_options)
        self.on_stored: Callable[[str], None] = lambda url: None
        self._renewal: task.LoopingCall | None = None

    def start(self, on_stored: Callable[[str], None]) -> None:
        """On the reactor, once the worker runs; ``on_stored(url)``: the robots.txt of ``url``'s host was stored
        (called on the reactor)."""
        self.on_stored = on_stored
        self.crawler.signals.connect(self._bytes_received, signal=signals.bytes_received)
        self._renewal = task.LoopingCall(self._renew)
        self._renewal.start(max(0.05, self.cache.lock_seconds / 6), now=False)

    def stop(self) -> None:
        if self._renewal is not None and self._renewal.running:
            self._renewal.stop()

    def _fetch_from_thread(self, url: str) -> None:
        """The cache claimed the fetch on the feed thread: download it on the reactor."""
        running_reactor().callFromThread(self.fetch, url)

    def fetch(self, url: str) -> None:
        """Download the robots.txt of ``url``'s host (on the reactor); the claim is this process's."""
        # No handle_httpstatus_*: downloads skip the spider middlewares anyway, and RedirectMiddleware would not
        # follow a status listed there.
        request = Request(robots_url(url), priority=1000, dont_filter=True, headers={"Accept-Encoding": "identity"},
                          meta={"dont_obey_robotstxt": True, "dont_retry": True, "redirect_ttl": MAX_REDIRECTS,
                                META: True})
        d = deferred_from_coro(self.crawler.engine.download_async(request))
        d.addBoth(partial(self._fetched, url))

    def _bytes_received(self, data: bytes, request: Request, **_: Any) -> None:
        if not request.meta.get(META):
            return
        received = request.meta.get(BYTES_META, 0) + len(data)  # a redirect's request carries a copy of its meta
        request.meta[BYTES_META] = received
        if received > MAX_BODY:
            raise StopDownload(fail=False)  # the response arrives with what was read: the first 500 KiB count

    def _fetched(self, url: str, result: Any) -> None:
        status = getattr(result, "status", None)
        if isinstance(result, Failure) and result.check(IgnoreRequest):
            # e.g. "max redirections reached": RFC 9309 2.3.1.2 lets a crawler take it as unavailable
            kind, why = MISSING, result.getErrorMessage()
        elif isinstance(result, Failure) or status is None:
            kind, why = UNREACHABLE, result.getErrorMessage() if isinstance(result, Failure) else "no response"
        else:
            kind, why = status_kind(status), f"HTTP {status}"
        if kind == OK:
            call: Callable[[], Any] = partial(self.cache.store, url, cap_body(result.body))
        elif kind == UNREACHABLE:
            retry_after = _retry_after(result) if not isinstance(result, Failure) else None
            call = partial(self.cache.store_failure, url, f"{robots_url(url)}: {why}", retry_after)
        else:
            logger.info("robots.txt of %s unavailable (%s): everything allowed", url, why)
            call = partial(self.cache.store, url, "")
        self.crawler.stats.inc_value(f"fleet/robots/{kind}")
        threads.deferToThread(call).addCallbacks(
            lambda _: self.on_stored(url),
            lambda f: self._store_failed(url, f))

    def _store_failed(self, url: str, failure: Failure) -> None:
        logger.error("could not store robots.txt of %s: %s", url, failure.getErrorMessage())
        threads.deferToThread(self.cache.release, url)  # another attempt (here or elsewhere) may claim it

    def _renew(self) -> Any:
        if not len(self.cache.claims):
            return None
        return threads.deferToThread(self.cache.renew_claims).addErrback(
            lambda f: logger.warning("could not renew robots.txt claims: %s", f.getErrorMessage()))


def _retry_after(response: Any) -> float | None:
    value = response.headers.get(b"Retry-After")
    text = value.decode("latin-1").strip() if value else ""
    return float(text) if text.isdigit() else None
