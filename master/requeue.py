"""A dead worker's tasks go back into ``seeds`` (seed 4.2.1.3): all of its queues and leases, none twice.

When a worker's heartbeat expires the master retires its job id (``frontier.registry``: fenced) and then, for each
domain in ``<job>:domains``, moves the job's tasks across slots in three atomic steps, the first and the last through
the frontier's client (:class:`frontier.client.FrontierClient`: it alone touches the job's queues and leases):

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
from frontier.client import FrontierClient, FrontierReader
from master.lua import LUA
from master.staging import LeadershipLost
from messaging import keys
from messaging.clients import RedisClient
from messaging.domains import host_problem
from messaging.scripts import lua_script
from messaging.tasks import SEEDS_SCORE_LUA, Task

logger = logging.getLogger(__name__)
MARKER_TTL = 86400

RESEED = lua_script(LUA / "retired_reseed.lua", prefix=SEEDS_SCORE_LUA)


class Requeuer:
    """Puts a retired job's tasks back into ``seeds`` for the leader of ``epoch``."""

    def __init__(self, redis: RedisClient, epoch: int) -> None:
        self.redis = redis
        self.epoch = int(epoch)
        self._reseed = RESEED.on(redis)

    def requeue(self, job: str) -> int:
        """Move every queued and leased task of the (retired) job back into ``seeds``; returns how many."""
        frontier = FrontierClient(self.redis, job)
        domains = frontier.domains()
        # An older leader may have listed a domain that breaks the host rule before failing to land it: no queue
        # can exist under it (its key cannot be formed), so there is nothing to requeue.
        unkeyable = [domain for domain in domains if host_problem(domain) is not None]
        if unkeyable:
            frontier.forget_domains(unkeyable)
            domains = [domain for domain in domains if domain not in unkeyable]
        moved = 0
        spider_type = ""
        for domain, tasks in zip(domains, frontier.collect_retired(domains), strict=True):
            if tasks:
                per_crawl: dict[str, int] = defaultdict(int)
                args: list[Any] = [self.epoch, MARKER_TTL]
                for member in tasks:
                    task = Task.decode(member)
                    spider_type = task.spider_type
                    per_crawl[task.crawlid] += 1
                    args += [member, task.priority, task.crawlid]
                marker = keys.requeue_marker(job, domain)
                added = self._reseed_outbox(marker, args)
                frontier.release_retired(domain, per_crawl)
                finish_hints.log_touched(self.redis, ((domain, crawlid) for crawlid in per_crawl))
                self.redis.delete(marker)
                moved += max(added, 0)
            frontier.forget_domains([domain])
        frontier.forget_if_empty(spider_type)
        if moved:
            logger.info("requeued %d tasks of retired job %s", moved, job)
        return moved

    def _reseed_outbox(self, marker: str, args: list[Any]) -> int:
        """Step 2, in the slot of ``seeds``: the outbox's tasks into ``seeds``, once (the marker), fenced by the
        epoch; -1 when it was done already."""
        from redis.exceptions import ResponseError

        try:
            return int(self._reseed(keys=[keys.SEEDS, keys.SEEDS_SEQUENCE, keys.PENDING_SEEDS, marker,
                                          keys.MASTER_EPOCH], args=args))
        except ResponseError as exc:
            if "FENCED" in str(exc):
                raise LeadershipLost(f"epoch {self.epoch} is no longer current") from exc
            raise

    def pending_jobs(self, retired: list[str]) -> list[str]:
        """Retired jobs whose requeue is not finished (a leader died during it)."""
        return FrontierReader(self.redis).unfinished_requeues(retired)
