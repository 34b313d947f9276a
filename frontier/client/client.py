"""The frontier's client: one job's face of the queue/lease protocol (the operations: :mod:`frontier.client`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from frontier.client import lua
from frontier.client.leases import Leases
from frontier.client.parking import HandedBack, Parking
from frontier.client.reader import FrontierReader
from frontier.client.ready import ReadyIndex
from frontier.client.robots import RobotsRecords
from frontier.client.take import Taker
from frontier.client.types import US, Lease, Reservation, TakeResult, now_arg
from frontier.politeness import Politeness, Tally, retry_after_seconds
from messaging import keys
from messaging.clients import RedisClient
from messaging.clock import RedisClock
from messaging.domains import domain_of
from messaging.tasks import Task


def block_domain(redis: RedisClient, domain: str, seconds: float, now: float | None = None) -> float:
    """Hold every worker of the cluster off ``domain`` for ``seconds`` (``block:{<domain>}``, only ever extended,
    ``lua/block.lua``; the politeness step refuses the domain until it ends, and
    :class:`frontier.blocks.BlockListener` tells every worker at once, on ``keys.BLOCKS_CHANNEL``); returns when the
    block ends (Redis time, seconds). ``now`` (seconds) replaces the Redis clock in tests."""
    until = lua.BLOCK.on(redis)(keys=[keys.block(domain)],
                                args=[now_arg(now), max(0.0, float(seconds)), keys.BLOCKS_CHANNEL, domain])
    return int(until) / US


class FrontierClient:
    """The frontier as one job sees it (job id, spider type, host IP identity): it takes, reserves, completes,
    renews and requeues that job's tasks; blocks domains; and holds the job's ready index and the cluster's
    robots.txt records. Taking and reserving apply ``politeness``'s rules; a client without them (the master's,
    a tool's) only does the rest. Outcomes are counted in the rules' tally (one per worker)."""

    def __init__(self, redis: RedisClient, job: str = "", spider_type: str = "", ip: str = "",
                 politeness: Politeness | None = None, *, lease_seconds: float = 600.0) -> None:
        self.redis = redis
        self.job = job
        self.spider_type = spider_type
        self.ip = ip
        self.politeness = politeness
        self.tally = politeness.tally if politeness is not None else Tally()
        self.leases = Leases(redis, job, lease_seconds, self.tally)
        self.ready = ReadyIndex(redis, job, spider_type)  # the job's domains by when each may next be fetched
        self.robots = RobotsRecords(redis)  # robots.txt of every host: claim, store, outage (frontier.robots_cache)
        self.parking = Parking(redis, job, spider_type, ip)  # tasks of paused crawls, set aside (messaging.pause)
        self._taker = Taker(redis, job, spider_type, ip, politeness, lease_seconds) if politeness is not None else None

    @property
    def lease_seconds(self) -> float:
        """How long a lease lasts unless renewed (CRAWLFLEET_LEASE_SECONDS)."""
        return self.leases.lease_seconds

    @property
    def counts(self) -> Counter[str]:
        return self.tally.counts

    @property
    def taker(self) -> Taker:
        if self._taker is None:
            raise RuntimeError("this frontier client has no politeness rules: it cannot take or reserve")
        return self._taker

    # --- take -----------------------------------------------------------------------------------------------------
    def take(self, domain: str, now: float | None = None, ip: str | None = None) -> TakeResult:
        """One politeness step for ``domain``: a leased task (its slot: :meth:`TakeResult.send_slot`), or why not
        and how long to wait (:mod:`frontier.client.take`). ``ip``: a proxy's exit address, if not this host's."""
        return self.taker.take(domain, now, ip)

    def take_many(self, domain: str, limit: int, now: float | None = None,
                  ip: str | None = None) -> list[TakeResult]:
        """Up to ``limit`` steps for ``domain`` in two round trips: the steps that took, then the first refusal."""
        return self.taker.take_many(domain, limit, now, ip)

    def take_domains(self, domains: Sequence[str], limit: int, ip: str | None = None) -> list[list[TakeResult]]:
        """:meth:`take_many` for a group of due domains, in the same two round trips."""
        return self.taker.take_domains(domains, limit, ip)

    def reserve(self, domain: str, withdrawn: str = "", now: float | None = None,
                ip: str | None = None) -> Reservation:
        """Reserve a hit on ``domain`` for a request that goes out without a fresh slot: a follow-up of a task (a
        redirect, a retry), or a request that missed its slot (``withdrawn``: its hit, which is taken back). A slot
        beyond the horizon is only reported (``Reservation.recorded`` false): ask again then."""
        return self.taker.reserve_many([(domain, withdrawn, ip)], now)[0]

    def reserve_many(self, wanted: Sequence[tuple[str, str, str | None]],
                     now: float | None = None) -> list[Reservation]:
        """:meth:`reserve` for ``(domain, withdrawn hit, ip)`` each, in one round trip on a plain Redis."""
        return self.taker.reserve_many(wanted, now)

    # --- leases ---------------------------------------------------------------------------------------------------
    def ack(self, lease: Lease) -> Task | None:
        """The task is complete: release its lease. ``None`` if the lease was no longer held (refused)."""
        return self.leases.ack(lease)

    def complete(self, leases: Sequence[Lease]) -> list[Lease]:
        """Tasks are complete: their leases acknowledged and their crawls' pending counts released, atomically per
        domain (``lua/complete.lua``). Returns the leases still held: the caller counts exactly those for the
        weights (``frontier.registry``)."""
        return self.leases.complete(leases)

    def renew(self, lease: Lease, seconds: float | None = None, now: float | None = None) -> Lease | None:
        """Extend a held lease to now + ``seconds`` (default: the lease time); ``None`` if no longer held."""
        return self.leases.renew(lease, seconds, now)

    def requeue_expired(self, domain: str, now: float | None = None) -> list[Task]:
        """Put the job's expired leases of ``domain`` back into its queue, in their priority order."""
        return self.leases.requeue_expired_many([domain], now)[0]

    def requeue_expired_many(self, domains: Sequence[str], now: float | None = None) -> list[list[Task]]:
        """:meth:`requeue_expired` for each of ``domains``, one round trip for all (one per node on a cluster)."""
        return self.leases.requeue_expired_many(domains, now)

    def requeue_orphans_many(self, held: Mapping[str, Sequence[str]]) -> list[list[Task]]:
        """The job's leases of each domain of ``held`` that are not among its tasks there, back into their queues
        now (``lua/requeue_orphans.lua``): after an outage, the leases a lost reply or a lost write left to nobody."""
        return self.leases.requeue_orphans_many(held)

    # --- paused crawls (messaging.pause) ---------------------------------------------------------------------------
    def park(self, handed: Sequence[HandedBack]) -> list[Lease]:
        """Leases of paused crawls handed back unfetched: into the job's parked tasks, their hits withdrawn
        (``lua/park.lua``); returns those that were still held."""
        return self.parking.park(handed)

    def park_queued(self, domains: Sequence[str], crawlids: Sequence[str]) -> dict[str, int]:
        """What the job's queues of ``domains`` hold of these paused crawls, parked; domain -> tasks parked."""
        return self.parking.park_queued(domains, crawlids)

    def unpark(self, domains: Sequence[str], crawlid: str) -> dict[str, int]:
        """A resumed crawl's parked tasks back into the job's queues, and those domains into its ready index;
        domain -> tasks queued again."""
        back = self.parking.unpark(domains, crawlid)
        self.ready.requeued(back)  # after the queue writes: the ready index's invariant (frontier.client.ready)
        return back

    # --- a retired job's tasks back (master.requeue runs the three steps) -----------------------------------------
    def collect_retired(self, domains: Sequence[str]) -> list[list[str]]:
        """Step 1: each domain's queue and leases into its outbox; returns each outbox's tasks."""
        return self.leases.collect_retired(domains)

    def release_retired(self, domain: str, per_crawl: Mapping[str, int]) -> bool:
        """Step 3, once reseeded: the outbox's tasks leave the domain's pending counts (once)."""
        return self.leases.release_retired(domain, per_crawl)

    def forget_domains(self, domains: Sequence[str]) -> None:
        """These domains leave the job's domain set (nothing of the job is left in them)."""
        if domains:
            self.redis.srem(keys.job_domains(self.job), *domains)

    def forget_if_empty(self, spider_type: str) -> bool:
        """Once no domain is left: the job's domain set, ready index and gauge go (True); what the gauge held
        leaves ``spider_type``'s (see :meth:`ReadyIndex.forget`)."""
        if self.redis.scard(keys.job_domains(self.job)):
            return False
        self.redis.delete(keys.job_domains(self.job))
        self.ready.forget(spider_type)
        return True

    # --- domains --------------------------------------------------------------------------------------------------
    def domains(self) -> list[str]:
        """The domains this job has queues for (maintained by the dispatcher in ``<job>:domains``), sorted."""
        return FrontierReader(self.redis).job_domains(self.job)

    def ready_count(self) -> int:
        """The job's queued (not leased) tasks, from its ready index's gauge."""
        return self.ready.count()

    def drop_queue(self, domain: str) -> list[Task]:
        """Empty the job's queue of a (blacklisted) domain; the dropped tasks are counted and returned."""
        return self.taker.drop_queue(domain)

    def block(self, domain: str, seconds: float, now: float | None = None) -> float:
        """Hold every worker of the cluster off ``domain`` for ``seconds`` (:func:`frontier.blocks.block_domain`);
        returns when the block ends (Redis time)."""
        until = block_domain(self.redis, domain, seconds, now)
        self.tally.incr("blocks")
        return until

    def block_from_response(self, url: str, status: int, retry_after: str | bytes | None,
                            now: float | None = None, default: float = 60.0) -> float | None:
        """Block the URL's domain after a 429/503 for its Retry-After (``default`` seconds without one)."""
        if status not in (429, 503):
            return None
        current = now if now is not None else RedisClock(self.redis).now()
        return self.block(domain_of(url), retry_after_seconds(retry_after, current, default), now)
