"""Counters every component keeps in Redis (seed 4.1.1), mirrored as Prometheus metrics.

Two counters with the seed's semantics and key names, but **bounded memory**: the seed stores one sorted-set member
per hit; here each counter is a hash of time buckets, pruned whenever a bucket starts and expiring when idle.

- :class:`RollingCounter` — hits in the last ``window`` seconds (``stats:<module>:<plugin>:<window>``). The window
  is cut into :data:`BUCKETS_PER_WINDOW` buckets; the value sums the buckets that overlap the window, so it is exact
  to one bucket (``window / 12``) at its oldest edge.
- :class:`StepCounter` — hits per fixed period aligned to the epoch (hours start on the hour):
  ``stats:<module>:<plugin>:step<seconds>``, keeping the last :data:`STEPS_KEPT` periods.
- a lifetime total (``stats:<module>:<plugin>:lifetime``).

Time is the Redis server's (``TIME`` inside the scripts) unless an explicit ``now`` is passed (simulations, tests).
:class:`Stats` is the one small API the components call: ``Stats(redis, modules.KAFKA_MONITOR).incr("crawl")``;
``incr_many({...})`` counts several plugins in the same single round trip.

``Stats.incr`` waits for Redis, which a Scrapy component must never do on the reactor. :class:`BufferedStats` is
what they use instead: ``incr`` only adds to a counter in memory, and a daemon thread sends everything pending every
``interval`` seconds through ``incr_many``. A flush that fails keeps its counts for the next one (a flush that
fails half-way through may count some events twice: these are statistics, not ledgers).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections import Counter as Tally
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import Counter
from redis.cluster import RedisCluster

from messaging import keys
from messaging.clients import RedisClient
from messaging.clock import NOW_SECONDS_LUA
from messaging.outage import OutageLog
from messaging.scripts import LUA, lua_script

DEFAULT_WINDOWS = (60, 300, 900, 3600, 86400)
BUCKETS_PER_WINDOW = 12
STEPS_KEPT = 48
ALIVE_TTL = 30

logger = logging.getLogger(__name__)

EVENTS = Counter("crawlfleet_events", "What crawlfleet's components did, by module and plugin.",
                 ["module", "plugin"])

BUCKET_INCR = lua_script(LUA / "bucket_incr.lua", NOW_SECONDS_LUA)
BUCKET_SUM = lua_script(LUA / "bucket_sum.lua", NOW_SECONDS_LUA)


def _now_arg(now: float | None) -> str:
    return "" if now is None else repr(float(now))


class RollingCounter:
    """Hits in the last ``window`` seconds, in bounded memory."""

    def __init__(self, redis: RedisClient, key: str, window: int, buckets: int = BUCKETS_PER_WINDOW) -> None:
        if window <= 0 or buckets <= 0:
            raise ValueError("window and buckets must be positive")
        self.redis = redis
        self.key = key
        self.window = window
        self.buckets = buckets
        self.width = window / buckets
        self._incr = BUCKET_INCR.on(redis)
        self._sum = BUCKET_SUM.on(redis)

    def increment(self, amount: int = 1, now: float | None = None, client: Any = None) -> None:
        self._incr(keys=[self.key], args=[_now_arg(now), *self.incr_args(amount)], client=client)

    def incr_args(self, amount: int) -> list[Any]:
        """This counter's values in a ``bucket_incr.lua`` call (one bucket more than the window holds: the oldest
        one still overlaps it)."""
        return [self.width, self.buckets + 1, amount, self.window * 2]

    def value(self, now: float | None = None) -> int:
        return int(self._sum(keys=[self.key], args=[_now_arg(now), self.width, self.window]))


class StepCounter:
    """Hits per fixed period of ``step`` seconds aligned to the epoch; the last :data:`STEPS_KEPT` are kept."""

    def __init__(self, redis: RedisClient, key: str, step: int, kept: int = STEPS_KEPT) -> None:
        if step <= 0:
            raise ValueError("step must be positive")
        self.redis = redis
        self.key = key
        self.step = step
        self.kept = kept
        self._incr = BUCKET_INCR.on(redis)

    def increment(self, amount: int = 1, now: float | None = None, client: Any = None) -> None:
        self._incr(keys=[self.key], args=[_now_arg(now), *self.incr_args(amount)], client=client)

    def incr_args(self, amount: int) -> list[Any]:
        """This counter's values in a ``bucket_incr.lua`` call."""
        return [self.step, self.kept, amount, self.step * (self.kept + 1)]

    def periods(self) -> dict[int, int]:
        """Count per period, keyed by the period's start time (seconds since the epoch)."""
        raw = self.redis.hgetall(self.key)
        return {int(bucket) * self.step: int(count) for bucket, count in sorted(raw.items(), key=lambda i: int(i[0]))}

    def value(self, period_start: float) -> int:
        return int(self.redis.hget(self.key, int(period_start // self.step)) or 0)


class Stats:
    """The counters of one module: ``incr(plugin)`` bumps every window, the lifetime total and Prometheus."""

    def __init__(self, redis: RedisClient, module: str, windows: Iterable[int] = DEFAULT_WINDOWS,
                 step: int | None = 3600) -> None:
        self.redis = redis
        self.module = module
        self.windows = tuple(windows)
        self.step = step
        self._counters: dict[str, tuple[list[RollingCounter], StepCounter | None]] = {}

    def _for(self, plugin: str) -> tuple[list[RollingCounter], StepCounter | None]:
        if plugin not in self._counters:
            rolling = [RollingCounter(self.redis, keys.stats_counter(self.module, plugin, window), window)
                       for window in self.windows]
            step = (StepCounter(self.redis, keys.stats_counter(self.module, plugin, f"step{self.step}"), self.step)
                    if self.step else None)
            self._counters[plugin] = (rolling, step)
        return self._counters[plugin]

    def incr(self, plugin: str, amount: int = 1, now: float | None = None) -> None:
        """Count ``amount`` events of ``plugin`` (one round trip on one server: one script call)."""
        self.incr_many({plugin: amount}, now)

    def incr_many(self, counts: Mapping[str, int], now: float | None = None) -> None:
        """Count several plugins at once: ``{plugin: amount}``, all in one script call on one server."""
        counts = {plugin: amount for plugin, amount in counts.items() if amount > 0}
        if not counts:
            return
        if isinstance(self.redis, RedisCluster):
            # The window keys live in different slots, and a cluster pipeline refuses scripts: one call each.
            for plugin, amount in counts.items():
                for counter in self._counters_of(plugin):
                    counter.increment(amount, now)
                self.redis.incrby(keys.stats_counter(self.module, plugin, "lifetime"), amount)
        else:  # one script call for every counter of every plugin (keys in any slot: a single server)
            counter_keys: list[str] = []
            args: list[Any] = [_now_arg(now)]
            for plugin, amount in counts.items():
                for counter in self._counters_of(plugin):
                    counter_keys.append(counter.key)
                    args += counter.incr_args(amount)
                counter_keys.append(keys.stats_counter(self.module, plugin, "lifetime"))
                args += ["", "", amount, ""]
            BUCKET_INCR.on(self.redis)(keys=counter_keys, args=args)
        for plugin, amount in counts.items():
            EVENTS.labels(self.module, plugin).inc(amount)

    def _counters_of(self, plugin: str) -> list[RollingCounter | StepCounter]:
        rolling, step = self._for(plugin)
        return [*rolling, *([step] if step else [])]

    def value(self, plugin: str, window: int | str, now: float | None = None) -> int:
        """Events in the last ``window`` seconds (one of the configured windows), or ``"lifetime"``."""
        if window == "lifetime":
            return int(self.redis.get(keys.stats_counter(self.module, plugin, "lifetime")) or 0)
        rolling, _ = self._for(plugin)
        for counter in rolling:
            if counter.window == int(window):
                return counter.value(now)
        raise ValueError(f"{self.module}: no {window}s window (windows: {self.windows})")

    def values(self, plugin: str, now: float | None = None) -> dict[str, int]:
        result = {str(window): self.value(plugin, window, now) for window in self.windows}
        result["lifetime"] = self.value(plugin, "lifetime")
        return result

    def heartbeat(self, ip: str, ttl: int = ALIVE_TTL) -> None:
        """Say that this module runs on host ``ip`` (seed tables 4-4/4-5: ``stats:<module>:<ip>`` with a TTL)."""
        self.redis.set(keys.stats_alive(self.module, ip), socket.gethostname(), ex=ttl)


class Heartbeat:
    """A daemon thread that refreshes a module's alive key (and any extra callables) every ``interval`` seconds."""

    def __init__(self, stats: Stats, ip: str, interval: float = ALIVE_TTL / 3, extra: Iterable[Any] = ()) -> None:
        self.stats = stats
        self.ip = ip
        self.interval = interval
        self.extra = list(extra)
        self.turned_at: float | None = None  # when the thread last beat, or tried to (monotonic): its liveness
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{stats.module}", daemon=True)

    def start(self) -> Heartbeat:
        self.beat()
        self._thread.start()
        return self

    def beat(self) -> None:
        self.stats.heartbeat(self.ip, ttl=int(self.interval * 3) + 1)
        for refresh in self.extra:
            refresh()

    def _run(self) -> None:
        self.turned_at = time.monotonic()
        while not self._stop.wait(self.interval):
            self.turned_at = time.monotonic()  # a failed beat is a turn too: Redis away is not a wedged thread
            with contextlib.suppress(Exception):  # a Redis hiccup must not kill the beat; the next one retries
                self.beat()

    def age(self) -> float | None:
        """Seconds since the thread's last turn (None before it runs or after it stopped)."""
        if self.turned_at is None or self._stop.is_set():
            return None
        return time.monotonic() - self.turned_at

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.interval + 1)


class BufferedStats:
    """:class:`Stats` that never waits for Redis: counts gather in memory and a daemon thread flushes them.

    ``incr`` takes a lock and adds to a counter; every ``interval`` seconds the thread sends all pending counts in
    one :meth:`Stats.incr_many` (one round trip on a single server). A failed flush puts its counts back for the
    next one and logs once when counting starts failing and once when it works again, not every second.
    ``close()`` stops the thread and flushes what is left.
    """

    def __init__(self, stats: Stats, interval: float = 1.0) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.stats = stats
        self.interval = interval
        self._pending: Tally[str] = Tally()
        self._lock = threading.Lock()  # guards _pending: incr() runs on the reactor, flush() in the thread
        self._flushing = threading.Lock()  # one flush at a time (the thread's and close()'s)
        self.outage = OutageLog(logger, f"{stats.module} counters: writing to Redis (kept until it answers)")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"stats-flush-{stats.module}", daemon=True)
        self._thread.start()

    def incr(self, plugin: str, amount: int = 1) -> None:
        if amount > 0:
            with self._lock:
                self._pending[plugin] += amount

    def pending(self) -> dict[str, int]:
        """Counts not sent yet."""
        with self._lock:
            return dict(self._pending)

    def flush(self) -> bool:
        """Send every pending count now (blocking); ``False`` if Redis refused (the counts wait for the next)."""
        with self._flushing:
            with self._lock:
                batch, self._pending = self._pending, Tally()
            if not batch:
                return True
            try:
                self.stats.incr_many(batch)
            except Exception as exc:  # Redis down or slow: keep the counts, say so once
                with self._lock:
                    self._pending.update(batch)
                self.outage.failed(exc)
                return False
            self.outage.ok()
            return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.flush()

    def close(self) -> None:
        """Stop the thread and flush what is left (once more, even if Redis failed before)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.interval + 30)
        self.flush()
