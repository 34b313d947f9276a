"""crawlfleet's distributed Scrapy scheduler: ``SCHEDULER = "spiders.worker.scheduler.FleetScheduler"``.

Work does not come from the spider's ``start()`` but from this job's domain queues in Redis, which the master fills
(``<job>:{<domain>}:queue``). Every blocking call lives in the worker's feed thread (:mod:`spiders.worker.feed`);
the methods Scrapy calls on the reactor only move objects in memory:

- :meth:`next_request` hands out, first, follow-ups of tasks in progress (redirects, retries; a 429/503 retry only
  after its ``not_before``), then a task the feed has already leased, turned into a request by the spider
  (``spider.request_for(task, crawl)``);
- a leased task counts against the feed's prefetch until its request goes out, also while it waits here for its
  slot (:meth:`TaskFeed.sent`): the worker takes no more tasks ahead of its downloader than CRAWLFLEET_PREFETCH,
  however far ahead a paced site's slots are;
- every request leaves at its **slot** (the fetch-time clock of ``frontier.politeness``): a leased task's request no
  earlier than the slot its politeness step recorded the hit at and no later than the lease's slack after it; one
  that would leave later (the downloader was busy) withdraws its hit and asks the feed for a new slot, and so does
  every follow-up (a redirect or retry is one more hit on the site). The site's count of hits then matches the
  cluster's in every window. A new slot is asked for only while fewer are being asked for than the downloader has
  free places (the others wait, parked): a slot reserved for a request the downloader cannot take would be missed
  again;
- while a domain is blocked (a 429/503's Retry-After seen by any worker: this process's
  :class:`~spiders.middlewares.retry_after.RetryAfterMiddleware`, or :class:`frontier.blocks.BlockListener` for the
  others), none of its requests leaves, whatever slot it holds: the site sees nothing but what was already in flight;
- :meth:`enqueue_request` keeps follow-ups local: they belong to the task they came from and complete it;
- :meth:`has_pending_requests` stays true while the worker runs: an idle worker waits for work instead of closing,
  and the feed nudges the engine when tasks arrive (no 5-second heartbeat wait).

Completion (docs/architecture.md): a task is finished when the spider's output for its response was consumed (children
gathered by :class:`spiders.worker.output.TaskOutputMiddleware`) and every item it produced was stored or dropped
(Scrapy's ``item_scraped`` / ``item_dropped`` / ``item_error`` signals, which carry the response); a failed download
finishes it too (the errback). Finished tasks go to the feed, which commits them in batches.

robots.txt: the politeness step checks the shared cache; when a host's robots.txt is not cached yet, the feed claims
the fetch for the cluster and :class:`spiders.worker.robots.RobotsFetcher` downloads it through Scrapy's own
downloader (RFC 9309: redirects, statuses, size cap, the claim renewed while the download runs).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import socket
import time
from collections import deque
from functools import partial
from typing import Any

from scrapy import Request, signals
from scrapy.utils.defer import deferred_from_coro
from twisted.internet import threads
from twisted.python.failure import Failure

from frontier.adaptive import AdaptiveDelay, AdaptiveRule, Sample
from frontier.blocks import BlockListener
from frontier.client import FrontierClient, SendSlot
from frontier.config_watch import SiteConfigWatch
from frontier.politeness import STATS_MODULE as POLITENESS_STATS
from frontier.politeness import Politeness
from frontier.registry import WorkerInfo, WorkerRegistry
from frontier.robots_rules import MAX_REDIRECTS, product_token
from messaging import clients
from messaging.domains import domain_of
from messaging.identity import worker_ip
from messaging.outage import quiet_reconnects
from messaging.siteconfig import SitePaths
from messaging.stats import BufferedStats, Stats
from spiders import signals as fleet_signals
from spiders.dupefilter import BloomDupeFilter
from spiders.fleet_settings import crawlfleet_settings
from spiders.worker.commit import Committer
from spiders.worker.crawls import CrawlCatalog
from spiders.worker.feed import FeedConfig, TaskFeed, default_job_id
from spiders.worker.robots import RobotsFetcher, ScrapyRobots
from spiders.worker.tracker import TaskTracker

logger = logging.getLogger(__name__)
REASK_SECONDS = 1.0  # a follow-up whose slot is far ahead asks again this often (a rate raised live applies)


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
        self._blocked: dict[str, float] = {}  # domain -> until (monotonic): a 429/503 seen by any worker
        self._block_listener: BlockListener | None = None  # tells of the other workers' blocks
        self._robots_fetcher: RobotsFetcher | None = None
        self._reserving: dict[int, Request] = {}  # requests waiting for the feed to reserve their slot
        # Requests that need a new slot while the downloader has no room for them: reserved only when it has (a slot
        # reserved now would be missed again while they wait, and cost one more reservation each time).
        self._parked: deque[tuple[Request, str, str]] = deque()
        self._tokens = itertools.count()

    @classmethod
    def from_crawler(cls, crawler: Any) -> FleetScheduler:
        scheduler = cls(crawler)
        crawler.signals.connect(scheduler._item_stored, signal=signals.item_scraped)
        crawler.signals.connect(scheduler._item_lost, signal=signals.item_dropped)
        crawler.signals.connect(scheduler._item_lost, signal=signals.item_error)
        crawler.signals.connect(scheduler._storage_backlog, signal=fleet_signals.storage_backlog)
        crawler.signals.connect(scheduler._domain_blocked, signal=fleet_signals.domain_blocked)
        crawler.signals.connect(scheduler._download_sample, signal=fleet_signals.download_sample)
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
        if self._robots_fetcher is not None:
            self._robots_fetcher.stop()
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

    def _hold(self, request: Request, not_before: float = 0.0) -> None:
        not_before = max(not_before, float(request.meta.get("not_before") or 0.0))
        heapq.heappush(self._followups, (not_before, next(self._order), request))
        delay = not_before - time.monotonic()
        if delay > 0:
            from twisted.internet import reactor

            reactor.callLater(delay, self._nudge)  # type: ignore[arg-type]  # twisted types reactor as its interfaces
        else:
            self._nudge()

    def _redirect_is_new(self, request: Request) -> bool:
        return not self._redirects.request_seen(request)

    def _redirect_checked(self, request: Request, new: bool) -> None:
        if new:
            self._hold(request)
        else:
            self.crawler.stats.inc_value("fleet/redirect/seen")
            assert self.tracker is not None  # redirects are checked once the scheduler is open
            self.tracker.drop(request.meta.get("task_member"), request.url)

    def _redirect_check_failed(self, request: Request, failure: Failure) -> None:
        logger.warning("could not check redirect target %s (%s); fetching it", request.url, failure.getErrorMessage())
        self._hold(request)

    def next_request(self) -> Request | None:
        self._unpark()
        while self._followups and self._followups[0][0] <= time.monotonic():
            held = heapq.heappop(self._followups)[2]
            if self._at_its_slot(held):
                return held
        if self.feed is None or self.tracker is None or self._closing or self.feed.paused:
            return None  # paused: storage is full; the leases wait in memory, renewed, until it drains
        while (lease := self.feed.pop()) is not None:
            request = self.tracker.start(lease)
            proxy = self.feed.proxy_of.pop(lease.member, None)
            slot = self.feed.send_at.pop(lease.member, None)
            if request is None:
                continue
            if proxy is not None:  # its per-IP window was taken for this proxy: the request goes through it
                request.meta["proxy"] = proxy.url
                request.meta["proxy_id"] = proxy.id
                request.meta["fleet_ip"] = proxy.address  # follow-ups reserve their hits for the same address
            if slot is not None:
                request.meta["fleet_slot"] = slot
            if self._at_its_slot(request):
                return request
        return None

    def _at_its_slot(self, request: Request) -> bool:
        """Whether the request may go out now: within its slot's span. Too early, it waits for the slot; too late,
        or without a slot (a follow-up), it gets a new one from the feed first. While its domain is blocked (any
        worker's 429/503: :mod:`frontier.blocks`), it waits for the block's end whatever its slot."""
        slot: SendSlot | None = request.meta.get("fleet_slot")
        domain = domain_of(request.url)
        now = time.monotonic()
        blocked_until = self._blocked.get(domain, 0.0)
        if blocked_until > now:  # reserved or leased before the site said 429/503: it waits the block out, then
            self._hold(request, blocked_until)  # its slot is late and a new one is reserved (no earlier than the end)
            return False
        if slot is None or slot.domain != domain:
            self._reserve(request, domain, "")
            return False
        if now < slot.send_at:
            self._hold(request, slot.send_at)
            return False
        if now > slot.send_at + slot.slack:
            self.crawler.stats.inc_value("fleet/pace/late")
            self._reserve(request, domain, slot.hit)
            return False
        del request.meta["fleet_slot"]  # spent: a follow-up copies the meta and needs a slot of its own
        self.crawler.stats.inc_value("fleet/pace/sent")
        assert self.feed is not None  # a request with a slot was handed out by the open feed
        self.feed.sent(request.meta.get("task_member"))  # a leased task's request leaves the prefetch only now
        return True

    def _reserve(self, request: Request, domain: str, withdrawn: str) -> None:
        """Ask the feed for a new slot (``withdrawn``: the missed slot's hit, taken back) — at once while fewer
        reservations are under way than the downloader has free places, else when it has (:meth:`_unpark`): a
        request reserves only a slot it can be sent in, and one ``next_request`` never re-reserves a whole prefetch
        of late leases at once."""
        request.meta.pop("fleet_slot", None)
        if len(self._reserving) >= self._downloader_room():
            self._parked.append((request, domain, withdrawn))
            return
        self._send_reservation(request, domain, withdrawn)

    def _unpark(self) -> None:
        room = self._downloader_room()
        while self._parked and len(self._reserving) < room:
            self._send_reservation(*self._parked.popleft())

    def _downloader_room(self) -> int:
        """Free places in Scrapy's downloader (CONCURRENT_REQUESTS minus the requests it holds), at least one."""
        downloader = getattr(self.crawler.engine, "downloader", None)
        if downloader is None:
            return 1
        return max(1, downloader.total_concurrency - len(downloader.active))

    def _send_reservation(self, request: Request, domain: str, withdrawn: str) -> None:
        token = next(self._tokens)
        self._reserving[token] = request
        assert self.feed is not None  # requests are only reserved once the scheduler is open
        self.feed.reserve(token, domain, withdrawn, request.meta.get("fleet_ip"))

    def _reserved_from_thread(self, token: int, slot: SendSlot) -> None:
        from twisted.internet import reactor

        reactor.callFromThread(self._reserved, token, slot)

    def _reserved(self, token: int, slot: SendSlot) -> None:
        request = self._reserving.pop(token, None)
        if request is None:
            return
        if not slot.hit:  # due beyond the horizon, not recorded: ask again nearer the time, or within a second,
            # so that a rate raised meanwhile applies (frontier.client.FrontierClient.reserve)
            again = min(slot.send_at - self.settings.pace_horizon, time.monotonic() + REASK_SECONDS)
            self._hold(request, again)
            return
        self.crawler.stats.inc_value("fleet/pace/reserved")
        request.meta["fleet_slot"] = slot
        self._hold(request, slot.send_at)

    def __len__(self) -> int:
        return (len(self._followups) + len(self._reserving) + len(self._parked)
                + (len(self.feed.ready) if self.feed else 0))

    # --- setup (a thread) -----------------------------------------------------------------------------------------
    def _build_and_register(self, spider: Any) -> None:
        from twisted.internet import reactor

        s = self.settings
        quiet_reconnects()  # kazoo's and kafka's reconnection warnings: once per outage, not once per attempt
        redis = clients.redis_client(s)
        spider_type = getattr(spider, "spider_type", spider.name)
        job = self.crawler.settings.get("CRAWLFLEET_JOB") or getattr(spider, "job", None) or default_job_id(
            spider_type)
        spider.fleet_job = job  # every item carries it (``job``): the manager's /items/ of a job finds them
        zk = clients.zk_client(s)
        self._zk = zk
        rates = SiteConfigWatch(zk, SitePaths(s.zk_root)).start()
        robots = None
        token = product_token(s.robotstxt_user_agent)  # a bad value stops the worker here, with the reason
        if s.robotstxt_obey:
            robots = ScrapyRobots(redis, lambda url: reactor.callFromThread(self._fetch_robots, url),
                                  ttl=s.robots_ttl, error_ttl=s.robots_error_ttl, lock_seconds=s.robots_lock_seconds,
                                  outage_limit=s.robots_outage_limit,
                                  fetch_seconds=(MAX_REDIRECTS + 1) * self.crawler.settings.getfloat(
                                      "DOWNLOAD_TIMEOUT") + s.robots_lock_seconds)
        self.robots = robots
        self._counters = BufferedStats(Stats(redis, POLITENESS_STATS))  # robots_disallowed and the other outcomes
        politeness = Politeness(rates, robots, token, horizon=s.pace_horizon, slack=s.pace_slack,
                                slack_share=s.pace_slack_share, stats=self._counters)
        frontier = FrontierClient(redis, job, spider_type, worker_ip(s), politeness, lease_seconds=s.lease_seconds)
        catalog = CrawlCatalog(redis, s.crawl_refresh)
        dupefilter = BloomDupeFilter(redis, s)
        committer = Committer(redis, frontier, dupefilter, catalog)
        info = WorkerInfo(job, spider_type, worker_ip(s), s.node_name or socket.gethostname(), os.getpid())
        config = FeedConfig(prefetch=s.prefetch, commit_interval=s.commit_interval,
                            heartbeat_interval=s.heartbeat_interval, idle_backoff_max=s.idle_backoff_max,
                            lease_seconds=s.lease_seconds, crawl_refresh=s.crawl_refresh,
                            ready_reconcile=s.ready_reconcile)
        self.feed = TaskFeed(info, frontier, WorkerRegistry(redis), catalog, committer, config,
                             on_ready=self._nudge_from_thread,
                             on_fenced=lambda: reactor.callFromThread(self._fenced), proxies=self._proxies(spider_type),
                             on_reserved=self._reserved_from_thread,
                             adaptive=AdaptiveDelay(redis, AdaptiveRule(s.adaptive_target_concurrency,
                                                                        s.adaptive_max_delay)),
                             beats=WorkerRegistry(clients.redis_client(s)))  # heartbeats: a connection of their own
        self.feed.register()
        self._block_listener = BlockListener(  # a connection of its own: it waits on the channel
            clients.redis_client(s), lambda domain, until: reactor.callFromThread(self._domain_blocked, domain, until),
            name=f"blocks-{job}").start()
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
        assert self.feed is not None  # opened just before
        spider = self.spider
        spider.fleet_catalog = self.feed.catalog
        spider.fleet_tracker = self.tracker
        if self.robots is not None:
            self._robots_fetcher = RobotsFetcher(self.crawler, self.robots, on_stored=self.feed.robots_stored)
            self._robots_fetcher.start()
        self.feed.start()
        logger.info("worker %s ready (spider type %s, host IP %s)", self.feed.info.job, self.feed.info.spider_type,
                    self.feed.info.ip)

    def _shutdown(self) -> None:
        assert self.feed is not None  # shut down only after it was opened
        self.feed.stop()
        if self._block_listener is not None:
            self._block_listener.stop()
        self._counters.close()
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

    def _download_sample(self, request: Any, latency: float, status: int, error: bool, **_: Any) -> None:
        """A download ended: an adaptive site's latency or error goes to its shared delay (``frontier.adaptive``)."""
        if self.feed is None:
            return
        domain = domain_of(request.url)
        if self.feed.politeness.rates.rate_for(domain).adaptive:
            self.feed.sample(Sample(domain, latency, status, error))

    def _fenced(self) -> None:
        logger.error("this job was retired by the master: closing the spider")
        deferred_from_coro(self.crawler.engine.close_spider_async(reason="fenced"))

    def _fetch_robots(self, url: str) -> None:
        assert self._robots_fetcher is not None  # asked for only when robots.txt is obeyed: started with the feed
        self._robots_fetcher.fetch(url)
