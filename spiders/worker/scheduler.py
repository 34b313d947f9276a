"""crawlfleet's distributed Scrapy scheduler: ``SCHEDULER = "spiders.worker.scheduler.FleetScheduler"``.

Work does not come from the spider's ``start()`` but from this job's domain queues in Redis, which the master fills
(``<job>:{<domain>}:queue``). Every blocking call lives in the worker's feed thread (:mod:`spiders.worker.feed`);
the methods Scrapy calls on the reactor only move objects in memory:

- :meth:`next_request` hands out, first, follow-ups of tasks in progress (redirects, retries; a 429/503 retry only
  after its ``not_before``), then a task the feed has already leased, turned into a request by the spider
  (``spider.request_for(task, crawl)``);
- :meth:`enqueue_request` keeps follow-ups local: they belong to the task they came from and complete it;
- :meth:`has_pending_requests` stays true while the worker runs: an idle worker waits for work instead of closing,
  and the feed nudges the engine when tasks arrive (no 5-second heartbeat wait).

Completion (docs/architecture.md): a task is finished when the spider's output for its response was consumed (children
gathered by :class:`spiders.worker.output.TaskOutputMiddleware`) and every item it produced was stored or dropped
(Scrapy's ``item_scraped`` / ``item_dropped`` / ``item_error`` signals, which carry the response); a failed download
finishes it too (the errback). Finished tasks go to the feed, which commits them in batches.

robots.txt: the politeness step checks the shared cache; when a host's robots.txt is not cached yet, the feed claims
the fetch for the cluster and this scheduler downloads it through Scrapy's own downloader (``download_async``), then
publishes it from a thread.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import socket
import time
from functools import partial
from typing import Any

from scrapy import Request, signals
from scrapy.utils.defer import deferred_from_coro
from twisted.internet import threads
from twisted.python.failure import Failure

from frontier.config_watch import SiteConfigWatch
from frontier.politeness import Politeness
from frontier.registry import WorkerInfo, WorkerRegistry
from frontier.robots_cache import RobotsCache, robots_url
from messaging import clients
from messaging.identity import worker_ip
from messaging.siteconfig import SitePaths
from spiders import signals as fleet_signals
from spiders.dupefilter import BloomDupeFilter, crawlfleet_settings
from spiders.worker.commit import Committer
from spiders.worker.crawls import CrawlCatalog
from spiders.worker.feed import FeedConfig, TaskFeed, default_job_id
from spiders.worker.tracker import TaskTracker

logger = logging.getLogger(__name__)


class ScrapyRobots(RobotsCache):
    """The shared robots.txt cache, fetched through Scrapy: a miss claims the fetch and asks the reactor for it."""

    def __init__(self, redis: Any, request_fetch: Any, **kwargs: Any) -> None:
        super().__init__(redis, None, **kwargs)
        self.request_fetch = request_fetch

    def lookup(self, url: str) -> Any:
        robots = self.cached(url)
        if robots is None and self.claim(url):
            self.fetched += 1
            self.request_fetch(url)
        return robots


class FleetScheduler:
    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler
        self.settings = crawlfleet_settings(crawler.settings)
        self.feed: TaskFeed | None = None
        self.tracker: TaskTracker | None = None
        self.spider: Any = None
        self._followups: list[tuple[float, int, Request]] = []  # (not_before, order, request)
        self._order = itertools.count()
        self._closing = False
        self._nudge_pending = False
        self._blocked: dict[str, float] = {}  # domain -> until (monotonic): a 429/503 seen by this process

    @classmethod
    def from_crawler(cls, crawler: Any) -> FleetScheduler:
        scheduler = cls(crawler)
        crawler.signals.connect(scheduler._item_stored, signal=signals.item_scraped)
        crawler.signals.connect(scheduler._item_lost, signal=signals.item_dropped)
        crawler.signals.connect(scheduler._item_lost, signal=signals.item_error)
        crawler.signals.connect(scheduler._storage_backlog, signal=fleet_signals.storage_backlog)
        crawler.signals.connect(scheduler._domain_blocked, signal=fleet_signals.domain_blocked)
        return scheduler

    # --- Scrapy's scheduler interface -----------------------------------------------------------------------------
    def open(self, spider: Any) -> Any:
        self.spider = spider
        return threads.deferToThread(self._build_and_register, spider).addCallback(self._started)

    def close(self, reason: str) -> Any:
        self._closing = True
        if self.feed is None:
            return None
        logger.info("closing (%s): committing finished tasks, handing the others back", reason)
        return threads.deferToThread(self._shutdown)

    def has_pending_requests(self) -> bool:
        return not self._closing

    def enqueue_request(self, request: Request) -> bool:
        if "task" not in request.meta:
            logger.warning("dropped %s: requests reach the fleet through seeds (yield them from a spider callback)",
                           request)
            return False
        if request.meta.get("redirect_urls") and not request.meta.get("fleet_redirect_checked"):
            # Where a redirect leads may have been crawled already (a link to /index.html, then /): ask the
            # crawl's Bloom filter first, off the reactor; a target seen before completes the task unfetched.
            request.meta["fleet_redirect_checked"] = True
            threads.deferToThread(self._redirect_is_new, request).addCallbacks(
                partial(self._redirect_checked, request), partial(self._redirect_check_failed, request))
            return True
        self._hold(request)
        return True

    def _hold(self, request: Request) -> None:
        not_before = float(request.meta.get("not_before") or 0.0)
        heapq.heappush(self._followups, (not_before, next(self._order), request))
        delay = not_before - time.monotonic()
        if delay > 0:
            from twisted.internet import reactor

            reactor.callLater(delay, self._nudge)
        else:
            self._nudge()

    def _redirect_is_new(self, request: Request) -> bool:
        return not self._redirects.request_seen(request)

    def _redirect_checked(self, request: Request, new: bool) -> None:
        if new:
            self._hold(request)
        else:
            self.crawler.stats.inc_value("fleet/redirect/seen")
            self.tracker.drop(request.meta.get("task_member"), request.url)

    def _redirect_check_failed(self, request: Request, failure: Failure) -> None:
        logger.warning("could not check redirect target %s (%s); fetching it", request.url, failure.getErrorMessage())
        self._hold(request)

    def next_request(self) -> Request | None:
        if self._followups and self._followups[0][0] <= time.monotonic():
            return heapq.heappop(self._followups)[2]
        if self.feed is None or self._closing or self.feed.paused:
            return None  # paused: storage is full; the leases wait in memory, renewed, until it drains
        while (lease := self.feed.pop()) is not None:
            request = self.tracker.start(lease)
            proxy = self.feed.proxy_of.pop(lease.member, None)
            if request is None:
                continue
            if proxy is not None:  # its per-IP window was taken for this proxy: the request goes through it
                request.meta["proxy"] = proxy.url
                request.meta["proxy_id"] = proxy.id
            blocked_until = self._blocked.get(lease.domain, 0.0)
            if blocked_until > time.monotonic():  # leased before the site said 429: it waits with the retries
                request.meta["not_before"] = blocked_until
                self._hold(request)
                continue
            return request
        return None

    def __len__(self) -> int:
        return len(self._followups) + (len(self.feed.ready) if self.feed else 0)

    # --- setup (a thread) -----------------------------------------------------------------------------------------
    def _build_and_register(self, spider: Any) -> None:
        from twisted.internet import reactor

        s = self.settings
        redis = clients.redis_client(s)
        spider_type = getattr(spider, "spider_type", spider.name)
        job = self.crawler.settings.get("CRAWLFLEET_JOB") or getattr(spider, "job", None) or default_job_id(
            spider_type)
        zk = clients.zk_client(s)
        self._zk = zk
        rates = SiteConfigWatch(zk, SitePaths(s.zk_root)).start()
        robots = None
        if s.robotstxt_obey:
            robots = ScrapyRobots(redis, lambda url: reactor.callFromThread(self._fetch_robots, url),
                                  ttl=s.robots_ttl, error_ttl=s.robots_error_ttl)
        self.robots = robots
        politeness = Politeness(redis, job, spider_type, worker_ip(s), rates, robots=robots,
                                user_agent=s.robotstxt_user_agent, lease_seconds=s.lease_seconds)
        catalog = CrawlCatalog(redis, s.crawl_refresh)
        dupefilter = BloomDupeFilter(redis, s)
        committer = Committer(redis, politeness, dupefilter, catalog)
        info = WorkerInfo(job, spider_type, worker_ip(s), s.node_name or socket.gethostname(), os.getpid())
        config = FeedConfig(prefetch=s.prefetch, commit_interval=s.commit_interval,
                            heartbeat_interval=s.heartbeat_interval, idle_backoff_max=s.idle_backoff_max,
                            lease_seconds=s.lease_seconds, crawl_refresh=s.crawl_refresh)
        self.feed = TaskFeed(info, politeness, WorkerRegistry(redis), catalog, committer, config,
                             on_ready=self._nudge_from_thread,
                             on_fenced=lambda: reactor.callFromThread(self._fenced), proxies=self._proxies(spider_type),
                             beats=WorkerRegistry(clients.redis_client(s)))  # heartbeats: a connection of their own
        self.feed.register()
        self.tracker = TaskTracker(spider, catalog, politeness.admits, self.feed.finish, self.crawler.stats)
        self._redirects = BloomDupeFilter(clients.redis_client(s), s)  # used from the thread pool only

    def _proxies(self, spider_type: str) -> Any:
        """The proxy chooser when this spider type crawls through the pool (CRAWLFLEET_PROXY_SPIDER_TYPES)."""
        wanted = {name.strip() for name in self.settings.proxy_spider_types.split(",") if name.strip()}
        if spider_type not in wanted:
            return None
        from spiders.proxies import shared_chooser

        chooser = shared_chooser(self.crawler)
        if not chooser.pool.wait_loaded(30.0):
            logger.warning("the proxy pool was not read within 30 s: requests go direct until it is")
        return chooser

    def _started(self, _: Any) -> None:
        spider = self.spider
        spider.fleet_catalog = self.feed.catalog
        spider.fleet_tracker = self.tracker
        self.feed.start()
        logger.info("worker %s ready (spider type %s, host IP %s)", self.feed.info.job, self.feed.info.spider_type,
                    self.feed.info.ip)

    def _shutdown(self) -> None:
        self.feed.stop()
        try:
            self._zk.stop()
            self._zk.close()
        except Exception:  # closing a client whose server may be gone
            pass

    # --- reactor callbacks ----------------------------------------------------------------------------------------
    def _nudge_from_thread(self) -> None:
        from twisted.internet import reactor

        if not self._nudge_pending:
            self._nudge_pending = True
            reactor.callFromThread(self._nudge)

    def _nudge(self) -> None:
        self._nudge_pending = False
        slot = getattr(self.crawler.engine, "_slot", None)  # the engine's own "look at the scheduler now" call
        if slot is not None and getattr(slot, "nextcall", None) is not None:
            slot.nextcall.schedule()

    def _item_stored(self, item: Any = None, response: Any = None, **_: Any) -> None:
        if self.tracker is not None and response is not None:
            self.tracker.item_settled(response, stored=True)

    def _item_lost(self, item: Any = None, response: Any = None, **_: Any) -> None:
        """Dropped by a pipeline (e.g. a required field missing) or a pipeline failed: processed all the same."""
        if self.tracker is not None and response is not None:
            self.tracker.item_settled(response, stored=False)

    def _storage_backlog(self, full: bool, waiting: int = 0, **_: Any) -> None:
        if self.feed is not None:
            logger.warning("storage backlog %s (%d items waiting): %s taking tasks", "full" if full else "drained",
                           waiting, "stop" if full else "resume")
            self.feed.pause(full)
            if not full:
                self._nudge()

    def _domain_blocked(self, domain: str, until: float, **_: Any) -> None:
        self._blocked[domain] = max(until, self._blocked.get(domain, 0.0))
        now = time.monotonic()
        for name in [name for name, at in self._blocked.items() if at <= now]:
            del self._blocked[name]

    def _fenced(self) -> None:
        logger.error("this job was retired by the master: closing the spider")
        deferred_from_coro(self.crawler.engine.close_spider_async(reason="fenced"))

    def _fetch_robots(self, url: str) -> None:
        request = Request(robots_url(url), priority=1000, dont_filter=True,
                          meta={"dont_obey_robotstxt": True, "handle_httpstatus_all": True, "dont_retry": False})
        d = deferred_from_coro(self.crawler.engine.download_async(request))
        d.addBoth(partial(self._robots_fetched, url))

    def _robots_fetched(self, url: str, result: Any) -> None:
        s = self.settings
        status = getattr(result, "status", None)
        if isinstance(result, Failure) or status is None or status >= 500:
            why = result.getErrorMessage() if isinstance(result, Failure) else f"HTTP {status}"
            logger.warning("robots.txt for %s unavailable (%s): allowing all for %.0fs", url, why,
                           s.robots_error_ttl)
            body, ttl = "", s.robots_error_ttl
        elif status >= 400:
            body, ttl = "", s.robots_ttl  # no robots.txt: everything is allowed
        else:
            body, ttl = result.body.decode("utf-8", "replace"), s.robots_ttl
        threads.deferToThread(self.robots.store, url, body, ttl).addCallbacks(
            lambda _: self.feed.wake(), lambda f: logger.error("could not store robots.txt of %s: %s", url,
                                                                f.getErrorMessage()))

