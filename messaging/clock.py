"""Clocks: the cluster's time is the Redis server's.

Every cluster-wide window (throttles, leases, heartbeats, weights) is measured on the Redis clock, so that hosts
with skewed clocks agree. Lua scripts read ``TIME`` themselves; Python code that needs the same time takes a
:class:`Clock`, which simulations and tests replace with a :class:`ManualClock`.
"""

from __future__ import annotations

import time
from typing import Protocol

from messaging.clients import RedisClient
from messaging.scripts import LUA

# Lua preambles (messaging/lua/now_*.lua): ``now`` from ARGV[1] when the caller passes an explicit time (simulations,
# tests), else from the Redis server's clock. Every script that measures time has one of these as its first snippet
# (messaging.scripts.lua_script).
NOW_SECONDS_LUA = LUA / "now_seconds.lua"
NOW_MICROSECONDS_LUA = LUA / "now_microseconds.lua"


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class SystemClock:
    """The local clock: only for what never leaves this process (timeouts, poll intervals)."""

    def now(self) -> float:
        return time.time()


class MonotonicClock:
    """This process's monotonic clock: for durations and deadlines that never leave the process (a worker's send
    slots, waits, blocks it holds requests by)."""

    def now(self) -> float:
        return time.monotonic()


class RedisClock:
    """The Redis server's clock (``TIME``), shared by every host of the cluster."""

    def __init__(self, redis: RedisClient) -> None:
        self._redis = redis

    def now(self) -> float:
        seconds, micros = self._redis.time()
        return int(seconds) + int(micros) / 1_000_000


class ManualClock:
    """Simulated time: moves only when told to."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = float(start)

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError("time does not go backwards")
        self._now += seconds
        return self._now

    def set(self, when: float) -> None:
        if when < self._now:
            raise ValueError("time does not go backwards")
        self._now = float(when)


class RedisTimeMap:
    """Redis time on this process's clock: the offset between the two, as the fastest recent replies show it.

    A reply that carries the Redis time of its call (a politeness step's, a reservation's) is read here some time
    later: the network, the queue of a pipeline, a feed thread that waited for the GIL. Turning a slot into this
    process's clock with the offset of *that* reply (``local - redis``) puts the slot that much too late, by a delay
    that differs from reply to reply: two workers that send their hits "at the slot" then send them up to that
    difference apart from their true slots, and a site paced at 5 hits a second saw 6 within 0.975 s. The smallest
    offset seen is the one closest to the truth (the reply that waited least: a fraction of a millisecond on a LAN),
    so slots are mapped with the minimum of the offsets observed over the last ``memory`` seconds (kept per
    ``bucket`` seconds of this clock, so that a drift between the two clocks is followed within ``memory``). Until a
    reply was observed, the offset of now is unknown: :attr:`offset` is ``None``.
    """

    def __init__(self, memory: float = 16.0, bucket: float = 1.0) -> None:
        self.memory = memory
        self.bucket = bucket
        self._minima: dict[int, float] = {}  # bucket of this clock -> the least offset observed in it
        self._latest = float("-inf")  # this clock's time of the latest observation

    def observe(self, redis_now: float, local_now: float) -> None:
        """A reply that carried ``redis_now`` (seconds, Redis clock) was read at ``local_now`` (this clock)."""
        if not redis_now:
            return  # no step script ran (robots.txt pending, an empty queue): no Redis time
        offset = local_now - redis_now
        self._latest = max(self._latest, local_now)
        index = int(local_now // self.bucket)
        if offset < self._minima.get(index, float("inf")):
            self._minima[index] = offset
        oldest = index - int(self.memory // self.bucket)
        if min(self._minima) < oldest:
            self._minima = {i: value for i, value in self._minima.items() if i >= oldest}

    def stale(self, local_now: float) -> bool:
        """Whether nothing was observed for half the memory: a quiet process asks the Redis clock itself
        (:meth:`probe`), so that the first reply after a quiet spell — maybe a slow one — is not all it knows."""
        return local_now - self._latest >= self.memory / 2

    def probe(self, redis: RedisClient, clock: Clock) -> None:
        """Observe the Redis clock with a ``TIME`` call of its own (read back at once: one round trip late)."""
        redis_now = RedisClock(redis).now()
        self.observe(redis_now, clock.now())

    @property
    def offset(self) -> float | None:
        """This clock minus the Redis clock, as closely as the replies show it (``None`` before the first)."""
        return min(self._minima.values()) if self._minima else None
