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
