"""The Redis monitor's loop: find request keys, lock each, answer it on Kafka, then delete it.

Several monitors may run: a key is handled by the one that takes its lock (``lock:<key>``, redis-py's ``Lock``,
CRAWLFLEET_MONITOR_LOCK_TTL), renewed while its plugin runs (:mod:`messaging.redis_monitor.lease`). The answer is
produced and acknowledged by Kafka before the request key is deleted, so a monitor that dies mid-way leaves the key
for another one once the lock expires (the client may then get the answer twice; it takes the first). A plugin that
raises produces an ``error`` answer with the reason, and the request is done: a client can retry, and a request that
can never succeed does not loop forever. While Redis or Kafka is away the loop keeps trying every
CRAWLFLEET_REDIS_MONITOR_INTERVAL, and :class:`messaging.outage.OutageLog` says so once when it starts and once when
it is over.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid as uuidlib
from typing import Any

from messaging import clients, keys, modules
from messaging.answers import ERROR, OK, REJECTED, answer
from messaging.clients import as_text
from messaging.clock import Clock
from messaging.outage import OutageLog
from messaging.plugins import load_plugins
from messaging.redis_monitor.lease import RenewedLock
from messaging.redis_monitor.plugins import Context, Plugin, Refused
from messaging.service import run_service
from messaging.settings import Settings
from messaging.stats import Stats

MODULE = modules.REDIS_MONITOR
SCAN_COUNT = 1000
logger = logging.getLogger("crawlfleet.redis_monitor")

class RedisMonitor:
    def __init__(self, settings: Settings, redis: Any = None, producer: Any = None,
                 plugins: list[Plugin] | None = None, clock: Clock | None = None) -> None:
        self.settings = settings
        self.redis = redis if redis is not None else clients.redis_client(settings)
        self.producer = producer
        self.plugins: list[Plugin] = plugins if plugins is not None else load_plugins(settings.redis_monitor_plugins)
        self.stats = Stats(self.redis, MODULE)
        self.context = Context(self.redis, settings)
        self.token = uuidlib.uuid4().hex
        self._stop = threading.Event()
        self.outage = OutageLog(logger, "redis-monitor: a pass over the request keys (Redis or Kafka)", clock=clock)

    def connect(self) -> None:
        if self.producer is None:
            self.producer = clients.kafka_producer(self.settings)
        if any(plugin.kind == "site" for plugin in self.plugins):
            self.context.zk()  # connect now: the first site change should not wait for a ZooKeeper session

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self.context.close()
        if self.producer is not None:
            self.producer.close(timeout=10)

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                handled = self.run_once()
            except Exception as exc:  # Redis or Kafka away: keep going, the keys stay until handled
                self.outage.failed(exc)
                handled = 0
            else:
                self.outage.ok()
            if not handled:
                self._stop.wait(self.settings.redis_monitor_interval)

    def run_once(self) -> int:
        """One pass over every plugin's keys; returns how many requests were answered."""
        handled = 0
        for plugin in self.plugins:
            for raw in self.redis.scan_iter(match=plugin.pattern, count=SCAN_COUNT):
                if self._stop.is_set():
                    return handled
                handled += self.handle_key(plugin, as_text(raw))
        return handled

    def handle_key(self, plugin: Plugin, key: str) -> int:
        with RenewedLock(self.redis, keys.monitor_lock(key), self.settings.monitor_lock_ttl, self.token) as held:
            if not held:
                return 0  # another monitor has it
            raw = self.redis.get(key)
            if raw is None:
                return 0  # answered and deleted by another monitor between our SCAN and our lock
            try:
                request = json.loads(raw)
            except ValueError:
                request = {}
            result = self._answer(plugin, key, request)
            if result.get("uuid"):
                self.producer.send(self.settings.topic_outbound, result, key=result["uuid"]).get(timeout=30)
            self.redis.delete(key)
            self.stats.incr(plugin.name)
            if result["status"] == ERROR:
                self.stats.incr("errors")
            logger.info("redis-monitor: %s answered %s (%s)", plugin.name, key, result["status"])
            return 1

    def _answer(self, plugin: Plugin, key: str, request: dict[str, Any]) -> dict[str, Any]:
        try:
            return answer(request, plugin.kind, OK, **plugin.handle(key, request, self.context))
        except Refused as refusal:
            return answer(request, plugin.kind, REJECTED, reason=refusal.reason, **refusal.fields)
        except Exception as exc:
            logger.exception("redis-monitor: %s failed on %s", plugin.name, key)
            return answer(request, plugin.kind, ERROR, reason=f"{type(exc).__name__}: {exc}")


def run(settings: Settings) -> None:
    """``crawlfleet redis-monitor``: run until SIGTERM/SIGINT, with heartbeat and /metrics."""
    monitor = RedisMonitor(settings)
    run_service(monitor, settings, MODULE, lambda url: (
        f"redis-monitor: watching {', '.join(p.pattern for p in monitor.plugins)} (metrics {url})"))
