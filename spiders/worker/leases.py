"""The feed's lease upkeep: renew the leases this worker holds, put its expired ones back into their queues.

:class:`LeaseKeeper` owns ``held`` (every lease the worker holds -> when it was last renewed), shared with the feed
(:class:`spiders.worker.feed.TaskFeed`) that adds taken leases and drops committed ones; the feed's thread calls
:meth:`LeaseKeeper.renew` and :meth:`LeaseKeeper.requeue_expired` every sixth of the lease time. The take steps
report the domains they asked (:meth:`LeaseKeeper.attempted`), so that the expiry check asks only those — not
every domain of the job, whose number grows with the crawl (``<job>:domains``) while the takes do not.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from frontier.client import FrontierClient, Lease

logger = logging.getLogger(__name__)


class LeaseKeeper:
    def __init__(self, frontier: FrontierClient, lease_seconds: float) -> None:
        self.frontier = frontier
        self.lease_seconds = lease_seconds
        self.held: dict[str, tuple[Lease, float]] = {}  # every lease this worker holds -> when it was last renewed
        self._since: dict[str, float] = {}  # domain -> the first take sent to it that no expiry check covers yet
        self._last: dict[str, float] = {}  # domain -> the last take sent to it

    def renew(self, now: float) -> None:
        """Renew the leases held for a third of the lease time (a lost one is logged and never renewed again)."""
        due = [(member, lease) for member, (lease, renewed) in list(self.held.items())
               if now - renewed >= self.lease_seconds / 3]
        for member, lease in due:
            renewed = self.frontier.renew(lease)
            if renewed is None:
                logger.warning("lease of %s was lost (expired or purged); its result will not be acknowledged",
                               lease.task.url)
                self.held[member] = (lease, float("inf"))  # never renewed again; dropped when it finishes
            else:
                self.held[member] = (renewed, now)

    def requeue_orphans(self) -> int:
        """After the feed's Redis calls failed and work again: the job's leases this worker does not hold go back to
        their queues now, in the domains it sent steps to (takes and completions) and those of its held leases.

        A call Redis ran whose reply was lost leaves a lease nobody processes (a take), and a Redis restarted from an
        AOF that missed its last answered writes undoes completions, leaving leases nobody holds; either would wait
        for its deadline (and its domain's next expiry check: up to twice the lease time) and hold its crawl's end so
        long. Race-free on the feed's thread, which alone takes, completes and drops held leases. Returns how many
        tasks went back."""
        members: dict[str, list[str]] = {domain: [] for domain in self._last}
        for lease, _ in self.held.values():
            members.setdefault(lease.domain, []).append(lease.member)
        if not members:
            return 0
        returned = {domain: len(tasks) for domain, tasks in zip(members, self.frontier.requeue_orphans_many(members),
                                                                  strict=True) if tasks}
        self.frontier.ready.requeued(returned)  # after the queue writes: the ready index's invariant (frontier.client)
        if returned:
            logger.warning("%d leases nobody held after the outage (a lost reply or a lost write) back in the queues",
                           sum(returned.values()))
        return sum(returned.values())

    def attempted(self, domains: Iterable[str], now: float) -> None:
        """Take steps were sent for these domains (a lease may have been recorded even if the reply was lost)."""
        for domain in domains:
            self._since.setdefault(domain, now)
            self._last[domain] = now

    def requeue_expired(self, now: float) -> int:
        """Leases of this job that expired (a task this process lost track of) go back to their domain queue.

        Only the domains a take was sent to at least a lease time (and a renew period) ago are asked, in one round
        trip: a lease can only be in ``<job>:{d}:inflight`` if this job sent a step to ``d``, and cannot expire
        before its lease time has passed. Each domain is asked again a lease time after the takes that followed its
        last check, so a lost lease goes back within twice the lease time; the cost is that of the domains taken
        from, not of every domain of the job. Returns how many tasks went back."""
        age = self.lease_seconds + self.lease_seconds / 6  # the renew period: margin for the clocks' drift
        due = [domain for domain, since in self._since.items() if now - since >= age]
        if not due:
            return 0
        held = {lease.member for lease, _ in self.held.values()}
        returned: dict[str, int] = {}
        for domain, tasks in zip(due, self.frontier.requeue_expired_many(due), strict=True):
            for task in tasks:
                returned[domain] = returned.get(domain, 0) + 1
                if task.encode() not in held:
                    logger.warning("lease of %s had expired: back in the queue", task.url)
        self.frontier.ready.requeued(returned)  # after the queue writes: the ready index's invariant (frontier.client)
        for domain in due:
            if now - self._last[domain] >= age:  # every take sent to it is covered by this check
                del self._since[domain], self._last[domain]
            else:  # takes since: the next check, a lease time from now, covers them
                self._since[domain] = now
        return sum(returned.values())
