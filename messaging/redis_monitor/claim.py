"""A request held for as long as its monitor works on it: its stream entry's idle time reset in the background.

Every monitor reads the request streams through one consumer group; an entry read by a monitor stays *pending* for
it until the monitor acknowledges it (after Kafka acknowledged the answer). Another monitor takes over an entry only
when it has been idle for CRAWLFLEET_MONITOR_LOCK_TTL (``XAUTOCLAIM``) — which is what hands a dead monitor's request
to a live one. A plugin may run longer than that (a stop purging a large crawl, a slow ZooKeeper): a background
thread therefore resets the entry's idle time every third of the TTL (``lua/request_renew.lua``, only while the entry
is still this monitor's), so a request is taken over only once its monitor is gone. A renewal that finds the entry
no longer ours (the monitor stalled longer than the TTL) says so in the log: the request may then be answered twice,
which clients tolerate (they take the first answer).
"""

from __future__ import annotations

import logging
import threading
from types import TracebackType
from typing import Any

logger = logging.getLogger("crawlfleet.redis_monitor")


class HeldEntry:
    """``with HeldEntry(renew, stream, group, consumer, entry_id, ttl):`` keeps the entry this consumer's."""

    def __init__(self, renew: Any, stream: str, group: str, consumer: str, entry_id: str, ttl: float) -> None:
        self.renew = renew  # the registered lua/request_renew.lua
        self.stream = stream
        self.args = [group, consumer, entry_id]
        self.ttl = float(ttl)
        self.lost = False
        self._done = threading.Event()
        self._renewer: threading.Thread | None = None

    def __enter__(self) -> HeldEntry:
        """Renew once now (an entry read with others may have waited its turn past the TTL and been taken over:
        then ``lost`` is set and the caller leaves it to its new owner), then in the background."""
        if not int(self.renew(keys=[self.stream], args=self.args)):
            self.lost = True
            return self
        self._renewer = threading.Thread(target=self._run, name=f"renew {self.stream} {self.args[2]}", daemon=True)
        self._renewer.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._done.set()
        if self._renewer is not None:
            self._renewer.join()

    def _run(self) -> None:
        while not self._done.wait(self.ttl / 3):
            try:
                if not int(self.renew(keys=[self.stream], args=self.args)):
                    self.lost = True
                    logger.warning("redis-monitor: request %s of %s was taken over by another monitor while its "
                                   "plugin ran (it may be answered twice)", self.args[2], self.stream)
                    return
            except Exception as exc:  # Redis away for a moment: the next renewal tries again within the TTL
                logger.warning("redis-monitor: keeping request %s failed: %s: %s", self.args[2], type(exc).__name__,
                               exc)
