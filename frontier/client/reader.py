"""A read-only view of the frontier for those who watch it (the master, the managers, tools): queue depths, the
domains of jobs, and a site's state — its queues and leases in every job, its block, the hits in its throttle
windows, its cached robots.txt. Nothing here writes; every read is pipelined (round trips named per method).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from frontier.client.types import US
from messaging import keys
from messaging.clients import RedisClient, as_text
from messaging.domains import robots_tag
from messaging.tasks import Task


@dataclass
class SiteState:
    """One queue key (a registered domain, a host or an address: the crawls' partition) as the frontier holds it now."""

    domain: str
    queued: int = 0  # tasks in every job's queue of the domain
    leased: int = 0  # ...and in their leases
    hosts: set[str] = field(default_factory=set)  # the domain and the hosts of each job's next queued and leased task
    blocked_until: float | None = None  # Redis time (seconds) a 429/503 holds the domain until
    windows: list[list[float]] = field(default_factory=list)  # per spider type asked: its hits' times (seconds)
    statuses: dict[str, int] = field(default_factory=dict)  # responses the workers received, by HTTP status
    robots: list[str] = field(default_factory=list)  # hosts whose robots.txt is in the shared cache


class FrontierReader:
    def __init__(self, redis: RedisClient) -> None:
        self.redis = redis

    def job_domains(self, job: str) -> list[str]:
        """The domains the job has (or recently had) queues for, sorted (one round trip)."""
        return sorted(as_text(member) for member in self.redis.smembers(keys.job_domains(job)))

    def domains_of(self, jobs: Sequence[str]) -> set[str]:
        """The domains any of ``jobs`` has queues for (one SUNION)."""
        return {as_text(d) for d in self.redis.sunion([keys.job_domains(job) for job in jobs])} if jobs else set()

    def held(self, job: str, domains: Sequence[str]) -> int:
        """The tasks the job holds in these domains, queued or leased (one round trip)."""
        if not domains:
            return 0
        pipe = self.redis.pipeline(transaction=False)
        for domain in domains:
            pipe.zcard(keys.queue(job, domain))
            pipe.zcard(keys.inflight(job, domain))
        return int(sum(pipe.execute()))

    def queue_depths(self, jobs: Sequence[str]) -> dict[str, tuple[int, int]]:
        """(queued, leased) tasks of each job over all its domains, in two pipelined round trips."""
        pipe = self.redis.pipeline(transaction=False)
        for job in jobs:
            pipe.smembers(keys.job_domains(job))
        domains = {job: [as_text(d) for d in members] for job, members in zip(jobs, pipe.execute(), strict=True)}
        pipe = self.redis.pipeline(transaction=False)
        for job in jobs:
            for domain in domains[job]:
                pipe.zcard(keys.queue(job, domain))
                pipe.zcard(keys.inflight(job, domain))
        counts = iter(pipe.execute())
        result = {}
        for job in jobs:
            pairs = [(next(counts), next(counts)) for _ in domains[job]]
            result[job] = (sum(queued for queued, _ in pairs), sum(leased for _, leased in pairs))
        return result

    def unfinished_requeues(self, retired: Sequence[str]) -> list[str]:
        """Retired jobs that still list domains: their requeue is not finished (one round trip)."""
        if not retired:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for job in retired:
            pipe.exists(keys.job_domains(job))
        return [job for job, exists in zip(retired, pipe.execute(), strict=True) if exists]

    def sites(self, domains: Sequence[str], jobs: Sequence[str], spider_types: Sequence[str]) -> list[SiteState]:
        """The state of each domain in ``jobs`` and the windows of ``spider_types``, in two round trips."""
        pipe = self.redis.pipeline(transaction=False)
        for domain in domains:
            for job in jobs:
                pipe.zcard(keys.queue(job, domain))
                pipe.zcard(keys.inflight(job, domain))
                pipe.zrange(keys.queue(job, domain), 0, 0)
                pipe.zrange(keys.inflight(job, domain), 0, 0)
            pipe.get(keys.block(domain))
            pipe.hgetall(keys.site_statuses(domain))
            for spider_type in spider_types:
                pipe.zrange(keys.throttle_type(spider_type, domain), 0, -1, withscores=True)
        replies = iter(pipe.execute() if domains else [])
        states = []
        for domain in domains:
            state = SiteState(domain, hosts={domain})
            for _job in jobs:
                state.queued += int(next(replies))
                state.leased += int(next(replies))
                state.hosts |= {_authority(member) for member in next(replies)}  # the next queued task's host
                state.hosts |= {_authority(member) for member in next(replies)}  # and a leased one's
            blocked = next(replies)
            state.blocked_until = None if blocked is None else float(blocked) / US
            state.statuses = {as_text(k): int(v) for k, v in next(replies).items()}
            state.windows = [[score / US for _, score in next(replies)] for _ in spider_types]
            state.hosts.discard("")
            states.append(state)
        self._robots(states)
        return states

    def _robots(self, states: list[SiteState]) -> None:
        """Which hosts of each domain have robots.txt in the shared cache (one round trip)."""
        asked = [(state, host) for state in states for host in sorted(state.hosts) if robots_tag(host)]
        pipe = self.redis.pipeline(transaction=False)
        for _, host in asked:
            pipe.exists(keys.robots(robots_tag(host), host))  # robots.txt is kept under the host's domain
        for (state, host), present in zip(asked, pipe.execute() if asked else [], strict=True):
            if present:
                state.robots.append(host)


def _authority(member: bytes) -> str:
    try:
        return urlsplit(Task.decode(member).url).netloc.lower()
    except (ValueError, TypeError):
        return ""
