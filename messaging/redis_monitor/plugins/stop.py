"""Stop plugin: purge a crawl's tasks from ``seeds``, every queue and every lease, and refuse its new tasks.

The crawl is marked stopped first (``crawl:<id>`` state, kept for CRAWLFLEET_CRAWL_TTL), so that from then on the
Kafka monitor refuses its requests and workers and the dispatcher drop its tasks (``crawls:states`` tells the workers
at once); then the tasks already waiting are removed by value (ZSCAN + ZREM in batches: a task a worker pops
meanwhile is simply not there to remove, and the worker sees the stopped state), a paused crawl's parked tasks too
(:mod:`messaging.pause`). The answer says how many were purged where.

A crawl id that names nothing (no ``crawl:<id>`` record and no task anywhere: a typo) is answered ``rejected`` with
"no such crawl" and marks nothing: a stopped mark would refuse that id for CRAWLFLEET_CRAWL_TTL and show a ghost row.
"""

from __future__ import annotations

from typing import Any

from messaging import keys
from messaging.clients import RedisClient
from messaging.clock import RedisClock
from messaging.pause import publish_state
from messaging.redis_monitor.crawl_tasks import INFLIGHT, PARKED, QUEUE, SEEDS, crawl_members, task_keys
from messaging.redis_monitor.plugins import Context, Plugin, Refused
from messaging.tasks import CrawlFields, CrawlState

REMOVE_CHUNK = 500


def mark_stopped(redis: RedisClient, crawlid: str, ttl: int) -> None:
    crawl = keys.crawl(crawlid)
    pipe = redis.pipeline(transaction=False)
    pipe.hset(crawl, mapping={CrawlFields.STATE: CrawlState.STOPPED,
                              CrawlFields.FINISHED: int(RedisClock(redis).now())})
    pipe.hdel(crawl, CrawlFields.PAUSED)
    pipe.expire(crawl, ttl)
    pipe.hdel(keys.PAUSED, crawlid)  # the dispatcher parks none of its tasks any more: it drops them
    pipe.execute()
    publish_state(redis, crawlid, CrawlState.STOPPED)


def stop_crawl(redis: RedisClient, crawlid: str, ttl: int) -> dict[str, int] | None:
    """Mark the crawl stopped, then remove its tasks; returns how many left seeds, queues and leases, or None when
    no such crawl exists (nothing is marked)."""
    known = bool(redis.exists(keys.crawl(crawlid)))
    if known:
        mark_stopped(redis, crawlid, ttl)
    purged = _purge(redis, crawlid)
    if not known and not any(purged.values()):
        return None
    if not known:  # its record had expired while tasks were left: now it is stopped like any other
        mark_stopped(redis, crawlid, ttl)
    return purged


def _purge(redis: RedisClient, crawlid: str) -> dict[str, int]:
    purged = {SEEDS: 0, QUEUE: 0, INFLIGHT: 0, PARKED: 0}
    for key, where in task_keys(redis, crawlid):
        chunk: list[bytes] = []
        for member, _ in crawl_members(redis, key, crawlid):
            chunk.append(member)
            if len(chunk) >= REMOVE_CHUNK:
                purged[where] += int(redis.zrem(key, *chunk))
                chunk = []
        if chunk:
            purged[where] += int(redis.zrem(key, *chunk))
    return purged


class StopPlugin(Plugin):
    name = "stop"
    kind = "stop"

    def handle(self, key: str, request: dict[str, Any], context: Context) -> dict[str, Any]:
        crawlid = request["crawlid"]
        purged = stop_crawl(context.redis, crawlid, context.settings.crawl_ttl)
        if purged is None:
            raise Refused(f"no such crawl: {crawlid}", crawlid=crawlid)
        return {"crawlid": crawlid, "state": CrawlState.STOPPED, "purged": {
            "seeds": purged[SEEDS], "queues": purged[QUEUE], "leases": purged[INFLIGHT], "parked": purged[PARKED]},
            "total": sum(purged.values())}
