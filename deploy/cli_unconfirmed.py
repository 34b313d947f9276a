"""What to say when a request went out and its answer did not come in time: the truth, and how to check.

A request is in Kafka once sent; nothing withdraws it. A Kafka monitor routes it (a crawl: accepted into Redis;
the other kinds: into their stream in Redis), a Redis monitor carries it out (a site change: once ZooKeeper takes
it, retrying while ZooKeeper is away, up to a minute) and answers. Monitors that are down, or a ZooKeeper that is
away, delay the answer — and the effect, which may come after the command gave up waiting. So a timeout is never
reported as a failure: :func:`unconfirmed_message` says "sent; not confirmed yet", where the request waits (still in
Kafka, or in Redis for a Redis monitor), what it waits for, and the command that shows whether it took effect; the
command exits with :data:`deploy.cli_errors.EXIT_UNCONFIRMED`. A read-only request (info, stats) changes nothing
either way.
"""

from __future__ import annotations

from typing import Any

from deploy.cli_errors import reachable
from messaging import clients, discovery, keys
from messaging.answers import waiting_in_redis
from messaging.settings import Settings
from messaging.validation import CRAWL

READ_ONLY = ("info", "stats")
STATE_AFTER = {"stop": "stopped", "pause": "paused", "resume": "running"}  # the crawl's state once carried out
SITE_RETRY_NOTE = "a Redis monitor retries a site change for up to a minute while ZooKeeper is away"


def how_to_check(kind: str, request: dict[str, Any]) -> str:
    if kind in READ_ONLY:
        return "it changes nothing (it only reads): ask again once the monitors answer"
    if kind == "site":
        return (f"it takes effect when a Redis monitor applies it: check with `crawlfleet site show "
                f"{request.get('domain')}`")
    if kind in STATE_AFTER:
        return f"check with `crawlfleet info {request.get('crawlid')}` (state: {STATE_AFTER[kind]})"
    return f"check with `crawlfleet info {request.get('crawlid')}`"


def _where(settings: Settings, kind: str, request: dict[str, Any]) -> str:
    """Where the request waits and for whom, as far as Redis tells (blocking, a few round trips)."""
    try:
        redis = clients.redis_client(settings, socket_timeout=3, socket_connect_timeout=3)
        try:
            running = {e.service for e in discovery.process_endpoints(redis)}
            if kind == CRAWL:
                if redis.exists(keys.crawl(str(request.get("crawlid")))):
                    return "A Kafka monitor has taken the crawl into Redis (its answer did not come back)"
                return _in_kafka(running)
            if not waiting_in_redis(redis, kind, str(request["uuid"])):
                return _in_kafka(running)
        finally:
            redis.close()
    except Exception as exc:  # Redis away too
        return f"Where it waits is unknown: Redis is unreachable ({type(exc).__name__})"
    text = "It waits in Redis for a Redis monitor"
    if "redis-monitor" not in running:
        text += " (none is running: `crawlfleet redis-monitor`, or `crawlfleet up`)"
    if kind == "site":
        hosts = settings.zk_hosts.split("/", 1)[0].split(",")
        if all(reachable(host, 2181, timeout=2) for host in hosts if host):
            text += f"; ZooKeeper ({settings.zk_hosts}) is unreachable: {SITE_RETRY_NOTE}, then answers the error"
        else:
            text += f" ({SITE_RETRY_NOTE})"
    return text


def _in_kafka(running: set[str]) -> str:
    text = "It waits in Kafka for a Kafka monitor"
    if "kafka-monitor" not in running:
        text += " (none is running: `crawlfleet kafka-monitor`, or `crawlfleet up`)"
    return text


def unconfirmed_message(settings: Settings, kind: str, request: dict[str, Any], timeout: float) -> str:
    return (f"sent; not confirmed yet: no answer within {timeout:g}s (request {request.get('uuid')}). "
            f"{_where(settings, kind, request)}; {how_to_check(kind, request)}.")

