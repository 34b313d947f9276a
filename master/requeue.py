"""A dead worker's tasks go back into ``seeds`` (seed 4.2.1.3): all of its queues and leases, none twice.

When a worker's heartbeat expires the master retires its job id (``frontier.registry``: fenced) and then, for each
domain in ``<job>:domains``, moves the job's tasks across slots in three atomic steps:

1. **collect** (domain slot): every task of ``<job>:{d}:queue`` and ``<job>:{d}:inflight`` moves into the outbox
   ``<job>:{d}:requeue``; the queue, the leases and their scores are deleted. A lease the zombie acknowledges later
   is no longer held: the ack is refused and nothing is counted twice.
2. **reseed** (``seeds`` slot, epoch-checked): unless the marker ``master:{seeds}:requeued:<job>:<d>`` says it was
   done already (``SET NX``), add the outbox's tasks to ``seeds`` (by priority, as newly arrived; a task already
   there stays once) and count them in ``pending:{seeds}``.
3. **release** (domain slot, once: guarded by deleting the outbox): the tasks leave the domain's pending counts.

A crash between any two steps is repaired by running them again (the outbox and the marker survive; collect merges
into the outbox); the next leader does so for every retired job that still has a ``<job>:domains`` set. The
pending counts stay at least one per task throughout, so no crawl looks finished in between.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from frontier import finish_hints
from frontier.lua import PENDING_LUA
from master.lua import LUA
from master.staging import LeadershipLost
from messaging import keys
from messaging.clients import RedisClient, as_text
from messaging.domains import host_problem
from messaging.scripts import lua_source, run_scripts
from messaging.tasks import SEEDS_SCORE_LUA, Task

logger = logging.getLogger(__name__)
MARKER_TTL = 86400

_COLLECT = lua_source(LUA / "retired_collect.lua")
_RESEED = SEEDS_SCORE_LUA + lua_source(LUA / "retired_reseed.lua")
_RELEASE = lua_source(LUA / "retired_release.lua", PENDING_LUA)


class Requeuer:
    """Puts a retired job's tasks back into ``seeds`` for the leader of ``epoch``."""

    def __init__(self, redis: RedisClient, epoch: int) -> None:
        self.redis = redis
        self.epoch = int(epoch)
        self._collect = redis.register_script(_COLLECT)
        self._reseed = redis.register_script(_RESEED)
        self._release = redis.register_script(_RELEASE)

    def requeue(self, job: str) -> int:
        """Move every queued and leased task of the (retired) job back into ``seeds``; returns how many."""
        from redis.exceptions import ResponseError

        domains = sorted(as_text(d) for d in self.redis.smembers(keys.job_domains(job)))
        # An older leader may have listed a domain that breaks the host rule before failing to land it: no queue
        # can exist under it (its key cannot be formed), so there is nothing to requeue.
        unkeyable = [domain for domain in domains if host_problem(domain) is not None]
        if unkeyable:
            self.redis.srem(keys.job_domains(job), *unkeyable)
            domains = [domain for domain in domains if domain not in unkeyable]
        collected = run_scripts(self.redis, [
            (self._collect, [keys.queue(job, d), keys.inflight(job, d), keys.lease_scores(job, d),
                             keys.requeue_outbox(job, d)], []) for d in domains])
        moved = 0
        spider_type = ""
        for domain, raw_tasks in zip(domains, collected, strict=True):
            tasks = [as_text(t) for t in raw_tasks]
            if tasks:
                per_crawl: dict[str, int] = defaultdict(int)
                args: list[Any] = [self.epoch, MARKER_TTL]
                for member in tasks:
                    task = Task.decode(member)
                    spider_type = task.spider_type
                    per_crawl[task.crawlid] += 1
                    args += [member, task.priority, task.crawlid]
                marker = keys.requeue_marker(job, domain)
                try:
                    added = int(self._reseed(keys=[keys.SEEDS, keys.SEEDS_SEQUENCE, keys.PENDING_SEEDS, marker,
                                                   keys.MASTER_EPOCH], args=args))
                except ResponseError as exc:
                    if "FENCED" in str(exc):
                        raise LeadershipLost(f"epoch {self.epoch} is no longer current") from exc
                    raise
                release_args: list[Any] = []
                for crawlid, n in per_crawl.items():
                    release_args += [crawlid, n]
                self._release(keys=[keys.requeue_outbox(job, domain), keys.pending_domain(domain)],
                              args=release_args)
                finish_hints.log_touched(self.redis, ((domain, crawlid) for crawlid in per_crawl))
                self.redis.delete(marker)
                moved += max(added, 0)
            self.redis.srem(keys.job_domains(job), domain)
        if not self.redis.scard(keys.job_domains(job)):
            self.redis.delete(keys.job_domains(job))
            self._forget_ready(job, spider_type)
        if moved:
            logger.info("requeued %d tasks of retired job %s", moved, job)
        return moved

    def _forget_ready(self, job: str, spider_type: str) -> None:
        """The job's ready index and gauge (frontier.ready) go; what its gauge held leaves the spider type's."""
        left = self.redis.getdel(keys.ready_tasks(job))
        self.redis.delete(keys.ready(job))
        if left is not None and int(left) > 0 and spider_type:
            self.redis.decrby(keys.ready_tasks_type(spider_type), int(left))

    def pending_jobs(self, retired: list[str]) -> list[str]:
        """Retired jobs whose requeue is not finished (a leader died during it)."""
        if not retired:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for job in retired:
            pipe.exists(keys.job_domains(job))
        return [job for job, exists in zip(retired, pipe.execute(), strict=True) if exists]
