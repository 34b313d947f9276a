"""A job's parked tasks: what its queue and leases held of paused crawls (:mod:`messaging.pause`), set aside.

While a crawl is paused its tasks wait in ``<job>:{<domain>}:parked`` (score: their queue score), still counted in
the domain's pending count, so the crawl never looks finished and nothing is lost: the worker moves them there
(:meth:`Parking.park`: leases it hands back without fetching, their hits withdrawn; :meth:`Parking.park_queued`:
what its queues hold), and back into its queue when the crawl resumes (:meth:`Parking.unpark`, then the ready index
hears of the domain). Every call is one atomic script on the domain's slot (``lua/park.lua``, ``park_queued.lua``,
``unpark.lua``); a retired job's parked tasks go back to ``seeds`` with the rest of its tasks (``retired_collect.lua``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from frontier.client import lua
from frontier.client.types import Lease
from frontier.node_pipes import run_by_node
from messaging import keys
from messaging.clients import RedisClient, as_text
from messaging.tasks import Task


def crawl_needle(crawlid: str) -> str:
    """The text that opens a task's crawl id in its canonical JSON (``lua/crawl_of.lua`` checks what follows)."""
    return '"crawlid":' + json.dumps(crawlid, ensure_ascii=False)


@dataclass(frozen=True)
class HandedBack:
    """A lease handed back unfetched, with the hit its request would have spent ('' when it had none)."""

    lease: Lease
    hit: str = ""
    ip: str | None = None  # the address the hit was taken for (a proxy's); None: the job's own


class Parking:
    """The parked tasks of ``job`` (spider type and host IP identity: the throttle windows a withdrawn hit leaves)."""

    def __init__(self, redis: RedisClient, job: str, spider_type: str, ip: str) -> None:
        self.redis = redis
        self.job = job
        self.spider_type = spider_type
        self.ip = ip
        self._park = lua.PARK.on(redis)
        self._park_queued = lua.PARK_QUEUED.on(redis)
        self._unpark = lua.UNPARK.on(redis)

    def park(self, handed: Sequence[HandedBack]) -> list[Lease]:
        """Leases of paused crawls into the parked tasks, their hits withdrawn, one round trip (one per node on a
        cluster); returns the leases that were still held (and are parked now)."""
        groups: dict[tuple[str, str], list[HandedBack]] = defaultdict(list)
        for item in handed:
            groups[(item.lease.domain, item.ip or self.ip)].append(item)
        calls = []
        for (domain, ip), items in groups.items():
            args: list[str] = []
            for item in items:
                args += [item.lease.member, item.lease.task.crawlid, item.hit]
            calls.append((self._park, [keys.inflight(self.job, domain), keys.lease_scores(self.job, domain),
                                       keys.parked(self.job, domain), keys.pending_domain(domain),
                                       keys.throttle_type(self.spider_type, domain), keys.throttle_ip(ip, domain),
                                       keys.pace_type(self.spider_type, domain), keys.pace_ip(ip, domain)],
                          args))
        parked = {as_text(member) for reply in run_by_node(self.redis, calls) for member in reply} if calls else set()
        return [item.lease for item in handed if item.lease.member in parked]

    def park_queued(self, domains: Sequence[str], crawlids: Iterable[str]) -> dict[str, int]:
        """What the job's queues of ``domains`` hold of these crawls, parked; returns domain -> tasks parked."""
        args: list[str] = []
        for crawlid in sorted(set(crawlids)):
            args += [crawl_needle(crawlid), crawlid]
        if not args or not domains:
            return {}
        calls = [(self._park_queued, [keys.queue(self.job, domain), keys.parked(self.job, domain),
                                      keys.pending_domain(domain)], args) for domain in domains]
        return {domain: int(n) for domain, n in zip(domains, run_by_node(self.redis, calls), strict=True) if int(n)}

    def unpark(self, domains: Sequence[str], crawlid: str) -> dict[str, int]:
        """The crawl's parked tasks of ``domains`` back into the job's queues; returns domain -> tasks queued again
        (the caller then adds those domains to the job's ready index)."""
        if not domains:
            return {}
        calls = [(self._unpark, [keys.parked(self.job, domain), keys.queue(self.job, domain),
                                 keys.pending_domain(domain)], [crawl_needle(crawlid), crawlid]) for domain in domains]
        return {domain: int(n) for domain, n in zip(domains, run_by_node(self.redis, calls), strict=True) if int(n)}

    def parked_domains(self, domains: Sequence[str]) -> list[str]:
        """Of ``domains``, those where the job has parked tasks (one EXISTS each, pipelined)."""
        if not domains:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for domain in domains:
            pipe.exists(keys.parked(self.job, domain))
        return [domain for domain, found in zip(domains, pipe.execute(), strict=True) if found]

    def parked_tasks(self, domain: str) -> list[Task]:
        """The job's parked tasks of one domain (tests, tools)."""
        return [Task.decode(as_text(member)) for member in self.redis.zrange(keys.parked(self.job, domain), 0, -1)]
