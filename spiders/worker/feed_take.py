"""The feed's take steps (:class:`spiders.worker.feed.TaskFeed` inherits them): batches of politeness steps per round
trip, the group take of several due domains (:meth:`frontier.client.FrontierClient.take_domains`), the per-IP
windows of proxies, and the send slot each lease carries for the scheduler (:class:`SendSlot`, on this process's
clock).

A batch's first lease goes to the walk (:class:`frontier.domain_walk.ReadyWalk`), which accounts for it; the others
wait in ``_extra`` for :meth:`TaskFeed._fill` and leave the ready index's gauges here (``walk.lost``). Every lease
is held (renewed) from the moment it is taken.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from frontier.client import FrontierClient, Lease, Outcome, SendSlot, TakeResult
from frontier.domain_walk import ReadyWalk
from messaging.counts import BLACKLISTED, ROBOTS
from messaging.tasks import Task
from spiders.worker.leases import LeaseKeeper

TAKE_BATCH = 16  # politeness steps per round trip (FrontierClient.take_many): 2 round trips for up to 16 tasks
TAKE_GROUP = 16  # due domains whose steps share those 2 round trips (FrontierClient.take_domains), at most


class TakeSteps:
    """The take half of the feed (state it shares with :class:`~spiders.worker.feed.TaskFeed`)."""

    config: Any  # spiders.worker.feed.FeedConfig
    frontier: FrontierClient
    proxies: Any
    proxy_of: dict[str, Any]
    send_at: dict[str, SendSlot]
    held: dict[str, tuple[Lease, float]]
    leases: LeaseKeeper
    _extra: deque[Lease]
    walk: ReadyWalk
    clock: Callable[[], float]

    def prefetched(self) -> int:
        raise NotImplementedError

    def _removed(self, tasks: list[Task], reason: str = ROBOTS) -> None:
        raise NotImplementedError

    def _take(self, domain: str) -> TakeResult:
        """The politeness step, in batches of up to :data:`TAKE_BATCH` steps per round trip while there is room in
        the prefetch (the walk gets the first lease, the others wait in ``_extra``); through proxies, the per-IP
        window is each proxy's exit address, tried in turn."""
        self.leases.attempted([domain], self.clock())  # before the call: its reply may be lost, not its lease
        limit = max(1, min(TAKE_BATCH, self.config.prefetch - self.prefetched()))
        candidates = self.proxies.candidates(domain) if self.proxies is not None else []
        if not candidates:
            return self._first(self.frontier.take_many(domain, limit))
        removed: list[Task] = []
        closest: TakeResult | None = None
        for proxy in candidates:
            results = self.frontier.take_many(domain, limit, ip=proxy.address)
            removed += results[0].removed
            for result in results:
                if result.lease is not None:
                    self.proxy_of[result.lease.member] = proxy
            if results[0].lease is not None:
                self.proxies.used(domain, proxy)
            if results[0].outcome != Outcome.THROTTLED:
                results[0].removed = removed
                return self._first(results)
            if closest is None or results[0].wait < closest.wait:
                closest = results[0]
        assert closest is not None  # candidates is not empty: every try was throttled, one is the closest
        closest.removed = removed
        return closest

    def _room(self) -> int:
        """Free places in the prefetch: neither ready, popped and unsent, nor taken and waiting in ``_extra``."""
        return self.config.prefetch - self.prefetched() - len(self._extra)

    def _take_group(self, domains: list[str]) -> list[TakeResult]:
        """The politeness steps of several due domains in two round trips (FrontierClient.take_domains), each domain's
        share of the prefetch's room at once; through proxies, domain by domain (:meth:`_take`)."""
        if self.proxies is not None:
            return [self._take(domain) for domain in domains]
        self.leases.attempted(domains, self.clock())
        limit = max(1, min(TAKE_BATCH, self._room() // len(domains)))
        return [self._first(results) for results in self.frontier.take_domains(domains, limit)]

    def _first(self, results: list[TakeResult]) -> TakeResult:
        """The walk's result of a batch of steps (the others' leases wait in ``_extra``); a blacklisted domain's
        dropped queue is counted as ``blacklisted`` here (the walk hands the other tasks removed, those robots.txt
        disallows, to :meth:`_removed`)."""
        now = self.clock()
        last = results[-1]
        if results[0].outcome == Outcome.BLACKLISTED and results[0].removed:
            self._removed(results[0].removed, reason=BLACKLISTED)
            results[0].removed = []
        if results[0].lease is not None and last.outcome in Outcome.WAITING:
            results[0].wait = last.wait  # the batch ended on a refusal: the domain is due when it said
        if results[0].lease is not None:  # did the batch take the last task? then the ready index drops the domain
            results[0].drained = last.drained or last.outcome == Outcome.EMPTY
        for n, result in enumerate(results):
            if result.lease is None:
                continue
            lease = result.lease
            proxy = self.proxy_of.get(lease.member)
            self.send_at[lease.member] = result.send_slot(now, proxy.address if proxy else None)
            self.held[lease.member] = (lease, now)  # renewed like every lease held, also while it waits in the walk
            if n:
                self._extra.append(lease)
                self.walk.lost += 1  # the walk counts its own lease; the batch's others leave the gauges here
        return results[0]
