"""A simulated worker for the dispatcher's benchmarks and tests: completes tasks at a set speed, in simulated time.

It talks to real Redis exactly as a Scrapy worker does, minus the crawling: it registers and heartbeats through
``master.registry``, leases tasks from its domain queues (``<job>:{<domain>}:queue`` -> ``:inflight``, one atomic
call per domain), acknowledges them and reports the completions (:func:`master.registry.record_completion`). Its
speed (tasks per minute) can change during a run. Politeness is not simulated (the politeness engine's own tests
cover it).
"""

from __future__ import annotations

from typing import Any

from master.registry import WorkerInfo, WorkerRegistry, record_completion
from messaging import keys
from messaging.tasks import Task

# KEYS: queue, inflight. ARGV: n, lease deadline. Reply: the leased tasks.
_LEASE = """
local popped = redis.call('ZPOPMIN', KEYS[1], tonumber(ARGV[1]))
local tasks = {}
for i = 1, #popped, 2 do
  redis.call('ZADD', KEYS[2], ARGV[2], popped[i])
  tasks[#tasks + 1] = popped[i]
end
return tasks
"""

# KEYS: inflight. ARGV: tasks. Reply: the tasks whose lease was still held.
_ACK = """
local done = {}
for i = 1, #ARGV do
  if redis.call('ZREM', KEYS[1], ARGV[i]) == 1 then done[#done + 1] = ARGV[i] end
end
return done
"""


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
        self.completed = 0
        self._carry = 0.0
        self._next_domain = 0
        self._lease = redis.register_script(_LEASE)
        self._ack = redis.register_script(_ACK)

    def register(self, now: float) -> None:
        self.registry.register(WorkerInfo(self.job, self.spider_type, self.ip, "sim", 0), now=now)

    def domains(self) -> list[str]:
        members = self.redis.smembers(keys.job_domains(self.job))
        return sorted(d.decode() if isinstance(d, bytes) else d for d in members)

    def lease(self, n: int, now: float) -> list[tuple[str, str]]:
        """Lease up to ``n`` tasks, walking the domain queues round robin; returns (domain, task) pairs."""
        domains = self.domains()
        leased: list[tuple[str, str]] = []
        for offset in range(len(domains)):
            if len(leased) >= n:
                break
            domain = domains[(self._next_domain + offset) % len(domains)]
            share = max(1, (n - len(leased)) // max(1, len(domains) - offset))
            got = self._lease(keys=[keys.queue(self.job, domain), keys.inflight(self.job, domain)],
                              args=[share, repr(now + self.lease_seconds)])
            leased += [(domain, t.decode() if isinstance(t, bytes) else t) for t in got]
        if domains:
            self._next_domain = (self._next_domain + 1) % len(domains)
        if len(leased) < n and domains:  # uneven queues: take the rest from wherever there is work
            for domain in domains:
                if len(leased) >= n:
                    break
                got = self._lease(keys=[keys.queue(self.job, domain), keys.inflight(self.job, domain)],
                                  args=[n - len(leased), repr(now + self.lease_seconds)])
                leased += [(domain, t.decode() if isinstance(t, bytes) else t) for t in got]
        return leased

    def ack(self, leased: list[tuple[str, str]], now: float) -> int:
        """Complete leased tasks: acknowledge the leases, then count the completions. Raises Fenced if retired."""
        by_domain: dict[str, list[str]] = {}
        for domain, task in leased:
            by_domain.setdefault(domain, []).append(task)
        done: list[Task] = []
        for domain, tasks in by_domain.items():
            acked = self._ack(keys=[keys.inflight(self.job, domain)], args=tasks)
            done += [Task.decode(t) for t in acked]
        if done:
            record_completion(self.redis, self.job, done, now)
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
