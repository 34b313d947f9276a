"""A worker's heartbeat on a thread and a Redis connection of its own, so that nothing else it does can delay it.

The feed thread (:mod:`spiders.worker.feed`) walks the domain queues, takes and commits; at thousands of domains one
of its passes can take seconds, and a heartbeat sent from that loop aged towards the master's cut-off
(CRAWLFLEET_HEARTBEAT_TTL) although the worker was alive — the master once retired a live worker and its tasks were
fetched twice. This thread only beats: every CRAWLFLEET_HEARTBEAT_INTERVAL seconds one Lua call
(:meth:`frontier.registry.WorkerRegistry.heartbeat`) carrying the worker's progress, the seconds since the feed's
last pass (``lag``), so the registry can tell a slow worker (fresh heartbeat, large lag: shown, never retired) from
a gone one (no heartbeat).

Each beat also reports the worker's item store while it refuses writes (``store_state()``: a
:class:`messaging.storage.StoreState`, or ``None``), and once more when it takes them again, so the cluster can say
why the crawls whose items wait here make no progress.

A retired job id (:class:`~frontier.registry.Fenced`) stops the thread and calls ``on_fenced``; a failing Redis is
logged once and retried at the next beat.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable

from frontier.registry import Fenced, WorkerRegistry
from messaging.storage import StoreState
from messaging.threadnames import name_os_thread

logger = logging.getLogger(__name__)


class Heartbeat:
    """Beats for ``job`` every ``interval`` seconds; ``progress()`` returns (busy, lag in seconds)."""

    def __init__(self, registry: WorkerRegistry, job: str, interval: float,
                 progress: Callable[[], tuple[bool, float]], on_fenced: Callable[[], None] = lambda: None,
                 clock: Callable[[], float] = time.monotonic,
                 store_state: Callable[[], StoreState | None] = lambda: None,
                 wall_clock: Callable[[], float] = time.time, on_back: Callable[[], None] = lambda: None) -> None:
        self.registry = registry  # give it a Redis client of its own: a connection no other thread holds up
        self.job = job
        self.interval = interval
        self.progress = progress
        self.on_fenced = on_fenced
        self.clock = clock
        self.store_state = store_state
        self.wall_clock = wall_clock  # epoch seconds: when a store report was written, as people read it
        self.on_back = on_back  # heartbeats reach Redis again after failing (it may have restarted meanwhile)
        self._store_reported = False  # the registry holds a report of this job's store refusing writes
        self.beats = 0
        self.fenced = False
        self.turned_at: float | None = None  # last beat or attempt (spiders.health: liveness)
        self.registered_at: float | None = None  # last beat that found the job registered (readiness)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing_since: float | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self.job}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def beat(self) -> bool:
        """One heartbeat now; False when the job is not registered. Raises ``Fenced``."""
        busy, lag = self.progress()
        registered = self.registry.heartbeat(self.job, busy=busy, lag=lag)
        self.beats += 1
        if registered:
            self.registered_at = self.clock()
        self._report_store()
        return registered

    def _report_store(self) -> None:
        state = self.store_state()
        if state is None and not self._store_reported:
            return
        self.registry.report_store(self.job, dataclasses.replace(state, at=self.wall_clock()) if state else None)
        self._store_reported = state is not None

    def _run(self) -> None:
        name_os_thread()  # "heartbeat-<job>" in /proc (top -H, bench.crawl --profile)
        while not self._stop.is_set():
            started = self.turned_at = self.clock()
            try:
                if not self.beat():
                    logger.warning("job %s is not in the registry (expired?): the master will retire it", self.job)
                if self._failing_since is not None:
                    logger.warning("heartbeats of %s reach Redis again after %.1fs", self.job,
                                   started - self._failing_since)
                    self._failing_since = None
                    self.on_back()
            except Fenced:
                logger.error("job %s was retired by the master: heartbeats stop", self.job)
                self.fenced = True
                self.on_fenced()
                return
            except Exception as exc:  # Redis away: say so once, beat again at the next interval
                if self._failing_since is None:
                    self._failing_since = started
                    logger.warning("heartbeat of %s failed (%s); retrying", self.job, exc)
            self._stop.wait(max(0.0, self.interval - (self.clock() - started)))
