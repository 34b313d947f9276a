"""The Redis monitor's loop: read requests from their streams, answer each on Kafka, then acknowledge it.

The Kafka monitor leaves each info, stats, site-config, stop, pause or resume request under its request key and, in the
same Lua call, as an entry of its kind's stream (``requests:{requests}:<kind>``, :func:`messaging.keys.request_stream`).
Every Redis monitor reads all the streams of its plugins with one blocking ``XREADGROUP`` through the consumer group
``redis-monitor`` — no keyspace scan, so the monitor's cost does not grow with the number of keys in Redis. An entry
read by a monitor is pending for it (:mod:`messaging.redis_monitor.claim` keeps it so while its plugin runs); the answer
is produced and acknowledged by Kafka, and only then are the entry acknowledged and dropped and the request key deleted,
in one call (``lua/request_done.lua``). A monitor that dies mid-way leaves the entry pending: another monitor takes it
over once it has been idle for CRAWLFLEET_MONITOR_LOCK_TTL (``XAUTOCLAIM``, every third of that), so the request is
answered (perhaps twice; the client takes the first answer). A plugin that raises produces an ``error`` answer with the
reason, and the request is done: a client can retry, and a request that can never succeed does not loop forever. While
Redis or Kafka is away the loop keeps trying every CRAWLFLEET_REDIS_MONITOR_INTERVAL, and
:class:`messaging.outage.OutageLog` says so once when it starts and once when it is over. A Redis that lost the group
(restarted empty) gets it again. """

from __future__ import annotations

import json
import logging
import threading
import time
import uuid as uuidlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from redis.exceptions import ResponseError

from messaging import clients, keys, modules, request_kinds
from messaging.answers import ERROR, OK, REJECTED, answer
from messaging.clients import RedisClient, as_text
from messaging.clock import Clock
from messaging.delivery import Delivery, Record
from messaging.health import Beat, Health, outage_clear
from messaging.outage import OutageLog
from messaging.plugins import load_plugins
from messaging.redis_monitor.claim import HeldEntry
from messaging.redis_monitor.plugins import Context, Plugin, Refused
from messaging.scripts import lua_script
from messaging.service import run_service
from messaging.settings import Settings
from messaging.stats import Stats

MODULE = modules.REDIS_MONITOR
GROUP = MODULE  # the consumer group every Redis monitor reads the request streams through
READ_COUNT = 16  # entries one read takes at most
CLAIM_COUNT = 100  # stale entries one XAUTOCLAIM takes over at most
FORGET_IDLE_TTLS = 10  # a consumer (a monitor) with nothing pending and idle this many lock TTLs is removed
LUA = Path(__file__).with_name("lua")
DONE = lua_script(LUA / "request_done.lua")
RENEW = lua_script(LUA / "request_renew.lua")
Entry = tuple[str, str, dict[Any, Any]]  # stream, entry id, fields
logger = logging.getLogger("crawlfleet.redis_monitor")

class RedisMonitor:
    def __init__(self, settings: Settings, redis: RedisClient | None = None, producer: Any = None,
                 plugins: list[Plugin] | None = None, clock: Clock | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.redis = redis if redis is not None else clients.redis_client(settings)
        # answers once each on the topic (messaging.delivery), by their stream entry: a retry after a Kafka timeout,
        # or the monitor that takes over a dead one's request, does not answer it twice
        self.delivery = Delivery(settings, self.redis, (lambda: producer) if producer is not None else None)
        self.plugins: list[Plugin] = (plugins if plugins is not None
                                      else load_plugins(request_kinds.redis_chain(settings)))
        self.streams: dict[str, Plugin] = {}
        for plugin in self.plugins:
            stream = keys.request_stream(plugin.kind)
            if stream in self.streams:
                raise ValueError(f"two Redis monitor plugins for requests of kind {plugin.kind!r}: "
                                 f"{self.streams[stream].name} and {plugin.name}")
            self.streams[stream] = plugin
        self.stats = Stats(self.redis, MODULE)
        self.context = Context(self.redis, settings)
        self.token = uuidlib.uuid4().hex  # this monitor's consumer name in the group
        self.monotonic = monotonic
        self._done = DONE.on(self.redis)
        self._renew = RENEW.on(self.redis)
        self._groups_ready = False
        self._next_claim = 0.0
        self._stop = threading.Event()
        self.outage = OutageLog(logger, "redis-monitor: reading the request streams (Redis or Kafka)", clock=clock)
        self.beat = Beat()  # the read loop's turns (/livez)

    def health_checks(self, health: Health) -> None:
        """Live while the read loop turns; ready while its reads and answers reach Redis and Kafka."""
        health.beat("answer", self.beat)
        health.ready("answers", outage_clear(self.outage))

    def connect(self) -> None:
        if any(plugin.kind == "site" for plugin in self.plugins):
            self.context.zk()  # connect now: the first site change should not wait for a ZooKeeper session
        self._ensure_groups()

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        try:
            self._forget(self.token)
        except Exception:  # Redis away: the other monitors forget this consumer later
            logger.debug("redis-monitor: could not leave the consumer group", exc_info=True)
        self.context.close()
        self.delivery.close(timeout=10)

    def run(self) -> None:
        while not self._stop.is_set():
            self.beat.tick()
            try:
                self.run_once(block=self.settings.redis_monitor_interval)
            except Exception as exc:  # Redis or Kafka away: keep going, the requests stay until answered
                self.outage.failed(exc)
                self._stop.wait(self.settings.redis_monitor_interval)
            else:
                self.outage.ok()

    def run_once(self, block: float | None = None) -> int:
        """Take over stale requests (every third of the lock TTL), then read new ones, waiting up to ``block``
        seconds for one (``None``: not at all); answer them all; returns how many were answered."""
        self._ensure_groups()
        try:
            entries: list[Entry] = []
            if self.monotonic() >= self._next_claim:
                entries += self._take_over()
                self._next_claim = self.monotonic() + self.settings.monitor_lock_ttl / 3
            entries += self._read(block if not entries else None)
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            logger.warning("redis-monitor: the consumer group is gone (Redis restarted empty?): creating it again")
            self._groups_ready = False
            return 0
        handled = 0
        for stream, entry_id, fields in entries:
            if self._stop.is_set():
                break  # the rest stay pending for this consumer: taken over after the lock TTL
            self.beat.tick()
            handled += self.handle_entry(stream, entry_id, fields)
        return handled

    def handle_entry(self, stream: str, entry_id: str, fields: dict[Any, Any]) -> int:
        """Answer one request and, once Kafka has the answer, acknowledge it; returns 1 (0: taken over)."""
        plugin = self.streams[stream]
        fields = {as_text(k): v for k, v in fields.items()}
        key = as_text(fields.get("key", b""))
        with HeldEntry(self._renew, stream, GROUP, self.token, entry_id, self.settings.monitor_lock_ttl) as held:
            if held.lost:
                return 0  # it waited its turn past the TTL and another monitor took it over
            try:
                request = json.loads(fields.get("request") or b"")
            except ValueError:
                request = {}
            result = self._answer(plugin, key, request if isinstance(request, dict) else {})
            if result.get("uuid"):
                self.delivery.send([Record(self.settings.topic_outbound, result, result["uuid"],
                                           f"answer:{stream}:{entry_id}")], timeout=30)
            self._done(keys=[stream, key], args=[GROUP, entry_id])
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

    # --- the streams ----------------------------------------------------------------------------------------------
    def _ensure_groups(self) -> None:
        if self._groups_ready:
            return
        for stream in self.streams:
            try:
                self.redis.xgroup_create(stream, GROUP, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
        self._groups_ready = True

    def _read(self, block: float | None) -> list[Entry]:
        """New entries of every stream, in one call (the streams share a hash tag)."""
        if not self.streams:
            return []
        reply = self.redis.xreadgroup(GROUP, self.token, {stream: ">" for stream in self.streams}, count=READ_COUNT,
                                      block=None if not block else max(1, int(block * 1000)))
        return list(_entries(reply))

    def _take_over(self) -> list[Entry]:
        """Entries pending for longer than the lock TTL at a monitor that stopped renewing them (it died)."""
        idle_ms = int(self.settings.monitor_lock_ttl * 1000)
        taken: list[Entry] = []
        for stream in self.streams:
            reply = self.redis.xautoclaim(stream, GROUP, self.token, idle_ms, start_id="0-0", count=CLAIM_COUNT)
            claimed = [(stream, as_text(entry_id), fields) for entry_id, fields in reply[1] if fields is not None]
            if claimed:
                logger.warning("redis-monitor: took over %d requests of %s from a monitor that stopped (idle > %ss)",
                               len(claimed), stream, self.settings.monitor_lock_ttl)
            taken += claimed
        self._forget_idle(idle_ms * FORGET_IDLE_TTLS)
        return taken

    def _forget_idle(self, idle_ms: int) -> None:
        """Remove consumers (monitors long gone) that hold nothing, so the group does not grow forever."""
        for stream in self.streams:
            for consumer in self.redis.xinfo_consumers(stream, GROUP):
                name = as_text(consumer["name"])
                if name != self.token and not int(consumer["pending"]) and int(consumer["idle"]) > idle_ms:
                    self.redis.xgroup_delconsumer(stream, GROUP, name)

    def _forget(self, consumer: str) -> None:
        """Leave the group on a clean stop, unless entries are still pending for this consumer (then another
        monitor takes them over after the TTL and forgets the consumer later)."""
        for stream in self.streams:
            mine = [c for c in self.redis.xinfo_consumers(stream, GROUP) if as_text(c["name"]) == consumer]
            if mine and not int(mine[0]["pending"]):
                self.redis.xgroup_delconsumer(stream, GROUP, consumer)


def _entries(reply: Any) -> Iterable[Entry]:
    """(stream, id, fields) from an XREADGROUP reply (a list of [stream, entries], or a dict under RESP3)."""
    items = reply.items() if isinstance(reply, dict) else (reply or [])
    for stream, entries in items:
        for entry_id, fields in entries:
            if fields is not None:
                yield as_text(stream), as_text(entry_id), fields


def run(settings: Settings) -> None:
    """``crawlfleet redis-monitor``: run until SIGTERM/SIGINT, with heartbeat and /metrics."""
    monitor = RedisMonitor(settings)
    run_service(monitor, settings, MODULE, lambda url: (
        f"redis-monitor: watching {', '.join(monitor.streams)} (metrics {url})"))
