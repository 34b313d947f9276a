"""Counters every component keeps in Redis (seed 4.1.1), mirrored as Prometheus metrics.

Two counters with the seed's semantics and key names, but **bounded memory**: the seed stores one sorted-set member
per hit; here each counter is a hash of time buckets, pruned on every increment and expiring when idle.

- :class:`RollingCounter` — hits in the last ``window`` seconds (``stats:<module>:<plugin>:<window>``). The window
  is cut into :data:`BUCKETS_PER_WINDOW` buckets; the value sums the buckets that overlap the window, so it is exact
  to one bucket (``window / 12``) at its oldest edge.
- :class:`StepCounter` — hits per fixed period aligned to the epoch (hours start on the hour):
  ``stats:<module>:<plugin>:step<seconds>``, keeping the last :data:`STEPS_KEPT` periods.
- a lifetime total (``stats:<module>:<plugin>:lifetime``).

Time is the Redis server's (``TIME`` inside the scripts) unless an explicit ``now`` is passed (simulations, tests).
:class:`Stats` is the one small API the components call: ``Stats(redis, "kafka-monitor").incr("crawl")``.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterable
from typing import Any

from prometheus_client import Counter
from redis.cluster import RedisCluster

from messaging import keys
from messaging.clock import LUA_NOW_SECONDS

DEFAULT_WINDOWS = (60, 300, 900, 3600, 86400)
BUCKETS_PER_WINDOW = 12
STEPS_KEPT = 48
ALIVE_TTL = 30

EVENTS = Counter("crawlfleet_events", "What crawlfleet's components did, by module and plugin.",
                 ["module", "plugin"])

# KEYS[1]: the bucket hash. ARGV: now (empty: Redis TIME), bucket width, buckets kept, amount, ttl seconds.
_BUCKET_INCR = LUA_NOW_SECONDS + """
local width = tonumber(ARGV[2])
local bucket = math.floor(now / width)
local oldest = bucket - tonumber(ARGV[3]) + 1
redis.call('HINCRBY', KEYS[1], bucket, tonumber(ARGV[4]))
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  if tonumber(field) < oldest then redis.call('HDEL', KEYS[1], field) end
end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
return bucket
"""

# KEYS[1]: the bucket hash. ARGV: now (empty: Redis TIME), bucket width, window. Sums the buckets that overlap
# (now - window, now].
_BUCKET_SUM = LUA_NOW_SECONDS + """
local width = tonumber(ARGV[2])
local bucket = math.floor(now / width)
local oldest = math.floor((now - tonumber(ARGV[3])) / width)
local total = 0
local flat = redis.call('HGETALL', KEYS[1])
for i = 1, #flat, 2 do
  local b = tonumber(flat[i])
  if b >= oldest and b <= bucket then total = total + tonumber(flat[i + 1]) end
end
return total
"""


def _now_arg(now: float | None) -> str:
    return "" if now is None else repr(float(now))


class RollingCounter:
    """Hits in the last ``window`` seconds, in bounded memory."""

    def __init__(self, redis: Any, key: str, window: int, buckets: int = BUCKETS_PER_WINDOW) -> None:
        if window <= 0 or buckets <= 0:
            raise ValueError("window and buckets must be positive")
        self.redis = redis
        self.key = key
        self.window = window
        self.buckets = buckets
        self.width = window / buckets
        self._incr = redis.register_script(_BUCKET_INCR)
        self._sum = redis.register_script(_BUCKET_SUM)

    def increment(self, amount: int = 1, now: float | None = None, client: Any = None) -> None:
        # One bucket more than the window holds: the oldest one still overlaps it.
        self._incr(keys=[self.key], args=[_now_arg(now), self.width, self.buckets + 1, amount, self.window * 2],
                   client=client)

    def value(self, now: float | None = None) -> int:
        return int(self._sum(keys=[self.key], args=[_now_arg(now), self.width, self.window]))


class StepCounter:
    """Hits per fixed period of ``step`` seconds aligned to the epoch; the last :data:`STEPS_KEPT` are kept."""

    def __init__(self, redis: Any, key: str, step: int, kept: int = STEPS_KEPT) -> None:
        if step <= 0:
            raise ValueError("step must be positive")
        self.redis = redis
        self.key = key
        self.step = step
        self.kept = kept
        self._incr = redis.register_script(_BUCKET_INCR)

    def increment(self, amount: int = 1, now: float | None = None, client: Any = None) -> None:
        self._incr(keys=[self.key], args=[_now_arg(now), self.step, self.kept, amount, self.step * (self.kept + 1)],
                   client=client)

    def periods(self) -> dict[int, int]:
        """Count per period, keyed by the period's start time (seconds since the epoch)."""
        raw = self.redis.hgetall(self.key)
        return {int(bucket) * self.step: int(count) for bucket, count in sorted(raw.items(), key=lambda i: int(i[0]))}

    def value(self, period_start: float) -> int:
        return int(self.redis.hget(self.key, int(period_start // self.step)) or 0)


class Stats:
    """The counters of one module: ``incr(plugin)`` bumps every window, the lifetime total and Prometheus."""

    def __init__(self, redis: Any, module: str, windows: Iterable[int] = DEFAULT_WINDOWS,
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
        """Count ``amount`` events of ``plugin`` (one round trip on one server: a pipeline of small scripts)."""
        if amount <= 0:
            return
        rolling, step = self._for(plugin)
        counters: list[RollingCounter | StepCounter] = [*rolling, *([step] if step else [])]
        lifetime = keys.stats_counter(self.module, plugin, "lifetime")
        if isinstance(self.redis, RedisCluster):
            # The window keys live in different slots, and a cluster pipeline refuses scripts: one call each.
            for counter in counters:
                counter.increment(amount, now)
            self.redis.incrby(lifetime, amount)
        else:
            pipe = self.redis.pipeline(transaction=False)
            for counter in counters:
                counter.increment(amount, now, client=pipe)
            pipe.incrby(lifetime, amount)
            pipe.execute()
        EVENTS.labels(self.module, plugin).inc(amount)

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
        while not self._stop.wait(self.interval):
            with contextlib.suppress(Exception):  # a Redis hiccup must not kill the beat; the next one retries
                self.beat()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.interval + 1)
