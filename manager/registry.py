"""The manager registry: every manager of the cluster, so that any manager's pages can start a spider on any host.

Keys (``messaging.keys``): ``managers`` (zset host -> last heartbeat, Redis clock) and ``manager:<host>`` (hash: the
API URL, node name, max_proc, running and pending jobs). A manager writes both every few seconds from a thread; a
manager whose heartbeat is older than its TTL is left out of :meth:`ManagerRegistry.live` (and pruned), and a manager
that stops cleanly leaves at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from messaging import keys
from messaging.clients import as_text
from messaging.clock import RedisClock


@dataclass(frozen=True)
class ManagerInfo:
    host: str
    url: str
    node_name: str
    max_proc: int
    running: int
    pending: int
    heartbeat: float

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "url": self.url, "node_name": self.node_name, "max_proc": self.max_proc,
                "running": self.running, "pending": self.pending, "last_heartbeat": self.heartbeat}


class ManagerRegistry:
    def __init__(self, redis: Any, ttl: float = 20.0) -> None:
        self.redis = redis
        self.ttl = ttl
        self.clock = RedisClock(redis)

    def heartbeat(self, host: str, url: str, node_name: str, max_proc: int, running: int, pending: int) -> None:
        pipe = self.redis.pipeline(transaction=False)
        pipe.hset(keys.manager(host), mapping={"url": url, "node_name": node_name, "max_proc": max_proc,
                                               "running": running, "pending": pending})
        pipe.zadd(keys.MANAGERS, {host: self.clock.now()})
        pipe.execute()

    def leave(self, host: str) -> None:
        self.redis.zrem(keys.MANAGERS, host)
        self.redis.delete(keys.manager(host))

    def live(self) -> list[ManagerInfo]:
        now = self.clock.now()
        for stale in self.redis.zrangebyscore(keys.MANAGERS, "-inf", f"({now - self.ttl!r}"):
            self.leave(as_text(stale))
        hosts = [(as_text(host), float(score)) for host, score in self.redis.zrange(keys.MANAGERS, 0, -1,
                                                                                 withscores=True)]
        pipe = self.redis.pipeline(transaction=False)
        for host, _ in hosts:
            pipe.hgetall(keys.manager(host))
        result = []
        for (host, beat), raw in zip(hosts, pipe.execute(), strict=True):
            data = {as_text(k): as_text(v) for k, v in raw.items()}
            if "url" in data:
                result.append(ManagerInfo(host, data["url"], data.get("node_name", host),
                                          int(data.get("max_proc") or 0), int(data.get("running") or 0),
                                          int(data.get("pending") or 0), beat))
        return result

    def url_of(self, host: str) -> str | None:
        url = self.redis.hget(keys.manager(host), "url")
        return as_text(url) if url is not None else None
