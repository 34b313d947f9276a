"""One way for every long-lived loop to log an outage: a line when it starts, a line when it ends.

A loop that retries a dependency (Redis, Kafka, ZooKeeper, MongoDB) while it is away must not log per attempt: a
Redis outage once wrote a full traceback every 0.2 s in the Redis monitor, and one per second per master
(``master.election: leader step failed``), about 2,600 lines per master in a 40 s outage. :class:`OutageLog` logs
by the changes of state instead: ``failed(exc)`` logs the first failure (its type and message; the traceback only
at DEBUG), ``ok()`` logs the recovery with how long it lasted, and everything in between is silent — at most two
lines per outage. ``every`` (off by default) adds a reminder while an outage lasts, for loops whose operators want
one. Thread-safe: a loop's threads may share one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol


class _HasNow(Protocol):
    def now(self) -> float: ...


ClockLike = _HasNow | Callable[[], float]


def _reader(clock: ClockLike | None) -> Callable[[], float]:
    if clock is None:
        return time.monotonic
    now = getattr(clock, "now", None)
    return now if callable(now) else clock  # type: ignore[return-value]


class OutageLog:
    """Log a dependency's outage once when it starts and once when it ends, never once per failed attempt."""

    def __init__(self, log: logging.Logger, what: str, every: float | None = None,
                 clock: ClockLike | None = None) -> None:
        """``what`` names the loop and what it needs ("master: dispatch (Redis)"); ``clock`` is a
        :class:`messaging.clock.Clock` or a callable returning seconds (default: the monotonic clock)."""
        self.log = log
        self.what = what
        self.every = every
        self._now = _reader(clock)
        self.since: float | None = None
        self.outages = 0  # how many outages started (for tests and stats)
        self.ended_at: float | None = None  # when the last outage ended (this log's clock)
        self._reported = 0.0
        self._lock = threading.Lock()

    @property
    def down(self) -> bool:
        return self.since is not None

    def failed(self, exc: BaseException | str) -> bool:
        """An attempt failed; True when this starts an outage (and was logged)."""
        now = self._now()
        reason = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
        with self._lock:
            if self.since is None:
                self.since = self._reported = now
                self.outages += 1
                started = True
            elif self.every is not None and now - self._reported >= self.every:
                self._reported = now
                self.log.warning("%s still failing after %.0fs: %s", self.what, now - self.since, reason)
                return False
            else:
                return False
        if started:
            self.log.error("%s failing: %s (retrying; one line when it works again)", self.what, reason)
            if isinstance(exc, BaseException):
                self.log.debug("%s: first failure", self.what, exc_info=exc)
        return started

    def ok(self) -> float | None:
        """An attempt worked; when it ends an outage, logs it and returns how long it lasted (else None)."""
        if self.since is None:  # the common case, without the lock
            return None
        with self._lock:
            since, self.since = self.since, None
        if since is None:
            return None
        self.ended_at = now = self._now()
        lasted = max(0.0, now - since)
        self.log.warning("%s works again after %.1fs", self.what, lasted)
        return lasted


class RepeatFilter(logging.Filter):
    """Lets a client library's warning through once per outage, not once per reconnection attempt.

    kazoo logs ``Connection dropped`` on every attempt (every second while ZooKeeper is away) and kafka-python its
    connection errors likewise. A record of those libraries (``prefixes``) whose message template (logger, level,
    format string) was seen less than ``quiet`` seconds ago is dropped; the first one after a quiet spell passes, so
    each outage shows its first line. Other records pass untouched. It sits on handlers (a filter on the ``kazoo``
    logger would not see the records of ``kazoo.client``).
    """

    def __init__(self, prefixes: tuple[str, ...] = ("kafka", "kazoo"), quiet: float = 60.0,
                 clock: ClockLike | None = None) -> None:
        super().__init__()
        self.prefixes = tuple(prefixes)
        self.quiet = quiet
        self._now = _reader(clock)
        self._last: dict[tuple[str, int, str], float] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(self.prefixes):
            return True
        key = (record.name, record.levelno, str(record.msg))
        now = self._now()
        with self._lock:
            last = self._last.get(key)
            self._last[key] = now
            if len(self._last) > 10_000:  # many distinct templates: forget the oldest half
                for old in sorted(self._last, key=self._last.__getitem__)[:5_000]:
                    del self._last[old]
        return last is None or now - last >= self.quiet


RECONNECTING_LIBRARIES = ("kafka", "kazoo")


def quiet_reconnects(names: tuple[str, ...] = RECONNECTING_LIBRARIES) -> None:
    """Put a :class:`RepeatFilter` for ``names`` on every handler of the root logger (idempotent); call it once
    logging is configured (``messaging.service.setup_logging``, the worker's scheduler under Scrapy's logging)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RepeatFilter) for f in handler.filters):
            handler.addFilter(RepeatFilter(tuple(names)))
