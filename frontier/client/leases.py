"""One job's leases: acknowledged, completed, renewed, put back when they expired; a retired job's tasks collected.

A lease is a task moved from ``<job>:{d}:queue`` into ``<job>:{d}:inflight`` with its deadline as score and its
queue score in ``<job>:{d}:leasescores``: held until acknowledged, renewed by its worker while the task is
processed, put back into the queue (at its old place in priority order) once its deadline passed. Every call is one
atomic Lua script on the domain's slot (``lua/ack.lua``, ``complete.lua``, ``renew.lua``, ``requeue.lua``); a
retired job's queue and leases move into an outbox and, once reseeded by the master, leave the crawls' pending
counts (``retired_collect.lua``, ``retired_release.lua``; the three steps: :mod:`master.requeue`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from frontier.client import lua
from frontier.client.types import US, Lease, now_arg
from frontier.node_pipes import run_by_node
from frontier.politeness import Tally
from messaging import keys
from messaging.clients import RedisClient, as_text
from messaging.scripts import run_scripts
from messaging.tasks import Task

LEASE_SCORES_MARGIN = 86400.0  # a dead job's lease scores vanish this long after its last lease could end
REQUEUE_BATCH = 1000


def lease_scores_ttl_ms(lease_seconds: float) -> int:
    return int((lease_seconds + LEASE_SCORES_MARGIN) * 1000)


class Leases:
    """The leases of ``job``; refusals and expiries are counted in ``tally``."""

    def __init__(self, redis: RedisClient, job: str, lease_seconds: float, tally: Tally) -> None:
        self.redis = redis
        self.job = job
        self.lease_seconds = lease_seconds
        self.tally = tally
        self._ack = lua.ACK.on(redis)
        self._complete = lua.COMPLETE.on(redis)
        self._renew = lua.RENEW.on(redis)
        self._requeue = lua.REQUEUE.on(redis)
        self._requeue_orphans = lua.REQUEUE_ORPHANS.on(redis)
        self._collect = lua.RETIRED_COLLECT.on(redis)
        self._release = lua.RETIRED_RELEASE.on(redis)

    def ack(self, lease: Lease) -> Task | None:
        """The task is complete: release its lease. ``None`` if the lease was no longer held (refused)."""
        done = self._ack(keys=[keys.inflight(self.job, lease.domain), keys.lease_scores(self.job, lease.domain)],
                         args=[lease.member])
        if not done:
            self.tally.incr("ack_refused")
            return None
        return lease.task

    def complete(self, leases: Sequence[Lease]) -> list[Lease]:
        """Acknowledge leases and release their crawls' pending counts, atomically per domain, one round trip for
        all domains (one per node on a cluster). Returns the leases that were still held."""
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
            self.tally.incr("ack_refused", refused)
        return done

    def renew(self, lease: Lease, seconds: float | None = None, now: float | None = None) -> Lease | None:
        """Extend a held lease to now + ``seconds`` (default: the lease time); ``None`` if no longer held."""
        seconds = self.lease_seconds if seconds is None else seconds
        deadline = self._renew(
            keys=[keys.inflight(self.job, lease.domain), keys.lease_scores(self.job, lease.domain)],
            args=[now_arg(now), int(seconds * US), lease.member, lease_scores_ttl_ms(seconds)])
        if deadline is None:
            return None
        return Lease(lease.domain, lease.member, int(deadline) / US)

    def requeue_expired_many(self, domains: Sequence[str], now: float | None = None) -> list[list[Task]]:
        """Put the job's expired leases of each domain back into its queue, in their priority order: one round trip
        for all (one per node on a cluster; more only for a domain with more than REQUEUE_BATCH expired leases)."""
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
            self.tally.incr("lease_expired", total)
        return returned

    def requeue_orphans_many(self, held: Mapping[str, Sequence[str]]) -> list[list[Task]]:
        """Put the job's leases that its worker does not hold back into their queues, whatever their deadline:
        ``held`` maps each domain to ask to the tasks (lease members) the worker holds there. One round trip for all
        (one per node on a cluster); returns each domain's returned tasks, in ``held``'s order."""
        domains = list(held)
        calls = [(self._requeue_orphans, [keys.queue(self.job, d), keys.inflight(self.job, d),
                                          keys.lease_scores(self.job, d)], list(held[d])) for d in domains]
        returned = [[Task.decode(raw) for raw in batch] for batch in run_by_node(self.redis, calls)]
        total = sum(len(tasks) for tasks in returned)
        if total:
            self.tally.incr("lease_orphaned", total)
        return returned

    # --- a retired job (the master's requeue) ---------------------------------------------------------------------
    def collect_retired(self, domains: Sequence[str]) -> list[list[str]]:
        """Step 1 of a retired job's requeue: each domain's queue, leases and parked tasks (of paused crawls) move
        into its outbox (merged with what an interrupted requeue left there); returns each outbox's tasks. A lease
        the job acknowledges later is no longer held: refused, so nothing is counted twice."""
        collected = run_scripts(self.redis, [
            (self._collect, [keys.queue(self.job, d), keys.inflight(self.job, d), keys.lease_scores(self.job, d),
                             keys.requeue_outbox(self.job, d), keys.parked(self.job, d)], []) for d in domains])
        return [[as_text(task) for task in tasks] for tasks in collected]

    def release_retired(self, domain: str, per_crawl: Mapping[str, int]) -> bool:
        """Step 3, after the outbox's tasks were reseeded: they leave the domain's pending counts, once (the
        outbox is deleted in the same call). False when it was done already."""
        args: list[Any] = []
        for crawlid, n in per_crawl.items():
            args += [crawlid, n]
        return bool(int(self._release(keys=[keys.requeue_outbox(self.job, domain), keys.pending_domain(domain)],
                                      args=args)))
