"""The worker's feed: a background thread that does every blocking Redis call of the worker, so the reactor never waits.

The Scrapy scheduler (:mod:`spiders.worker.scheduler`) only moves objects in memory; this thread:

- **registers** the job (``frontier.registry``: job id, spider type, host IP identity) and starts its
  **heartbeat** (:class:`~spiders.worker.heartbeat.Heartbeat`: every CRAWLFLEET_HEARTBEAT_INTERVAL seconds, busy while
  it holds tasks) on a thread and a Redis connection of its own, so that a long walk or commit never delays it; each
  beat carries the seconds since this thread's last pass, so the registry shows a slow worker as slow, not gone;
- **takes** tasks (:class:`~spiders.worker.take.FeedTake`) with the fair walk over the job's ready index
  (:class:`frontier.domain_walk.ReadyWalk`: only due, non-empty domains are asked) over the politeness step
  (:meth:`frontier.client.FrontierClient.take`: throttles, block, robots.txt, pop and lease in one atomic call),
  keeping up to CRAWLFLEET_PREFETCH leased tasks not yet sent (ready for the downloader, or handed to the scheduler and
  waiting there for their slot: :meth:`TaskFeed.sent` frees their room); when nothing can be taken it waits as long
  as the walk says (the earliest moment a domain may open, with a back-off that grows to CRAWLFLEET_IDLE_BACKOFF_MAX
  while the queues stay empty), or until the scheduler wakes it;
- **reads** each crawl's rule and state once (:class:`~spiders.worker.crawls.CrawlCatalog`) before a task of the crawl
  is handed out, and re-reads known crawls so that a stop is noticed; tasks of a stopped crawl complete unfetched;
  a paused crawl's tasks are handed back unfetched and parked until it resumes (:mod:`spiders.worker.pausing`);
- **paces**: each lease carries the slot its hit was recorded at; the feed turns it into this process's clock
  (:class:`~spiders.worker.take.Leased`) for the scheduler, which sends the request no earlier than the slot and no
  later than its slack after it; a request without a fresh slot (a follow-up, or one that missed its slot) gets one
  from :meth:`TaskFeed.reserve` (one ``FrontierClient.reserve_many`` a batch), answered to the listener;
- **renews** the leases of tasks still being processed (items waiting for MongoDB, slow downloads) after a third of
  the lease time, and puts leases of this job that expired anyway (a task the process lost track of) back into
  their queue (:class:`~spiders.worker.leases.LeaseKeeper`); when its or the heartbeat's Redis calls work again
  after failing, first puts back the job's leases it does not hold (a lost reply, a write a restart lost);
- **commits** finished tasks in batches every CRAWLFLEET_COMMIT_INTERVAL (:class:`~spiders.worker.commit.Committer`);
- **stops** on request (SIGTERM, a full shutdown) after committing what is finished, then leaves the registry, so
  the master puts every task it still holds (prefetched, leased) back into ``seeds`` at once.

Hand-offs with the reactor are thread-safe queues; the :class:`FeedListener` (the scheduler) hears on this thread
when tasks become ready, when a slot was reserved and when the job was retired (it turns each into a
``callFromThread``). Time is one injected clock (:class:`messaging.clock.Clock`, monotonic by default), the one the
scheduler sends by.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque
from dataclasses import dataclass, fields
from typing import Any, Protocol

from frontier.adaptive import AdaptiveDelay, Sample
from frontier.client import FrontierClient, Lease, SendSlot
from frontier.registry import Fenced, WorkerInfo, WorkerRegistry
from messaging.clock import Clock, MonotonicClock
from messaging.domains import authority, domain_of
from messaging.outage import OutageLog
from messaging.settings import Settings, default
from messaging.storage import StoreState
from messaging.tasks import Task
from messaging.threadnames import name_os_thread
from spiders.worker.commit import Committer, Finished
from spiders.worker.crawls import CrawlCatalog
from spiders.worker.heartbeat import Heartbeat
from spiders.worker.leases import LeaseKeeper
from spiders.worker.pausing import Pausing
from spiders.worker.take import FeedTake, Leased

logger = logging.getLogger(__name__)
MIN_IDLE_BACKOFF = 0.05
COMMIT_BATCH = 500


@dataclass
class FeedConfig:
    """The feed's tunables: each field is the setting of its name (``prefetch``: CRAWLFLEET_PREFETCH), and its default
    the settings registry's (messaging.settings)."""

    prefetch: int = default("CRAWLFLEET_PREFETCH")
    commit_interval: float = default("CRAWLFLEET_COMMIT_INTERVAL")
    heartbeat_interval: float = default("CRAWLFLEET_HEARTBEAT_INTERVAL")
    idle_backoff_max: float = default("CRAWLFLEET_IDLE_BACKOFF_MAX")
    lease_seconds: float = default("CRAWLFLEET_LEASE_SECONDS")
    crawl_refresh: float = default("CRAWLFLEET_CRAWL_REFRESH")
    ready_reconcile: float = default("CRAWLFLEET_READY_RECONCILE")  # a full pass of the ready index's repair

    @classmethod
    def from_settings(cls, settings: Settings) -> FeedConfig:
        return cls(**{field.name: getattr(settings, field.name) for field in fields(cls)})


class FeedListener(Protocol):
    """What the feed tells its scheduler, from the feed's (or the heartbeat's) thread."""

    def tasks_ready(self) -> None:
        """Leased tasks are ready to be handed out."""
        return None

    def slot_reserved(self, token: Any, slot: SendSlot) -> None:
        """The answer to :meth:`TaskFeed.reserve`."""
        return None

    def fenced(self) -> None:
        """The job was retired by the master: the worker must stop."""
        return None

    def crawls_paused(self, crawlids: set[str]) -> None:
        """These crawls were paused: hand back (:meth:`TaskFeed.hand_back`) every request of theirs not sent yet."""
        return None


class Unheard(FeedListener):
    """A feed's listener that hears nothing (tools and tests that turn the feed's crank themselves)."""


class TaskFeed:
    def __init__(self, info: WorkerInfo, frontier: FrontierClient, registry: WorkerRegistry, catalog: CrawlCatalog,
                 committer: Committer, config: FeedConfig, listener: FeedListener | None = None, *,
                 clock: Clock | None = None, proxies: Any = None, adaptive: AdaptiveDelay | None = None,
                 beats: WorkerRegistry | None = None) -> None:
        """``proxies``: a ``spiders.proxies.ProxyChooser`` when the spider type crawls through the pool;
        ``adaptive``: the shared delays of adaptive sites (frontier.adaptive); ``beats``: the registry the
        heartbeat thread uses — give it a Redis client of its own (default: the feed's registry, whose connection
        pool hands that thread a connection of its own too)."""
        self.info = info
        self.frontier = frontier
        assert frontier.politeness is not None, "the feed takes: its frontier client needs the politeness rules"
        self.politeness = frontier.politeness
        self.registry = registry
        self.catalog = catalog
        self.committer = committer
        self.config = config
        self.listener = listener if listener is not None else Unheard()  # (a scheduler with nothing held is falsy)
        self.clock = clock if clock is not None else MonotonicClock()
        self._reserve_wanted: queue.SimpleQueue[tuple[Any, str, str, str | None]] = queue.SimpleQueue()
        self.adaptive = adaptive
        self._samples: queue.SimpleQueue[Sample] = queue.SimpleQueue()
        self.leases = LeaseKeeper(frontier, config.lease_seconds)
        self.held = self.leases.held  # every lease this worker holds -> when it was last renewed (shared)
        self.take = FeedTake(frontier, self.leases, self.clock, lambda: config.prefetch - self.prefetched(),
                             self._removed, idle_poll=config.idle_backoff_max,
                             reconcile_seconds=config.ready_reconcile, proxies=proxies)
        add_listener = getattr(self.politeness.rates, "add_listener", None)
        if add_listener is not None:  # a site's rate, window or blacklist changed: the walk asks again at once
            add_listener(self._site_changed)
        self.ready: deque[Leased] = deque()  # taken, not yet handed to the downloader (reactor pops)
        # Popped by the scheduler, their request not sent yet (waiting for its slot, a new slot or a 429's end):
        # still prefetched, so they count against CRAWLFLEET_PREFETCH with ``ready`` (else a paced site's leases
        # would pile up in the scheduler, a whole pace horizon's worth, beyond the prefetch).
        self.unsent: set[str] = set()
        self.finished: queue.SimpleQueue[Finished] = queue.SimpleQueue()
        self.paused = False  # back-pressure from storage: take nothing new
        self.store_state: StoreState | None = None  # the item store refusing writes (set on the reactor)
        self.completed = 0
        self.fenced = False
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.lock = threading.Lock()
        self.outage = OutageLog(logger, f"worker {info.job}: the feed (Redis)", clock=self.clock)
        self._fence_lock = threading.Lock()
        self.last_pass = self.clock.now()  # when this thread last began a pass (the heartbeat reports the lag)
        self.heartbeat = Heartbeat(beats or registry, info.job, config.heartbeat_interval, self._progress,
                                   on_fenced=self._fence, clock=self.clock.now, store_state=lambda: self.store_state,
                                   on_back=self._redis_back)
        self._orphans_due = False  # Redis failed and works again: leases nobody holds may be there (LeaseKeeper)
        self.pausing = Pausing(self)  # paused crawls: their tasks handed back and parked, taken up when resumed

    # --- reactor side ---------------------------------------------------------------------------------------------
    def pop(self) -> Leased | None:
        """The next leased task, with its send slot and proxy; it stays in the prefetch until its request is
        :meth:`sent` (or it finishes)."""
        with self.lock:
            leased = self.ready.popleft() if self.ready else None
            if leased is not None:
                self.unsent.add(leased.member)
        return leased

    def sent(self, member: str | None) -> None:
        """The request of a popped task went out: its room in the prefetch is free (a follow-up's: no change)."""
        if member is None:
            return
        with self.lock:
            if member not in self.unsent:
                return
            self.unsent.discard(member)
            low = self.prefetched() < self.config.prefetch // 2
        if low:
            self._wake.set()

    def prefetched(self) -> int:
        """Leased tasks whose request has not gone out: ready, or popped and waiting for their slot."""
        return len(self.ready) + len(self.unsent)

    def finish(self, finished: Finished) -> None:
        self.unsent_done(finished.lease.member)  # finished unsent (e.g. no request could be made)
        self.finished.put(finished)

    def unsent_done(self, member: str) -> None:
        """A popped task left the prefetch without its request going out (finished, or handed back)."""
        with self.lock:
            self.unsent.discard(member)

    def hand_back(self, lease: Lease, hit: str = "", ip: str | None = None) -> None:
        """A lease of a paused crawl whose request never went out (``hit``: its slot's, withdrawn): it is parked,
        unfetched, on the feed's next pass (any thread)."""
        self.pausing.hand_back(lease, hit, ip)

    def crawl_changed(self, crawlid: str, state: str = "") -> None:
        """A crawl was paused, resumed or stopped (``crawls:states``, any thread): its state is read again now."""
        self.pausing.changed(crawlid, state)

    def reserve(self, token: Any, domain: str, withdrawn: str = "", ip: str | None = None) -> None:
        """Ask for a slot for a request that has none (a follow-up) or missed its own (``withdrawn``: its hit);
        the listener's ``slot_reserved(token, slot)`` answers from the feed thread."""
        self._reserve_wanted.put((token, domain, withdrawn, ip))
        self._wake.set()

    def reserve_now(self, domain: str) -> tuple[SendSlot, Any]:
        """A hit on ``domain`` reserved at once, on this (the feed's) thread: a robots.txt download claimed in the
        pass that takes (``spiders.worker.robots``), and the proxy it goes through (its exit address's per-IP window
        holds the hit; ``None``: direct, the worker's own). Its slot may be beyond the horizon (ask again)."""
        proxy = self.take.proxies.choose(domain) if self.take.proxies is not None else None
        address = proxy.address if proxy is not None else None
        got = self.frontier.reserve(domain, ip=address)
        now = self.clock.now()
        self.take.redis_time.observe(got.now, now)
        return got.send_slot(now, address, self.take.redis_time.offset), proxy

    def sample(self, sample: Sample) -> None:
        """A download of an adaptive site ended: its latency or error joins the site's shared delay (batched)."""
        if self.adaptive is not None:
            self._samples.put(sample)

    def _site_changed(self, domain: str | None) -> None:
        """On the config watch's thread: a domain closed under the old config is asked again at the next pass (and
        every queue, when queues of the domain's hosts may follow its config: a partition by host)."""
        self.take.reopen(None if domain in self.take.hosted else domain)
        self._wake.set()

    def robots_stored(self, url: str) -> None:
        """The robots.txt this process fetched for ``url``'s host is stored: the queues whose tasks of the host
        waited for it (its domain, the host itself, its address: the crawls' partitions) are asked again at once."""
        for key in self.take.waiting_for(authority(url)) | {domain_of(url)}:
            self.take.reopen(key)
        self._wake.set()

    def pause(self, paused: bool) -> None:
        self.paused = paused
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    # --- lifecycle ------------------------------------------------------------------------------------------------
    def register(self) -> WorkerInfo:
        """Join the registry (blocking; call it off the reactor). Raises ``Fenced`` for a retired job id."""
        self.info = self.registry.register(self.info)
        return self.info

    def start(self) -> None:
        self.last_pass = self.clock.now()
        self.heartbeat.start()
        self._thread = threading.Thread(target=self._run, name=f"feed-{self.info.job}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Commit what is finished, stop taking, leave the registry (blocking; call it off the reactor)."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self._commit_all()
        self.heartbeat.stop()
        if not self.fenced:
            try:
                self.registry.leave(self.info.job)
            except Exception:  # the master retires the job after the heartbeat TTL anyway
                logger.exception("could not leave the registry; the master will retire %s after its TTL",
                                 self.info.job)
        logger.info("worker %s stopped: %d tasks completed, %d handed back", self.info.job, self.completed,
                    len(self.held))

    # --- the thread -----------------------------------------------------------------------------------------------
    def _progress(self) -> tuple[bool, float]:
        """What a heartbeat carries (read from the heartbeat thread): busy, and seconds since this thread's last
        pass. A pass ends by waiting for work (at most CRAWLFLEET_IDLE_BACKOFF_MAX): an idle worker's lag stays below
        that."""
        return bool(self.held), max(0.0, self.clock.now() - self.last_pass)

    def _fence(self) -> None:
        """The job was retired (seen by the heartbeat or by a write of this thread): stop, tell the scheduler once."""
        with self._fence_lock:
            if self.fenced:
                return
            self.fenced = True
        logger.error("job %s was retired by the master (no heartbeat in time): stopping", self.info.job)
        self._stopping.set()
        self._wake.set()
        self.listener.fenced()

    def _run(self) -> None:
        name_os_thread()  # "feed-<job>" in /proc: its CPU told apart from the reactor's (bench.crawl --profile)
        next_renew = next_refresh = next_commit = 0.0
        while not self._stopping.is_set():
            now = self.last_pass = self.clock.now()
            wait = self.config.idle_backoff_max
            try:
                if self._orphans_due:
                    self.leases.requeue_orphans()
                    self._orphans_due = False
                if self.take.redis_time.stale(now):  # slots are mapped with the fastest replies: keep them fresh
                    self.take.redis_time.probe(self.frontier.redis, self.clock)
                self._reserve_some()
                if now >= next_commit:
                    self._adapt_some()
                    self._commit_some()
                    next_commit = now + self.config.commit_interval
                if now >= next_renew:
                    self.leases.renew(now)
                    self.leases.requeue_expired(now)
                    next_renew = now + self.config.lease_seconds / 6
                if now >= next_refresh:
                    self.catalog.refresh_known()
                    self.pausing.sync()
                    next_refresh = now + self.config.crawl_refresh
                self.pausing.turn()
                if not self.paused and self.prefetched() < self.config.prefetch:
                    taken = self._fill()
                    self._feed_ok()
                    if taken:
                        continue
                    wait = min(wait, self.take.wake_in)
                self._feed_ok()
            except Fenced:
                self._fence()
                return
            except Exception as exc:  # Redis down: say so once, keep trying
                self.outage.failed(exc)
                wait = 1.0
            if not self._reserve_wanted.empty() and not self.outage.down:
                wait = 0.0
            if not self.finished.empty():
                wait = min(wait, max(0.0, next_commit - self.clock.now()))
            self._wake.wait(max(wait, 0.001))
            self.last_pass = self.clock.now()  # waiting for work is not falling behind
            self._wake.clear()

    def _feed_ok(self) -> None:
        if self.outage.ok() is not None:
            self._redis_back()

    def _redis_back(self) -> None:
        """The feed's or the heartbeat's Redis calls work again after failing: look for orphaned leases first."""
        self._orphans_due = True
        self._wake.set()

    def _fill(self) -> bool:
        """Take tasks until the prefetch is full or nothing can be taken now; True when something was taken."""
        taken = False
        while not self.paused and self.prefetched() < self.config.prefetch and not self._stopping.is_set():
            leased = self.take.next()
            if leased is None:
                break
            lease, task = leased.lease, leased.lease.task
            crawl = self.catalog.load([task.crawlid]).get(task.crawlid)
            self.held[lease.member] = (lease, self.clock.now())
            if crawl is not None and crawl.exists and not crawl.running and not crawl.paused:
                # finished a moment ago, or reopened by `crawlfleet retry` since: ask Redis before dropping it
                crawl = self.catalog.load([task.crawlid], force=True).get(task.crawlid)
            if crawl is not None and crawl.paused:
                self.pausing.park_taken(leased)
                continue
            if crawl is None or not crawl.running:
                why = "stopped" if crawl is not None and crawl.exists else "unknown"
                logger.info("dropping %s: crawl %s is %s", task.url, task.crawlid, why)
                self.finish(Finished(lease))
                continue
            if task.depth == 0:  # a start URL: mark it seen now (its children are marked when they are pushed)
                self.committer.mark_seen([task])
            with self.lock:
                was_empty = not self.ready
                self.ready.append(leased)
            taken = True
            if was_empty:
                self.listener.tasks_ready()
        if taken:
            self.listener.tasks_ready()
        return taken

    def _adapt_some(self) -> None:
        samples: list[Sample] = []
        while len(samples) < COMMIT_BATCH:
            try:
                samples.append(self._samples.get_nowait())
            except queue.Empty:
                break
        if samples and self.adaptive is not None:  # a lost batch of samples only delays the adaptation
            spacing = {s.domain: self.politeness.rates.rate_for(s.domain).spacing for s in samples}
            self.adaptive.record(samples, spacing)

    def _reserve_some(self) -> None:
        """Answer the scheduler's reserve() calls, all that wait, in one round trip."""
        wanted: list[tuple[Any, str, str, str | None]] = []
        while len(wanted) < COMMIT_BATCH:
            try:
                wanted.append(self._reserve_wanted.get_nowait())
            except queue.Empty:
                break
        if not wanted:
            return
        try:
            reservations = self.frontier.reserve_many([(domain, hit, ip) for _, domain, hit, ip in wanted])
        except Exception:
            for item in wanted:  # asked again on the next turn: no request is left without its slot
                self._reserve_wanted.put(item)
            raise
        now = self.clock.now()
        redis_time = self.take.redis_time
        for got in reservations:
            redis_time.observe(got.now, now)
        for (token, _, _, ip), got in zip(wanted, reservations, strict=True):
            self.listener.slot_reserved(token, got.send_slot(now, ip, redis_time.offset))

    def _removed(self, tasks: list[Task], reason: str, domain: str) -> None:
        """Tasks the step dropped unfetched (robots.txt disallow, blacklisted domain) from the queue ``domain`` are
        counted by reason in their crawl's exact counts (:mod:`messaging.counts`), then leave its pending counts."""
        if tasks:
            self.committer.count_unfetched(tasks, reason)
            self.registry.record_completion(self.info.job, tasks, domain=domain)

    def _commit_some(self) -> None:
        batch: list[Finished] = []
        while len(batch) < COMMIT_BATCH:
            try:
                batch.append(self.finished.get_nowait())
            except queue.Empty:
                break
        if not batch:
            return
        # a completion is a step on its domain: if Redis loses it, the orphan and expiry checks must ask there
        self.leases.attempted({finished.lease.domain for finished in batch}, self.clock.now())
        try:
            result = self.committer.commit(batch)
        except Exception:
            for finished in batch:  # kept for the next attempt: nothing finished is lost on a Redis hiccup
                self.finished.put(finished)
            raise
        for finished in batch:
            self.held.pop(finished.lease.member, None)
        self.completed += len(result.completed)
        logger.debug("committed %d tasks: %d children pushed, %d seen, %d over limits", len(batch), result.pushed,
                     result.duplicates, result.over_limit)

    def _commit_all(self) -> None:
        for _ in range(100):
            if self.finished.empty():
                return
            try:
                self._commit_some()
            except Fenced:
                self.fenced = True
                return
            except Exception:  # at shutdown: the leases expire and the tasks are redone
                logger.exception("could not commit finished tasks at shutdown; they will be crawled again")
                return

    @property
    def busy(self) -> bool:
        return bool(self.held)

    def stats(self) -> dict[str, Any]:
        return {"ready": len(self.ready), "unsent": len(self.unsent), "held": len(self.held),
                "completed": self.completed, "paused": self.paused, "skips": dict(self.take.walk.skips),
                "crawls_paused": sorted(self.pausing.paused), "parked": self.pausing.parked}
