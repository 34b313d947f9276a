"""A request key's lock, held for as long as its monitor works on it: redis-py's :class:`redis.lock.Lock`, renewed.

The lock (``lock:<request key>``, CRAWLFLEET_MONITOR_LOCK_TTL) is what keeps two monitors from answering one request,
and its TTL is what hands the request to another monitor when this one dies. A plugin may run longer than the TTL
(a stop purging a large crawl, a slow ZooKeeper): a background thread therefore resets the TTL every third of it
(``Lock.reacquire``, which only succeeds while the token is still ours), so the lock only expires once its monitor is
gone. A renewal that finds the lock lost (Redis was flushed, or the monitor stalled longer than the TTL) says so in
the log: the request may then be answered twice, which clients tolerate (they take the first answer).
"""

from __future__ import annotations

import logging
import threading
from types import TracebackType
from typing import Any

from redis.exceptions import LockError

logger = logging.getLogger("crawlfleet.redis_monitor")


class RenewedLock:
    """``with RenewedLock(redis, name, ttl, token) as held:`` — ``held`` is False when another holder has it."""

    def __init__(self, redis: Any, name: str, ttl: float, token: str) -> None:
        self.name = name
        self.ttl = float(ttl)
        self.token = token
        self.lock = redis.lock(name, timeout=self.ttl, blocking=False, thread_local=False)
        self.lost = False
        self._done = threading.Event()
        self._renewer: threading.Thread | None = None

    def __enter__(self) -> bool:
        if not self.lock.acquire(blocking=False, token=self.token):
            return False
        self._renewer = threading.Thread(target=self._renew, name=f"renew {self.name}", daemon=True)
        self._renewer.start()
        return True

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._renewer is None:
            return
        self._done.set()
        self._renewer.join()
        try:
            self.lock.release()
        except LockError:  # expired or taken over: nothing of ours is left to delete
            self._lose("at release")

    def _renew(self) -> None:
        while not self._done.wait(self.ttl / 3):
            try:
                self.lock.reacquire()
            except LockError:
                self._lose("while its plugin ran")
                return
            except Exception as exc:  # Redis away for a moment: the next renewal tries again within the TTL
                logger.warning("redis-monitor: renewing %s failed: %s: %s", self.name, type(exc).__name__, exc)

    def _lose(self, when: str) -> None:
        if not self.lost:
            self.lost = True
            logger.warning("redis-monitor: lost the lock %s %s (another monitor may answer it too)", self.name, when)
