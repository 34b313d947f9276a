"""crawlfleet's distributed Scrapy scheduler: ``SCHEDULER = "spiders.worker.scheduler.FleetScheduler"``.

Work does not come from the spider's ``start()`` but from this job's domain queues in Redis, which the master fills
(``<job>:{<domain>}:queue``). The scheduler is Scrapy's scheduler interface and the send-at-slot gate, nothing more:
it builds its worker when the spider opens (:func:`spiders.worker.build.build_worker`, on a thread: every object of
the worker, once) and starts it on the reactor; the worker's feed thread (:mod:`spiders.worker.feed`) does every
blocking call, and the methods Scrapy calls on the reactor only move objects in memory:

- :meth:`FleetScheduler.next_request` hands out, first, follow-ups of tasks in progress (redirects, retries; a
  429/503 retry only after its ``not_before``), then a task the feed has already leased, made a request by the
  spider (:meth:`FleetScheduler._request_for`); every request leaves at its slot, and none while its domain is
  blocked (the gate: :class:`spiders.worker.gate.SendGate`);
- a leased task counts against the feed's prefetch until its request goes out, also while it waits here for its
  slot (:meth:`TaskFeed.sent`): the worker takes no more tasks ahead of its downloader than CRAWLFLEET_PREFETCH;
- :meth:`FleetScheduler.enqueue_request` keeps follow-ups local: they belong to the task they came from and complete
  it; where a redirect leads is asked of the crawl's dupefilter first (:meth:`FleetScheduler._redirect_is_new`);
- :meth:`FleetScheduler.has_pending_requests` stays true while the worker runs: an idle worker waits for work instead
  of closing, and the feed nudges the engine when tasks arrive (no 5-second heartbeat wait);
- a paused crawl's requests that have not gone out — held by the gate, popped from the feed, or a follow-up of a
  response that came back after the pause — are handed back to the feed unfetched (:meth:`FleetScheduler._hand_back`,
  :mod:`spiders.worker.pausing`), their tasks forgotten by the tracker.

**The seams a task goes through** (what the next changes to the task's path touch): a lease becomes a Request in
:meth:`FleetScheduler._request_for` (the spider's ``request_for``, the tracker, the slot and proxy); a Request a
callback yields becomes a child task in :func:`spiders.worker.output.child_task`; dedup is asked of the
``DUPEFILTER_CLASS`` dupefilter (:class:`spiders.dupefilter.BatchDupeFilter`) by the commit
(:meth:`spiders.worker.commit.Committer.commit`: the children, a start URL) and here (where a redirect ends).

One's own Scrapy spider (issue 35): its worker serves one crawl (:mod:`spiders.worker.own`) and closes the spider
when that crawl has finished or was stopped (reason ``finished`` or ``cancelled``), as a plain ``scrapy crawl`` ends
when its work is done; a request it schedules itself (``engine.crawl``, not a callback's output) becomes a task of
its crawl too (:meth:`FleetScheduler.enqueue_request`); where a redirect leads is checked by the project's request
fingerprint, and not at all with ``dont_filter``.

Completion (docs/architecture.md): a task is finished when the spider's output for its response was consumed and
every item it produced was stored or dropped (:class:`spiders.worker.tracker.TaskTracker`, which hears Scrapy's item
signals itself); a failed download finishes it too (the errback). Spiders ask the scheduler for a task's crawl
through :meth:`FleetScheduler.crawl_for` (``FleetSpider.crawl_for``), and the spider middleware for the tracker
(:attr:`FleetScheduler.tracker`), both public through Scrapy's ``crawler.engine.scheduler``.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from scrapy import Request, signals
from scrapy.exceptions import CloseSpider
from scrapy.utils.defer import deferred_from_coro
from twisted.internet import task, threads
from twisted.python.failure import Failure

from frontier.adaptive import Sample
from frontier.bloom.fingerprint import request_fingerprint
from frontier.client import SendSlot
from messaging.clock import Clock, MonotonicClock
from messaging.domains import host_of
from messaging.reactor import running_reactor
from messaging.tasks import CrawlState
from spiders import signals as fleet_signals
from spiders.travel import CannotTravel
from spiders.worker.build import Worker, build_worker
from spiders.worker.crawls import CrawlInfo
from spiders.worker.gate import KEY_HOST_META, KEY_META, PARTITION_META, SendGate
from spiders.worker.own import Traveller
from spiders.worker.robots import RobotsHit
from spiders.worker.start import StartOnce
from spiders.worker.take import Leased
from spiders.worker.tracker import TaskTracker

logger = logging.getLogger(__name__)
CRAWL_WATCH_SECONDS = 1.0  # how often one's own spider's worker looks (in memory) whether its crawl has ended


class FleetScheduler:
    def __init__(self, crawler: Any, clock: Clock | None = None) -> None:
        self.crawler = crawler
        self.clock = clock or MonotonicClock()  # the worker's one clock: its slots, blocks and waits
        self.worker: Worker | None = None
        self.gate: SendGate | None = None
        self._closing = False
        self._nudge_pending = False
        self._watch: Any = None  # one's own spider's worker: is its crawl still running?
        self._close_at_open: Any = None

    @classmethod
    def from_crawler(cls, crawler: Any) -> FleetScheduler:
        scheduler = cls(crawler)
        crawler.signals.connect(scheduler._storage_backlog, signal=fleet_signals.storage_backlog)
        crawler.signals.connect(scheduler._storage_state, signal=fleet_signals.storage_state)
        crawler.signals.connect(scheduler._domain_blocked, signal=fleet_signals.domain_blocked)
        crawler.signals.connect(scheduler._download_samples, signal=fleet_signals.download_samples)
        return scheduler

    # --- what spiders and middlewares ask -------------------------------------------------------------------------
    def crawl_for(self, crawlid: str) -> CrawlInfo | None:
        """The crawl's rule, limits and state, as this worker read them (``None`` before the worker runs)."""
        return self.worker.catalog.get(crawlid) if self.worker is not None else None

    @property
    def job(self) -> str | None:
        """This worker's job id (``None`` before the worker runs)."""
        return self.worker.info.job if self.worker is not None else None

    @property
    def tracker(self) -> TaskTracker | None:
        """The tracker of the tasks in progress (the spider middleware hands it each response's output)."""
        return self.worker.tracker if self.worker is not None else None

    @property
    def traveller(self) -> Traveller | None:
        """One's own spider's requests as tasks (``None`` for a rule spider, or before the worker runs)."""
        return self.worker.traveller if self.worker is not None else None

    @property
    def starts(self) -> StartOnce | None:
        """One's own spider's start requests, once per crawl (``None`` for a rule spider)."""
        return self.worker.starts if self.worker is not None else None

    # --- Scrapy's scheduler interface -----------------------------------------------------------------------------
    def open(self, spider: Any) -> Any:
        return threads.deferToThread(build_worker, self.crawler, self, self.clock).addCallbacks(self.start,
                                                                                                 self._not_built)

    def _not_built(self, failure: Failure) -> None:
        """One's own spider's worker that came after its crawl ended (``CloseSpider`` from
        :func:`spiders.worker.own.join_crawl`): the spider opens with nothing to do (``start()`` is not run) and
        closes at once with that reason (raised from ``spider_opened``: raised from here, Scrapy would close a spider
        whose scraper never opened); any other failure stops the spider as it would without the fleet."""
        if not failure.check(CloseSpider):
            failure.raiseException()
        reason = str(getattr(failure.value, "reason", "") or "cancelled")
        self._closing = True

        def close(**_: Any) -> None:
            raise CloseSpider(reason)  # Scrapy closes the spider once it is open (scraper and all)

        self._close_at_open = close  # the signal holds a weak reference
        self.crawler.signals.connect(close, signal=signals.spider_opened)

    @property
    def closing(self) -> bool:
        """Whether the spider is closing (or never had work: it came after its crawl ended)."""
        return self._closing

    def start(self, worker: Worker) -> None:
        """Serve ``worker``'s tasks (on the reactor, once it is built)."""
        self.worker = worker
        self.gate = SendGate(worker.feed, self.clock, self.crawler.stats, worker.settings.pace_horizon,
                             self._downloader_room, self._nudge_in, resolve=_resolve)
        if worker.robots is not None:  # its downloads are paced hits too: slots from the feed, blocks from the gate
            gate = self.gate
            worker.robots.ask_slot = lambda hit, domain, withdrawn: worker.feed.reserve(
                hit, domain, withdrawn, hit.proxy.address if hit.proxy is not None else None)
            worker.robots.blocked_until = lambda domain: gate.blocked.get(domain, 0.0)
        worker.start(self.crawler)
        if worker.traveller is not None:
            self._watch = task.LoopingCall(self._watch_crawl, worker.traveller.crawl.crawlid)
            self._watch.start(CRAWL_WATCH_SECONDS, now=False)
        logger.info("worker %s ready (spider type %s, host IP %s)", worker.info.job, worker.info.spider_type,
                    worker.info.ip)

    def close(self, reason: str) -> Any:
        self._closing = True
        if self._watch is not None and self._watch.running:
            self._watch.stop()
        if self.worker is None:
            return None
        if self.worker.starts is not None:
            self.worker.starts.stopping = True
        logger.info("closing (%s): committing finished tasks, handing the others back", reason)
        if self.worker.robots is not None:
            self.worker.robots.stop()
        return threads.deferToThread(self.worker.stop, reason)

    def has_pending_requests(self) -> bool:
        return not self._closing

    def enqueue_request(self, request: Request) -> bool:
        if "task" not in request.meta:
            if self.worker is not None and self.worker.traveller is not None:
                return self._push_loose(request)
            logger.warning("dropped %s: requests reach the fleet through seeds (yield them from a spider callback)",
                           request)
            return False
        assert self.gate is not None  # follow-ups come from requests the open scheduler handed out
        if self._paused(request.meta["task"].crawlid):
            self._hand_back(request)  # a redirect or retry of a paused crawl's page: it waits, parked, whole
            return True
        if request.meta.get("redirect_urls") and not request.meta.get("fleet_redirect_checked"):
            # Where a redirect leads may have been crawled already (a link to /index.html, then /): ask the
            # crawl's dupefilter first, off the reactor; a target seen before completes the task unfetched.
            request.meta["fleet_redirect_checked"] = True
            threads.deferToThread(self._redirect_is_new, request).addCallbacks(
                partial(self._redirect_checked, request), partial(self._redirect_check_failed, request))
            return True
        self.gate.hold(request)
        return True

    def next_request(self) -> Request | None:
        if self.gate is None or self.worker is None:
            return None
        held = self.gate.due()
        if held is not None:
            return held
        feed = self.worker.feed
        if self._closing or feed.paused:
            return None  # paused: storage is full; the leases wait in memory, renewed, until it drains
        while (leased := feed.pop()) is not None:
            request = self._request_for(leased)
            if request is not None and self.gate.admit(request):
                return request
        return None

    def __len__(self) -> int:
        return ((len(self.gate) if self.gate is not None else 0)
                + (len(self.worker.feed.ready) if self.worker is not None else 0))

    # --- the seams of a task's path -------------------------------------------------------------------------------
    def _request_for(self, leased: Leased) -> Request | None:
        """**Where a leased task becomes a Request**: the spider makes it (``request_for``, through the tracker,
        which follows it to its end), and it carries its send slot and the proxy its per-IP window was taken for.
        ``None``: the task was finished at once (the spider could not make a request)."""
        assert self.worker is not None  # leases are handed out by the started worker's feed
        if self._paused(leased.lease.task.crawlid):  # paused since the feed took it: back, unfetched
            self.worker.feed.hand_back(leased.lease, leased.slot.hit if leased.slot is not None else "",
                                       leased.proxy.address if leased.proxy is not None else None)
            return None
        request = self.worker.tracker.start(leased.lease)
        if request is None:
            return None
        if leased.proxy is not None:  # its per-IP window was taken for this proxy: the request goes through it
            request.meta["proxy"] = leased.proxy.url
            request.meta["proxy_id"] = leased.proxy.id
            request.meta["fleet_ip"] = leased.proxy.address  # follow-ups reserve their hits for the same address
        if leased.slot is not None:
            request.meta["fleet_slot"] = leased.slot
        # where its hits count: its lease's queue, and (for follow-ups to other hosts) its crawl's partition
        task = leased.lease.task
        crawl = self.worker.catalog.get(task.crawlid)
        request.meta[KEY_META], request.meta[KEY_HOST_META] = leased.lease.domain, host_of(task.url)
        partition = crawl.partition if crawl is not None else None
        request.meta[PARTITION_META] = partition or self.worker.settings.partition
        return request

    def _paused(self, crawlid: str) -> bool:
        crawl = self.worker.catalog.get(crawlid) if self.worker is not None else None
        return crawl is not None and crawl.paused

    def _hand_back(self, request: Request) -> None:
        """A paused crawl's request that did not go out: its task is forgotten here and its lease parked by the
        feed, with the hit of the slot it held (withdrawn)."""
        assert self.worker is not None  # requests are handed out by the started worker
        lease = self.worker.tracker.forget(request.meta.get("task_member"))
        if lease is not None:
            slot = request.meta.get("fleet_slot")
            self.worker.feed.hand_back(lease, slot.hit if slot is not None else "", request.meta.get("fleet_ip"))

    def _redirect_is_new(self, request: Request) -> bool:
        """**Where dedup is asked of a redirect** (a thread of the pool): whether its target is new to the crawl's
        dupefilter, which marks it (the redirect dupefilter's own connection; nothing counted). One's own spider's
        request is keyed by the project's fingerprint, and one with ``dont_filter`` is never asked."""
        assert self.worker is not None  # redirects are checked once the scheduler is open
        dupefilter = self.worker.redirects
        traveller = self.worker.traveller
        if traveller is not None:
            if request.dont_filter:
                return True
            fingerprint = traveller.fingerprint(request)
        else:
            fingerprint = request_fingerprint(request.url, request.method, request.body or b"")
        return dupefilter.bloom(dupefilter.namespace(request.meta)).add_fingerprints([fingerprint])[0]

    def _push_loose(self, request: Request) -> bool:
        """A request one's own spider scheduled itself (``engine.crawl``): a task of its crawl, with no parent."""
        assert self.worker is not None and self.worker.traveller is not None and self.worker.starts is not None
        traveller, committer = self.worker.traveller, self.worker.starts.committer
        try:
            loose = traveller.task(request)
        except CannotTravel as problem:
            refused = [traveller.refuse(request, problem, "to the scheduler")]
            threads.deferToThread(committer.count_refused, traveller.crawl.crawlid, refused)
            return False
        threads.deferToThread(committer.push_new, f"loose {loose.encode()}", [loose]).addErrback(
            lambda f: logger.error("could not push %s: %s", request, f.getErrorMessage()))
        return True

    def _watch_crawl(self, crawlid: str) -> None:
        """One's own spider's worker ends with its crawl (read by the feed thread every CRAWLFLEET_CRAWL_REFRESH)."""
        assert self.worker is not None
        crawl = self.worker.catalog.get(crawlid)
        if crawl is None or crawl.live or self._closing:  # a paused crawl's workers wait for its resume
            return
        reason = "finished" if crawl.state == CrawlState.FINISHED else "cancelled"
        logger.info("crawl %s is %s: closing the spider", crawlid, crawl.state or "gone")
        deferred_from_coro(self.crawler.engine.close_spider_async(reason=reason))

    def _redirect_checked(self, request: Request, new: bool) -> None:
        assert self.gate is not None and self.worker is not None  # the check was asked by the open scheduler
        if new:
            self.gate.hold(request)
        else:
            self.crawler.stats.inc_value("fleet/redirect/seen")
            self.worker.tracker.drop(request.meta.get("task_member"), request.url)

    def _redirect_check_failed(self, request: Request, failure: Failure) -> None:
        assert self.gate is not None  # the check was asked by the open scheduler
        logger.warning("could not check redirect target %s (%s); fetching it", request.url, failure.getErrorMessage())
        self.gate.hold(request)

    # --- what the worker's threads tell (spiders.worker.build.WorkerListener) -------------------------------------
    def tasks_ready(self) -> None:
        if not self._nudge_pending:
            self._nudge_pending = True
            running_reactor().callFromThread(self._nudge)

    def slot_reserved(self, token: Any, slot: SendSlot) -> None:
        running_reactor().callFromThread(self._reserved, token, slot)

    def fenced(self) -> None:
        running_reactor().callFromThread(self._fenced)

    def domain_blocked(self, domain: str, until: float) -> None:
        running_reactor().callFromThread(self._domain_blocked, domain, until)

    def crawls_paused(self, crawlids: set[str]) -> None:
        running_reactor().callFromThread(self._hold_back, crawlids)

    # --- on the reactor -------------------------------------------------------------------------------------------
    def _reserved(self, token: Any, slot: SendSlot) -> None:
        if isinstance(token, RobotsHit):
            if self.worker is not None and self.worker.robots is not None:
                self.worker.robots.reserved(token, slot)
        elif self.gate is not None:
            self.gate.reserved(token, slot)

    def _hold_back(self, crawlids: set[str]) -> None:
        """These crawls were paused: every request of theirs the gate holds goes back, unsent."""
        if self.gate is None:
            return
        for request in self.gate.withdraw(lambda r: r.meta["task"].crawlid in crawlids):
            self._hand_back(request)

    def _domain_blocked(self, domain: str, until: float, **_: Any) -> None:
        if self.gate is not None:
            self.gate.block(domain, until)

    def _nudge(self) -> None:
        self._nudge_pending = False
        slot = getattr(self.crawler.engine, "_slot", None)  # the engine's own "look at the scheduler now" call
        if slot is not None and getattr(slot, "nextcall", None) is not None:
            slot.nextcall.schedule()

    def _nudge_in(self, seconds: float) -> None:
        if seconds > 0:
            running_reactor().callLater(seconds, self._nudge)
        else:
            self._nudge()

    def _downloader_room(self) -> int:
        """Free places in Scrapy's downloader (CONCURRENT_REQUESTS minus the requests it holds), at least one."""
        downloader = getattr(self.crawler.engine, "downloader", None)
        if downloader is None:
            return 1
        room: int = downloader.total_concurrency - len(downloader.active)
        return max(1, room)

    def _storage_backlog(self, full: bool, waiting: int = 0, **_: Any) -> None:
        if self.worker is not None:
            logger.warning("storage backlog %s (%d items waiting): %s taking tasks", "full" if full else "drained",
                           waiting, "stop" if full else "resume")
            self.worker.feed.pause(full)
            if not full:
                self._nudge()

    def _storage_state(self, state: Any = None, **_: Any) -> None:
        """The item store refuses writes (a ``messaging.storage.StoreState``) or takes them again: the heartbeat
        reports it."""
        if self.worker is not None:
            self.worker.feed.store_state = state

    def _download_samples(self, samples: list[tuple[str, float, int, bool]], **_: Any) -> None:
        """Downloads ended: each adaptive site's latency or error goes to its shared delay (``frontier.adaptive``)."""
        if self.worker is None:
            return
        feed = self.worker.feed
        rates = feed.politeness.rates
        for domain, latency, status, error in samples:  # domain: the queue key its hit counted on
            if rates.rate_for(domain).adaptive:
                feed.sample(Sample(domain, latency, status, error))

    def _fenced(self) -> None:
        logger.error("this job was retired by the master: closing the spider")
        deferred_from_coro(self.crawler.engine.close_spider_async(reason="fenced"))


def _resolve(host: str) -> Any:
    """The address of ``host`` from the reactor's resolver (the host map first, Scrapy's cache: spiders.resolver)."""
    return running_reactor().resolve(host)
