"""Finding one crawl's tasks wherever they wait: ``seeds``, every worker's domain queues, every lease, and where a
paused crawl's tasks are parked (``parked:{seeds}:<id>``, every job's ``<job>:{<domain>}:parked``).

Workers' queues are found with SCAN over :func:`messaging.keys.queue_pattern` and
:func:`~messaging.keys.inflight_pattern` (MATCH, never KEYS; redis-py's ``RedisCluster.scan_iter`` walks every
primary). We chose SCAN over the registry (``workers`` → ``<job>:domains``) because it also finds the queues of a
job that has just left the registry and whose tasks the master has not put back yet; its cost, one walk of the
keyspace, is paid per info or stop request, which are rare. Within a queue, ZSCAN with a MATCH on the member's JSON
(``"crawlid":"<id>"``, tasks are canonical JSON with sorted keys) filters on the server; every match is decoded and
checked, so a look-alike string inside a URL never counts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from messaging import keys
from messaging.clients import RedisClient, as_text
from messaging.tasks import Task

SCAN_COUNT = 1000
SEEDS, QUEUE, INFLIGHT, PARKED = "seeds", "queue", "inflight", "parked"


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def member_pattern(crawlid: str) -> str:
    """ZSCAN MATCH pattern of a crawl's task members."""
    return "*" + _glob_escape('"crawlid":' + json.dumps(crawlid, ensure_ascii=False)) + "[,}]*"


def task_keys(redis: RedisClient, crawlid: str | None = None) -> Iterator[tuple[str, str]]:
    """(key, where) of every zset that can hold tasks: ``seeds`` (and, given a crawl, its parked ``seeds`` tasks),
    then queues, leases and parked tasks of every job."""
    yield keys.SEEDS, SEEDS
    if crawlid is not None:
        yield keys.parked_seeds(crawlid), PARKED
    for pattern, where in ((keys.queue_pattern(), QUEUE), (keys.inflight_pattern(), INFLIGHT),
                           (keys.parked_pattern(), PARKED)):
        for key in redis.scan_iter(match=pattern, count=SCAN_COUNT, _type="zset"):
            yield as_text(key), where


def crawl_members(redis: RedisClient, key: str, crawlid: str) -> Iterator[tuple[bytes, Task]]:
    """The crawl's tasks in one zset, as (member, task)."""
    for member, _score in redis.zscan_iter(key, match=member_pattern(crawlid), count=SCAN_COUNT):
        try:
            task = Task.decode(member)
        except (ValueError, TypeError):
            continue  # not a task (a foreign member): never ours to count or remove
        if task.crawlid == crawlid:
            yield member, task
