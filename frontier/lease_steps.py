"""The lease steps of the politeness engine (:class:`frontier.politeness.Politeness` inherits them): acknowledge,
complete, renew and requeue the leases a take handed out.

A lease is a task moved from ``<job>:{d}:queue`` into ``<job>:{d}:inflight`` with its deadline in
``<job>:{d}:leases`` (the scores): held until acknowledged, renewed by its worker while the task is processed, put
back into the queue (in priority order) once its deadline passed. Every call is one atomic Lua script on the
domain's slot (``lua/ack.lua``, ``complete.lua``, ``renew.lua``, ``requeue.lua``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from frontier.node_pipes import run_by_node
from messaging import keys
from messaging.clients import RedisClient, as_text
from messaging.tasks import Task

LEASE_SCORES_MARGIN = 86400.0  # a dead job's lease scores vanish this long after its last lease could end
REQUEUE_BATCH = 1000
US = 1_000_000


def now_arg(now: float | None) -> str:
    """A script's ``now`` argument: microseconds, or "" for the Redis clock."""
    return "" if now is None else str(round(now * US))


@dataclass(frozen=True)
class Lease:
    domain: str
    member: str  # the task as stored in the queue and in the leases
    deadline: float  # seconds since the epoch, Redis clock
    not_before: float = 0.0  # the slot of its hit: the request may go out from then (Redis clock)...
    slack: float = 0.0  # ...until this many seconds after it; later, it reserves a new slot (Politeness.reserve)
    hit: str = ""  # the hit's member in both throttle windows (withdrawn by a re-reservation)

    @cached_property
    def task(self) -> Task:
        return Task.decode(self.member)



class LeaseSteps:
    """The lease half of :class:`~frontier.politeness.Politeness` (its scripts are registered there)."""

    redis: RedisClient
    job: str
    lease_seconds: float
    _ack: Any
    _complete: Any
    _renew: Any
    _requeue: Any

    def _count(self, plugin: str, amount: int = 1) -> None:
        raise NotImplementedError

    def ack(self, lease: Lease) -> Task | None:
        """The task is complete: release its lease. ``None`` if the lease was no longer held (refused)."""
        done = self._ack(keys=[keys.inflight(self.job, lease.domain), keys.lease_scores(self.job, lease.domain)],
                         args=[lease.member])
        if not done:
            self._count("ack_refused")
            return None
        return lease.task

    def complete(self, leases: Sequence[Lease]) -> list[Lease]:
        """Tasks are complete: acknowledge their leases and release their crawls' pending counts, atomically per
        domain (``lua/complete.lua``), one round trip for all domains (one per node on a cluster). Returns the leases
        that were still held; the caller counts exactly those for the weights (``frontier.registry``)."""
        by_domain: dict[str, list[Lease]] = {}
        for lease in leases:
            by_domain.setdefault(lease.domain, []).append(lease)
        calls = []
        for domain, held in by_domain.items():
            args: list[str] = []
            for lease in held:
                args += [lease.member, lease.task.crawlid]
            calls.append((self._complete, [keys.inflight(self.job, domain), keys.lease_scores(self.job, domain),
                                           keys.pending_domain(domain)], args))
        acked = {as_text(member) for reply in run_by_node(self.redis, calls) for member in reply}
        done = [lease for lease in leases if lease.member in acked]
        refused = len(leases) - len(done)
        if refused:
            self._count("ack_refused", refused)
        return done

    def renew(self, lease: Lease, seconds: float | None = None, now: float | None = None) -> Lease | None:
        """Extend a held lease to now + ``seconds`` (default: the lease time); ``None`` if no longer held."""
        seconds = self.lease_seconds if seconds is None else seconds
        deadline = self._renew(
            keys=[keys.inflight(self.job, lease.domain), keys.lease_scores(self.job, lease.domain)],
            args=[now_arg(now), int(seconds * US), lease.member, self.lease_scores_ttl_ms(seconds)])
        if deadline is None:
            return None
        return Lease(lease.domain, lease.member, int(deadline) / US)

    @staticmethod
    def lease_scores_ttl_ms(lease_seconds: float) -> int:
        return int((lease_seconds + LEASE_SCORES_MARGIN) * 1000)

    def requeue_expired(self, domain: str, now: float | None = None) -> list[Task]:
        """Put the job's expired leases of ``domain`` back into its queue, in their priority order."""
        return self.requeue_expired_many([domain], now)[0]

    def requeue_expired_many(self, domains: Sequence[str], now: float | None = None) -> list[list[Task]]:
        """:meth:`requeue_expired` for each of ``domains``, one round trip for all (one per node on a cluster; more
        only for a domain with more than REQUEUE_BATCH expired leases)."""
        returned: list[list[Task]] = [[] for _ in domains]
        todo = list(range(len(domains)))
        while todo:
            calls = [(self._requeue, [keys.queue(self.job, domains[n]), keys.inflight(self.job, domains[n]),
                                      keys.lease_scores(self.job, domains[n])], [now_arg(now), REQUEUE_BATCH])
                     for n in todo]
            replies = run_by_node(self.redis, calls)
            for n, batch in zip(todo, replies, strict=True):
                returned[n].extend(Task.decode(raw) for raw in batch)
            todo = [n for n, batch in zip(todo, replies, strict=True) if len(batch) >= REQUEUE_BATCH]
        total = sum(len(tasks) for tasks in returned)
        if total:
            self._count("lease_expired", total)
        return returned
