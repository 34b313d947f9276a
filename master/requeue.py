"""A dead worker's tasks go back into ``seeds`` (seed 4.2.1.3): all of its queues and leases, none twice.

When a worker's heartbeat expires the master retires its job id (``master.registry``: fenced) and then, for each
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

import json
import logging
from collections import defaultdict
from typing import Any

from master.staging import LeadershipLost, run_scripts
from messaging import keys
from messaging.domains import host_problem

logger = logging.getLogger(__name__)
MARKER_TTL = 86400

# KEYS: queue, inflight, lease scores, outbox. Reply: the outbox's tasks.
_COLLECT = """
for _, key in ipairs({KEYS[1], KEYS[2]}) do
  local tasks = redis.call('ZRANGE', key, 0, -1)
  for i = 1, #tasks, 500 do
    redis.call('SADD', KEYS[4], unpack(tasks, i, math.min(i + 499, #tasks)))
  end
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return redis.call('SMEMBERS', KEYS[4])
"""

# KEYS: seeds, seeds sequence, pending:{seeds}, marker, epoch. ARGV: epoch, ttl, (task, priority, crawlid)*.
# Reply: tasks added to seeds; -1 when already done.
_RESEED = """
if redis.call('GET', KEYS[5]) ~= ARGV[1] then return redis.error_reply('FENCED stale dispatcher epoch') end
if not redis.call('SET', KEYS[4], '1', 'NX', 'EX', ARGV[2]) then return -1 end
local n = (#ARGV - 2) / 3
local last = redis.call('INCRBY', KEYS[2], n)
local span = 17592186044416
local added = 0
for i = 0, n - 1 do
  local base = 3 + 3 * i
  local score = (255 - tonumber(ARGV[base + 1])) * span + (last - n + 1 + i) % span
  if redis.call('ZADD', KEYS[1], 'NX', string.format('%.0f', score), ARGV[base]) == 1 then
    added = added + 1
    redis.call('HINCRBY', KEYS[3], ARGV[base + 2], 1)
  end
end
return added
"""

# KEYS: outbox, pending:{d}. ARGV: (crawlid, n)*. Reply: 1 released, 0 already released.
_RELEASE = """
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
for i = 1, #ARGV, 2 do
  if redis.call('HINCRBY', KEYS[2], ARGV[i], -tonumber(ARGV[i + 1])) <= 0 then
    redis.call('HDEL', KEYS[2], ARGV[i])
  end
end
return 1
"""


class Requeuer:
    """Puts a retired job's tasks back into ``seeds`` for the leader of ``epoch``."""

    def __init__(self, redis: Any, epoch: int) -> None:
        self.redis = redis
        self.epoch = int(epoch)
        self._collect = redis.register_script(_COLLECT)
        self._reseed = redis.register_script(_RESEED)
        self._release = redis.register_script(_RELEASE)

    def requeue(self, job: str) -> int:
        """Move every queued and leased task of the (retired) job back into ``seeds``; returns how many."""
        from redis.exceptions import ResponseError

        domains = sorted(_text(d) for d in self.redis.smembers(keys.job_domains(job)))
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
        for domain, raw_tasks in zip(domains, collected, strict=True):
            tasks = [_text(t) for t in raw_tasks]
            if tasks:
                per_crawl: dict[str, int] = defaultdict(int)
                args: list[Any] = [self.epoch, MARKER_TTL]
                for member in tasks:
                    task = json.loads(member)
                    per_crawl[task["crawlid"]] += 1
                    args += [member, int(task.get("priority", 100)), task["crawlid"]]
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
                self.redis.delete(marker)
                moved += max(added, 0)
            self.redis.srem(keys.job_domains(job), domain)
        if not self.redis.scard(keys.job_domains(job)):
            self.redis.delete(keys.job_domains(job))
        if moved:
            logger.info("requeued %d tasks of retired job %s", moved, job)
        return moved

    def pending_jobs(self, retired: list[str]) -> list[str]:
        """Retired jobs whose requeue is not finished (a leader died during it)."""
        if not retired:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for job in retired:
            pipe.exists(keys.job_domains(job))
        return [job for job, exists in zip(retired, pipe.execute(), strict=True) if exists]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
