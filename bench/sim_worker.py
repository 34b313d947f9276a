"""A simulated worker for the dispatcher's benchmarks and tests: completes tasks at a set speed, in simulated time.

It talks to real Redis exactly as a Scrapy worker does, minus the crawling: it registers and heartbeats through
``frontier.registry``, leases tasks from its domain queues through the politeness step (:meth:`FrontierClient.take`,
with a rate too high to throttle), completes them (:meth:`FrontierClient.complete`) and counts the completions for
the weights (:func:`frontier.registry.record_completion`). Its
speed (tasks per minute) can change during a run. Politeness is not simulated (the politeness engine's own tests
cover it).
"""

from __future__ import annotations

from typing import Any

from frontier.client import FrontierClient, Lease, Outcome
from frontier.config_watch import StaticSiteConfig
from frontier.finish_hints import log_touched
from frontier.politeness import Politeness
from frontier.registry import WorkerInfo, WorkerRegistry, record_completion
from messaging import keys
from messaging.siteconfig import Rate

UNTHROTTLED = Rate(10**9, 60)  # politeness is not simulated: the engine's own tests cover it


class SimWorker:
    def __init__(self, redis: Any, job: str, speed: float, spider_type: str = "list", ip: str = "127.0.0.1",
                 lease_seconds: float = 600.0) -> None:
        self.redis = redis
        self.job = job
        self.speed = float(speed)  # tasks per minute
        self.spider_type = spider_type
        self.ip = ip
        self.lease_seconds = lease_seconds
        self.registry = WorkerRegistry(redis)
        self.frontier = FrontierClient(redis, job, spider_type, ip, Politeness(StaticSiteConfig(UNTHROTTLED)),
                                       lease_seconds=lease_seconds)
        self.completed = 0
        self._carry = 0.0
        self._next_domain = 0

    def register(self, now: float) -> None:
        self.registry.register(WorkerInfo(self.job, self.spider_type, self.ip, "sim", 0), now=now)

    def domains(self) -> list[str]:
        members = self.redis.smembers(keys.job_domains(self.job))
        return sorted(d.decode() if isinstance(d, bytes) else d for d in members)

    def lease(self, n: int, now: float) -> list[tuple[str, str]]:
        """Lease up to ``n`` tasks through the politeness step, walking the domain queues round robin; returns
        (domain, task) pairs."""
        domains = self.domains()
        leased: list[tuple[str, str]] = []
        open_domains = list(domains[self._next_domain:] + domains[:self._next_domain]) if domains else []
        while len(leased) < n and open_domains:
            for domain in list(open_domains):
                if len(leased) >= n:
                    break
                result = self.frontier.take(domain, now=now)
                if result.outcome == Outcome.TAKEN and result.lease is not None:
                    leased.append((domain, result.lease.member))
                else:
                    open_domains.remove(domain)
        if domains:
            self._next_domain = (self._next_domain + 1) % len(domains)
        return leased

    def ack(self, leased: list[tuple[str, str]], now: float) -> int:
        """Complete leased tasks (acknowledged and released in one step per domain), then count the completions.
        Raises Fenced if retired."""
        done = self.frontier.complete([Lease(domain, member, 0.0) for domain, member in leased])
        if done:
            log_touched(self.redis, ((lease.domain, lease.task.crawlid) for lease in done))  # as the committer does
            record_completion(self.redis, self.job, len(done), now)
            self.completed += len(done)
        return len(done)

    def step(self, now: float, seconds: float) -> int:
        """Work for ``seconds`` of simulated time ending at ``now``: complete what the speed allows; heartbeat."""
        self._carry += self.speed * seconds / 60.0
        want = int(self._carry)
        leased = self.lease(want, now) if want > 0 else []
        self._carry -= len(leased) if len(leased) == want else self._carry  # idle time is not banked
        done = self.ack(leased, now)
        self.registry.heartbeat(self.job, busy=bool(leased), now=now)
        return done
