"""A job's ready index: its domains ordered by when each may next be fetched (URLFrontier, Heritrix, Nutch).

The domain walk (:mod:`frontier.domain_walk`) used to ask the politeness step of every domain of its job in turn,
empty ones included: its cost per page grew with the number of domains. With the index it asks Redis only for the
domains that are due (``ZRANGEBYSCORE -inf now LIMIT``, oldest due first: fair among due domains) in one call per
batch (``lua/ready_walk.lua``), which also writes back what the last batch learnt: a domain that gave a task is due
again now (behind every domain already due), a throttled or blocked one when the step says it may open (the slot of
its next hit, the block's end), an empty one leaves the index. Inside a domain the step takes by priority, as before.

Keys (``messaging.keys``): ``<job>:{<job>}:ready`` (zset, score: microseconds, Redis clock), the job's gauge of
queued tasks ``<job>:{<job>}:readytasks`` and one gauge per spider type ``readytasks:<spider_type>`` (the key an
autoscaler such as KEDA reads).

**The invariant.** On a Redis Cluster a domain's queue (slot of the domain) and the job's index (slot of the job)
cannot change in one atomic call, so the index is a *hint that is never wrong in the unsafe direction*: a domain
whose queue holds tasks is in the index, or will be within a bounded time. Every writer keeps it:

- **landing adds after the tasks land**: the master's dispatch (``master/staging.py``), expired leases put back
  (:meth:`ReadyIndex.requeued`) and the reconcile add the domain (``ZADD NX``, ``lua/ready_add.lua``) only once
  their call that filled the queue has returned;
- **removal re-checks**: a step that found the queue empty removes the domain (``ZREM``) and only *then* looks at
  the queue again (``EXISTS``); a queue that filled meanwhile puts it back. Either the landing's queue write came
  before that look (the walk sees it and re-adds), or after it — and so the landing's index write comes after the
  removal and re-adds it. Only the walk of the job removes, and only in this order;
- **a crash between the two writes** (a master between landing and indexing, a worker between removing and
  re-checking) can lose an entry: :meth:`ReadyIndex.reconcile` walks ``<job>:domains`` a slice per second
  (``SSCAN``; ``ZMSCORE`` for the slice, ``EXISTS`` only for the domains missing from the index) and adds back
  every missing domain with tasks, so a full pass takes CRAWLFLEET_READY_RECONCILE seconds whatever the number
  of domains, and no queued task waits longer than that for its domain to be walked again.

The index is never wrong in the other direction for long either: a domain in the index with an empty queue costs
one step, which removes it. Due times use the Redis clock of the index's node; on a cluster the domain's node may
differ by the nodes' clock skew, which only moves a probe that much earlier or later (the step decides).

The gauges are kept by the same calls (landing up, take and drops down, expired leases up) and are not part of the
invariant: a crash between a queue write and a gauge write leaves them off by that batch until the master retires
the job (its gauge then leaves the spider type's).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from frontier.client import lua
from frontier.client.types import US
from messaging import keys
from messaging.clients import as_text
from messaging.scripts import is_cluster, run_scripts

RECONCILE_MIN_SLICE = 100  # domains looked at per reconcile tick, at least
NONEMPTY_CHUNK = 1000  # queues one EXISTS counts


@dataclass
class Due:
    """The answer of one walk call: Redis time, due domains (oldest first), and the earliest later due time."""

    now: float  # seconds, Redis clock
    domains: list[str]
    next_due: float | None  # seconds, Redis clock; None: the index is empty


def _us(seconds: float) -> str:
    return str(round(seconds * US))


class ReadyIndex:
    """One job's ready index (read and pruned by the job's worker; added to by whoever fills its queues)."""

    def __init__(self, redis: Any, job: str, spider_type: str, batch: int = 64) -> None:
        self.redis = redis
        self.job = job
        self.spider_type = spider_type
        self.batch = batch
        self._walk = lua.READY_WALK.on(redis)
        self._add = lua.READY_ADD.on(redis)
        self._cursor = 0  # the reconcile's SSCAN cursor over <job>:domains
        self.reconciled = 0  # domains the reconcile put back (an index update had been lost)

    # --- the walk -------------------------------------------------------------------------------------------------
    def due(self, updates: Sequence[tuple[str, str]] = (), lost: int = 0, reopen_all: bool = False,
            limit: int | None = None, now: float | None = None) -> Due:
        """Apply ``updates`` ((domain, op) of ``lua/ready_walk.lua``), lower the gauges by ``lost`` tasks, read up to
        ``limit`` due domains. One round trip on a plain Redis (two on a cluster when ``lost``)."""
        args: list[Any] = ["" if now is None else _us(now), limit or self.batch, int(reopen_all), int(lost)]
        for domain, op in updates:
            args += [domain, op]
        script_keys = [keys.ready(self.job), keys.ready_tasks(self.job)]
        if lost and not is_cluster(self.redis):
            pipe = self.redis.pipeline(transaction=False)
            self._walk(keys=script_keys, args=args, client=pipe)
            pipe.decrby(keys.ready_tasks_type(self.spider_type), int(lost))
            reply = pipe.execute()[0]
        else:
            reply = self._walk(keys=script_keys, args=args)
            if lost:
                self.redis.decrby(keys.ready_tasks_type(self.spider_type), int(lost))
        next_us = int(reply[1])
        return Due(int(reply[0]) / US, [as_text(d) for d in reply[2:]], None if next_us < 0 else next_us / US)

    def nonempty(self, domains: Iterable[str]) -> list[str]:
        """Of ``domains``, those whose queue holds tasks now. On a single server one ``EXISTS`` of all their queues
        first (it counts them): nearly always none holds any (the walk's re-check after a removal, the reconcile's
        domains missing from the index, a whole slice of a broad crawl's drained domains each second), and only a
        count above 0 asks each queue (one EXISTS each, pipelined; always so on a Redis Cluster, where the queues
        live in their domains' slots)."""
        domains = list(domains)
        if not domains:
            return []
        if len(domains) > 1 and not is_cluster(self.redis):
            for start in range(0, len(domains), NONEMPTY_CHUNK):
                if self.redis.exists(*(keys.queue(self.job, d) for d in domains[start:start + NONEMPTY_CHUNK])):
                    break
            else:
                return []
        pipe = self.redis.pipeline(transaction=False)
        for domain in domains:
            pipe.exists(keys.queue(self.job, domain))
        return [domain for domain, found in zip(domains, pipe.execute(), strict=True) if found]

    @staticmethod
    def set_op(due_at: float) -> str:
        return "=" + _us(due_at)

    REMOVE = "-"  # the step found the queue empty (re-checked by the walk after the removal)
    ADD = "+"  # due now, if absent (a queue found non-empty after its removal)
    REOPEN = "!"  # due now, if present and later (the site's config changed)

    # --- writers that fill queues ---------------------------------------------------------------------------------
    def requeued(self, counts: Mapping[str, int]) -> None:
        """Tasks went back into these domains' queues (expired leases): call after the queue write returned."""
        add_to_index(self.redis, self.job, self.spider_type, counts)

    def reconcile(self, period: float, tick: float) -> int:
        """One slice of the repair pass (call every ``tick`` seconds): domains of ``<job>:domains`` with tasks but
        missing from the index are added back. A full pass takes about ``period`` seconds; returns how many were
        added back in this slice."""
        total = int(self.redis.scard(keys.job_domains(self.job)))
        if not total:
            return 0
        count = max(RECONCILE_MIN_SLICE, math.ceil(total * tick / max(period, tick)))
        self._cursor, raw = self.redis.sscan(keys.job_domains(self.job), self._cursor, count=count)
        domains = [as_text(d) for d in raw]
        if not domains:
            return 0
        scores = self.redis.zmscore(keys.ready(self.job), domains)
        missing = self.nonempty(d for d, score in zip(domains, scores, strict=True) if score is None)
        if missing:
            self._add(keys=[keys.ready(self.job), keys.ready_tasks(self.job)], args=["", 0, *missing])
            self.reconciled += len(missing)
        return len(missing)

    # --- the gauge, and a retired job -----------------------------------------------------------------------------
    def count(self) -> int:
        """The job's queued (not leased) tasks, as the gauge ``<job>:{<job>}:readytasks`` holds them."""
        return int(self.redis.get(keys.ready_tasks(self.job)) or 0)

    def forget(self, spider_type: str) -> None:
        """A retired job's index and gauge go (its queues are empty); what its gauge held leaves ``spider_type``'s
        (the job's, as its tasks name it; "" when unknown)."""
        left = self.redis.getdel(keys.ready_tasks(self.job))
        self.redis.delete(keys.ready(self.job))
        if left is not None and int(left) > 0 and spider_type:
            self.redis.decrby(keys.ready_tasks_type(spider_type), int(left))


def waiting_for_pace(redis: Any, jobs: Sequence[str]) -> dict[str, bool]:
    """Whether each job's queued tasks all wait for their sites' next slots: its index lists domains and none is due
    now (Redis clock). Such a job can fetch nothing soon, whatever it holds (the dispatcher gives it work,
    ``master.dispatcher``). One round trip on a plain Redis."""
    script = lua.READY_DUE.on(redis)
    replies = run_scripts(redis, [(script, [keys.ready(job)], [""]) for job in jobs])
    return {job: int(due) == 0 and int(listed) > 0 for job, (due, listed) in zip(jobs, replies, strict=True)}


def add_to_index(redis: Any, job: str, spider_type: str, counts: Mapping[str, int],
                 pipe: Any = None) -> None:
    """Tasks landed in ``job``'s queues of these domains (domain -> tasks added): the domains enter its ready index
    (due now unless already there) and the gauges go up. Call only after the queue writes returned (the invariant
    of :mod:`frontier.client.ready`). With ``pipe`` (a non-transactional pipeline) the calls are only queued on it."""
    domains = [domain for domain, n in counts.items() if n > 0]
    if not domains:
        return
    tasks = sum(counts[domain] for domain in domains)
    if is_cluster(redis):  # the index and the spider type's gauge live in two slots: two calls
        lua.READY_ADD.on(redis)(keys=[keys.ready(job), keys.ready_tasks(job)], args=["", tasks, *domains])
        redis.incrby(keys.ready_tasks_type(spider_type), tasks)
        return
    target = pipe if pipe is not None else redis.pipeline(transaction=False)
    lua.READY_ADD.on(redis)(keys=[keys.ready(job), keys.ready_tasks(job)], args=["", tasks, *domains],
                            client=target)
    target.incrby(keys.ready_tasks_type(spider_type), tasks)
    if pipe is None:
        target.execute()
