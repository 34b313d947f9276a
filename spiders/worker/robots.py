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
  in a thread), so a slow robots.txt is never fetched a second time by another worker;
- **pacing**: the download is a hit on the site like its pages, in the same windows (those of the queue the URL
  waits in). Its hit is reserved on the feed thread in the same pass that claims the fetch
  (:meth:`frontier.client.FrontierClient.reserve`; for a new host that slot is now, its windows being empty) and the
  download is sent at that slot with ``callLater`` and ``engine.download_async``, past the scheduler, so that it
  never waits behind the pages parked there. A slot beyond the horizon (a busy site, a block) is asked for again
  nearer the time; a slot missed (the reactor was busy) is withdrawn and another reserved, as for a page
  (:mod:`spiders.worker.gate`). The claim is kept meanwhile; the fetch's time limit counts from the send.

Storing (a Redis call) runs in a thread; the feed is then told, and asks again at once the queues whose tasks of
the host waited for it — its domain, the host, its address: the crawls' partitions — (its walk does not poll a fetch
of its own: :data:`frontier.robots_cache.MINE_WAIT`).

:class:`RobotsFetcher` makes the cache it fetches for (:attr:`RobotsFetcher.cache`, which the politeness rules ask)
and is started on the reactor once the worker runs (:meth:`RobotsFetcher.start`: the download's byte count and the
claims' renewal).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, StopDownload
from scrapy.utils.defer import deferred_from_coro
from twisted.internet import task, threads
from twisted.python.failure import Failure

from frontier.client import SendSlot
from frontier.robots_cache import Robots, RobotsCache
from frontier.robots_rules import MAX_BODY, MAX_REDIRECTS, MISSING, OK, UNREACHABLE, cap_body, robots_url, status_kind
from messaging.clients import RedisClient
from messaging.clock import Clock, MonotonicClock
from messaging.domains import domain_of
from messaging.reactor import running_reactor
from spiders.worker.gate import LATE, REASK_SECONDS, admission

logger = logging.getLogger(__name__)
META = "fleet_robots"  # marks the robots.txt downloads (their bytes are counted against the cap)
BYTES_META = "fleet_robots_bytes"


class ScrapyRobots(RobotsCache):
    """The shared robots.txt cache, fetched through Scrapy: a miss claims the fetch and asks the reactor for it."""

    def __init__(self, redis: RedisClient, request_fetch: Callable[[str, str], None], **kwargs: Any) -> None:
        super().__init__(redis, None, **kwargs)
        self.request_fetch = request_fetch

    def lookup(self, url: str, domain: str | None = None) -> Any:
        state = self.state(url)
        if state == "claimed":
            self.fetched += 1
            self.request_fetch(url, domain or domain_of(url))
            return None
        return state if isinstance(state, Robots) else None


@dataclass(frozen=True, eq=False)
class RobotsHit:
    """A robots.txt download waiting for its slot: the URL whose host it is for, and the queue it is a hit on."""

    url: str
    domain: str
    proxy: Any = None  # spiders.proxies.Proxy whose exit address's window holds the hit (through the pool), or None


class RobotsFetcher:
    """The reactor side: downloads claimed robots.txt files and publishes what they say. ``cache_options`` are
    :class:`~frontier.robots_cache.RobotsCache`'s (ttl, lock_seconds, …)."""

    def __init__(self, crawler: Any, redis: RedisClient, clock: Clock | None = None, **cache_options: Any) -> None:
        self.crawler = crawler
        self.cache = ScrapyRobots(redis, self._fetch_from_thread, **cache_options)
        self.clock = clock if clock is not None else MonotonicClock()  # the worker's: its send slots are on it
        self.on_stored: Callable[[str], None] = lambda url: None
        # The worker's pacing (build_worker wires them): a slot reserved at once on the feed thread (None: not now),
        # a reservation asked of the feed, answered through reserved(); and the blocks the scheduler knows.
        self.reserve_now: Callable[[str], tuple[SendSlot | None, Any]] = lambda domain: (None, None)
        self.ask_slot: Callable[[RobotsHit, str, str], None] | None = None
        self.blocked_until: Callable[[str], float] = lambda domain: 0.0
        self.horizon = 1.0  # CRAWLFLEET_PACE_HORIZON: a slot beyond it was not recorded
        self.call_later: Callable[..., Any] | None = None  # the reactor's callLater (tests: a task.Clock's)
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

    def _fetch_from_thread(self, url: str, domain: str) -> None:
        """The cache claimed the fetch on the feed thread: its hit is reserved here, in the same pass (one call), and
        the reactor sends it at that slot."""
        try:
            slot, proxy = self.reserve_now(domain)
        except Exception:  # Redis away: the reactor asks the feed, whose loop retries until it answers
            logger.warning("could not reserve the robots.txt hit of %s now; asking again", url, exc_info=True)
            slot, proxy = None, None
        running_reactor().callFromThread(self._slotted, RobotsHit(url, domain, proxy), slot)

    def reserved(self, hit: RobotsHit, slot: SendSlot) -> None:
        """The feed's answer to a reservation this fetcher asked for (on the reactor)."""
        self._slotted(hit, slot)

    def _slotted(self, hit: RobotsHit, slot: SendSlot | None) -> None:
        """On the reactor: send at the slot, or ask again for one (none yet, or one beyond the horizon)."""
        now = self.clock.now()
        if slot is None or not slot.hit:
            later = 0.0 if slot is None else max(0.0, min(slot.send_at - self.horizon - now, REASK_SECONDS))
            self._call_later(later, self._ask, hit, "")
            return
        self._call_later(max(0.0, slot.send_at - now), self._at_slot, hit, slot)

    def _ask(self, hit: RobotsHit, withdrawn: str) -> None:
        if hit.url not in self.cache.claims:  # given up meanwhile: whoever claims it next fetches it
            return
        if self.ask_slot is None:  # not wired to a feed (tools, tests): unpaced
            self.fetch(hit.url)
            return
        self.ask_slot(hit, hit.domain, withdrawn)

    def _at_slot(self, hit: RobotsHit, slot: SendSlot) -> None:
        if hit.url not in self.cache.claims:
            return
        now = self.clock.now()
        blocked_until = self.blocked_until(hit.domain)
        if blocked_until > now:  # the site said 429/503 meanwhile: its slot is withdrawn, another one after the block
            self._call_later(blocked_until - now, self._ask, hit, slot.hit)
            return
        if admission(slot, now) == LATE:
            self.crawler.stats.inc_value("fleet/pace/late")
            self._ask(hit, slot.hit)
            return
        self.crawler.stats.inc_value("fleet/robots/paced")
        self.cache.claims.add(hit.url)  # the fetch's time limit counts from now: waiting for the slot is not fetching
        self.fetch(hit.url, hit.proxy)

    def _call_later(self, seconds: float, call: Callable[..., Any], *args: Any) -> None:
        if self.call_later is None:
            self.call_later = running_reactor().callLater
        self.call_later(seconds, call, *args)

    def fetch(self, url: str, proxy: Any = None) -> None:
        """Download the robots.txt of ``url``'s host now (on the reactor); the claim is this process's."""
        # No handle_httpstatus_*: downloads skip the spider middlewares anyway, and RedirectMiddleware would not
        # follow a status listed there.
        request = Request(robots_url(url), priority=1000, dont_filter=True, headers={"Accept-Encoding": "identity"},
                          meta={"dont_obey_robotstxt": True, "dont_retry": True, "redirect_ttl": MAX_REDIRECTS,
                                META: True})
        if proxy is not None:  # its hit was reserved in this proxy's per-IP window: it goes out through it
            request.meta.update(proxy=proxy.url, proxy_id=proxy.id, fleet_ip=proxy.address)
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
