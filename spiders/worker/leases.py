"""The feed's lease upkeep: renew the leases this worker holds, put its expired ones back into their queues.

:class:`LeaseKeeper` owns ``held`` (every lease the worker holds -> when it was last renewed), shared with the feed
(:class:`spiders.worker.feed.TaskFeed`) that adds taken leases and drops committed ones; the feed's thread calls
:meth:`LeaseKeeper.renew` and :meth:`LeaseKeeper.requeue_expired` every sixth of the lease time.
"""

from __future__ import annotations

import logging

from frontier.politeness import Lease, Politeness
from frontier.ready import ReadyIndex

logger = logging.getLogger(__name__)


class LeaseKeeper:
    def __init__(self, politeness: Politeness, index: ReadyIndex, lease_seconds: float) -> None:
        self.politeness = politeness
        self.index = index
        self.lease_seconds = lease_seconds
        self.held: dict[str, tuple[Lease, float]] = {}  # every lease this worker holds -> when it was last renewed

    def renew(self, now: float) -> None:
        """Renew the leases held for a third of the lease time (a lost one is logged and never renewed again)."""
        due = [(member, lease) for member, (lease, renewed) in list(self.held.items())
               if now - renewed >= self.lease_seconds / 3]
        for member, lease in due:
            renewed = self.politeness.renew(lease)
            if renewed is None:
                logger.warning("lease of %s was lost (expired or purged); its result will not be acknowledged",
                               lease.task.url)
                self.held[member] = (lease, float("inf"))  # never renewed again; dropped when it finishes
            else:
                self.held[member] = (renewed, now)

    def requeue_expired(self) -> None:
        """Leases of this job that expired (a task this process lost track of) go back to their domain queue."""
        held = {lease.member for lease, _ in self.held.values()}
        returned: dict[str, int] = {}
        for domain in self.politeness.domains():
            for task in self.politeness.requeue_expired(domain):
                returned[domain] = returned.get(domain, 0) + 1
                if task.encode() not in held:
                    logger.warning("lease of %s had expired: back in the queue", task.url)
        self.index.requeued(returned)  # after the queue writes: the ready index's invariant (frontier.ready)
