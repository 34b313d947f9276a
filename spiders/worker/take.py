"""The feed's take (:class:`FeedTake`, held by :class:`spiders.worker.feed.TaskFeed`): the walk over the job's ready
index, batches of politeness steps per round trip, the group take of several due domains, the per-IP windows of
proxies, and the send slot each lease carries for the scheduler (on this process's clock).

A batch's first lease goes to the walk (:class:`frontier.domain_walk.ReadyWalk`), which accounts for it; the others
wait in :attr:`FeedTake.extra` and leave the ready index's gauges here (``walk.lost``). Every lease is held
(renewed: :class:`spiders.worker.leases.LeaseKeeper`) from the moment it is taken. What the feed hands to the
scheduler is a :class:`Leased`: the lease, its send slot and the proxy its per-IP window was taken for.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from frontier.client import FrontierClient, Lease, Outcome, SendSlot, TakeResult
from frontier.domain_walk import ReadyWalk
from messaging.clock import Clock, RedisTimeMap
from messaging.counts import BLACKLISTED, ROBOTS
from messaging.siteconfig import site_names
from messaging.tasks import Task
from spiders.worker.leases import LeaseKeeper

TAKE_BATCH = 16  # politeness steps per round trip (FrontierClient.take_many): 2 round trips for up to 16 tasks
TAKE_GROUP = 16  # due domains whose steps share those 2 round trips (FrontierClient.take_domains), at most


@dataclass(frozen=True)
class Leased:
    """A leased task as the feed hands it out: when its request may go out, and through which proxy (if any)."""

    lease: Lease
    slot: SendSlot | None = None
    proxy: Any = None  # spiders.proxies.Proxy: its exit address's per-IP window was taken

    @property
    def member(self) -> str:
        return self.lease.member


class FeedTake:
    """Takes the job's tasks through the frontier's client for the feed thread (not thread-safe: that thread only).

    ``room()`` is the prefetch's free places (CRAWLFLEET_PREFETCH minus the tasks leased and not yet sent);
    ``on_removed(tasks, reason, queue)`` gets the tasks a step dropped unfetched (robots.txt, a blacklisted domain)
    and the queue (its key) they left."""

    def __init__(self, frontier: FrontierClient, leases: LeaseKeeper, clock: Clock, room: Callable[[], int],
                 on_removed: Callable[[list[Task], str, str], None], *, idle_poll: float, reconcile_seconds: float,
                 proxies: Any = None) -> None:
        self.frontier = frontier
        self.leases = leases
        self.clock = clock
        self.room = room
        self.on_removed = on_removed
        self.proxies = proxies  # spiders.proxies.ProxyChooser when this spider type crawls through proxies
        self.redis_time = RedisTimeMap()  # the Redis clock on this one: every slot is mapped with it (also the feed's)
        self.extra: deque[Lease] = deque()  # leases of a step batch not yet handed out
        # hosts whose robots.txt a step found pending -> the queues whose tasks of the host it passed by: asked again
        # as soon as the robots.txt is stored (waiting_for, from the reactor)
        self._waiting: dict[str, set[str]] = {}
        self._waiting_lock = threading.Lock()
        self.hosted: set[str] = set()  # registered domains with queues of their own hosts here (a host partition)
        self._leased: dict[str, Leased] = {}  # taken, not handed out yet: their slots and proxies
        self.walk = ReadyWalk(self._take, frontier.ready, idle_poll=idle_poll, reconcile_seconds=reconcile_seconds,
                              on_removed=self._robots_removed, take_group=self._take_group)

    def next(self) -> Leased | None:
        """The next lease, with its slot and proxy: one a batch took beyond the walk's, else the walk's next;
        ``None`` when nothing can be taken now (:attr:`wake_in` says when to ask again)."""
        if self.extra:
            lease: Lease | None = self.extra.popleft()
        else:
            self.walk.group = max(1, min(TAKE_GROUP, self._free() // 2))
            result = self.walk.poll()
            lease = result.lease if result is not None else None
        if lease is None:
            return None
        return self._leased.pop(lease.member, None) or Leased(lease)

    @property
    def wake_in(self) -> float:
        return self.walk.wake_in

    def withdraw(self, crawls: set[str]) -> list[Leased]:
        """The leases of these (paused) crawls that a batch took and the walk has not handed out: they leave."""
        mine = [lease for lease in self.extra if lease.task.crawlid in crawls]
        if not mine:
            return []
        self.extra = deque(lease for lease in self.extra if lease.task.crawlid not in crawls)
        return [self._leased.pop(lease.member) if lease.member in self._leased else Leased(lease) for lease in mine]

    def waiting_for(self, host: str) -> set[str]:
        """The queues whose tasks of ``host`` (``name`` or ``name:port``) wait for its robots.txt, forgotten now that
        it is stored (any thread)."""
        with self._waiting_lock:
            return self._waiting.pop(host, set())

    def reopen(self, domain: str | None) -> None:
        """A domain closed under an old site config or robots.txt is asked again at the next pass (any thread)."""
        self.walk.reopen(domain)

    # --- the steps (the walk calls these) -------------------------------------------------------------------------
    def _take(self, domain: str) -> TakeResult:
        """The politeness step, in batches of up to :data:`TAKE_BATCH` steps per round trip while there is room in
        the prefetch; through proxies, the per-IP window is each proxy's exit address, tried in turn."""
        self.leases.attempted([domain], self.clock.now())  # before the call: its reply may be lost, not its lease
        self._note_keys([domain])
        limit = max(1, min(TAKE_BATCH, self.room()))
        candidates = self.proxies.candidates(domain) if self.proxies is not None else []
        if not candidates:
            return self._first(self.frontier.take_many(domain, limit))
        removed: list[Task] = []
        closest: TakeResult | None = None
        proxy_of: dict[str, Any] = {}
        for proxy in candidates:
            results = self.frontier.take_many(domain, limit, ip=proxy.address)
            removed += results[0].removed
            proxy_of.update((result.lease.member, proxy) for result in results if result.lease is not None)
            if results[0].lease is not None:
                self.proxies.used(domain, proxy)
            if results[0].outcome != Outcome.THROTTLED:
                results[0].removed = removed
                return self._first(results, proxy_of)
            if closest is None or results[0].wait < closest.wait:
                closest = results[0]
        assert closest is not None  # candidates is not empty: every try was throttled, one is the closest
        closest.removed = removed
        return closest

    def _take_group(self, domains: list[str]) -> list[TakeResult]:
        """The steps of several due domains in two round trips, each domain's share of the prefetch's room at once;
        through proxies, domain by domain (:meth:`_take`)."""
        if self.proxies is not None:
            return [self._take(domain) for domain in domains]
        self.leases.attempted(domains, self.clock.now())
        self._note_keys(domains)
        limit = max(1, min(TAKE_BATCH, self._free() // len(domains)))
        return [self._first(results) for results in self.frontier.take_domains(domains, limit)]

    def _note_keys(self, domains: list[str]) -> None:
        """Remember the registered domains of host keys: a change of such a domain's site config reopens them."""
        for domain in domains:
            names = site_names(domain)
            if len(names) > 1:
                self.hosted.add(names[1])

    def _free(self) -> int:
        """Free places in the prefetch: neither leased and unsent nor taken and waiting in :attr:`extra`."""
        return self.room() - len(self.extra)

    def _first(self, results: list[TakeResult], proxy_of: dict[str, Any] | None = None) -> TakeResult:
        """The walk's result of a batch of steps (the others' leases wait in :attr:`extra`); a blacklisted domain's
        dropped queue is counted as ``blacklisted`` here (the walk hands the other tasks removed, those robots.txt
        disallows, to ``on_removed``)."""
        now = self.clock.now()
        if results[0].waiting:
            with self._waiting_lock:
                for host in results[0].waiting:
                    self._waiting.setdefault(host, set()).add(results[0].domain)
        for result in results:
            self.redis_time.observe(result.now, now)
        offset = self.redis_time.offset
        last = results[-1]
        if results[0].outcome == Outcome.BLACKLISTED and results[0].removed:
            self.on_removed(results[0].removed, BLACKLISTED, results[0].domain)
            results[0].removed = []
        if results[0].lease is not None and last.outcome in Outcome.WAITING:
            results[0].wait = last.wait  # the batch ended on a refusal: the domain is due when it said
        if results[0].lease is not None:  # did the batch take the last task? then the ready index drops the domain
            results[0].drained = last.drained or last.outcome == Outcome.EMPTY
        for n, result in enumerate(results):
            if result.lease is None:
                continue
            lease = result.lease
            proxy = (proxy_of or {}).get(lease.member)
            slot = result.send_slot(now, proxy.address if proxy else None, offset)
            self._leased[lease.member] = Leased(lease, slot, proxy)
            self.leases.held[lease.member] = (lease, now)  # renewed like every lease held, also while it waits
            if n:
                self.extra.append(lease)
                self.walk.lost += 1  # the walk counts its own lease; the batch's others leave the gauges here
        return results[0]

    def _robots_removed(self, tasks: list[Task], domain: str) -> None:
        self.on_removed(tasks, ROBOTS, domain)
