"""Liveness and readiness of a long-running process: ``/livez`` and ``/readyz``, beside ``/metrics`` on its port.

A platform restarts a process whose liveness fails and sends no work to one that is not ready, so the two mean
different things here:

- **live**: the loops that do the process's work still turn — the master's and the monitors' main loops, the
  worker's reactor, its feed thread and its heartbeat thread, every process's alive-key heartbeat. A loop
  :meth:`Beat.tick`\\ s at each turn, *whether or not the turn succeeded*: a loop that retries a Redis that is away
  still turns, so a store outage never fails liveness (no restart storm while Redis fails over), while a loop that
  is wedged (a deadlock, a call that never returns) stops ticking and fails it after CRAWLFLEET_LIVENESS_SECONDS.
  A loop that has nothing to do for a while (a master standing by is not dispatching) :meth:`Beat.rest`\\ s.
- **ready**: the process can do its work now — its stores answer (:func:`redis_answers`: a PING with a one-second
  timeout on a connection of its own), a worker is registered and not retired, a master leads or stands by in the
  election. A failing readiness check never restarts anything; the check passes again when the store is back.

Components register checks on a :class:`Health` (the process-wide :data:`HEALTH` by default, as prometheus-client's
``REGISTRY``): a check is a callable that returns ``None`` when all is well and a short reason otherwise (an
exception counts as its message). :func:`messaging.metrics.serve_metrics` serves ``/livez`` and ``/readyz`` with
``200`` or ``503`` and a JSON body that names every check and the reason of each failing one; ``/readyz`` includes
the liveness checks (a process that is not live is not ready either). Readiness answers are kept for
:data:`READY_CACHE_SECONDS` so that probes from several sources cost one round of checks.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from messaging.settings import Settings

logger = logging.getLogger(__name__)

Check = Callable[[], "str | None"]
"""A health check: ``None`` when all is well, else the reason (one line)."""

STORE_TIMEOUT = 1.0  # seconds a readiness check waits for a store (Kubernetes' probe timeout is 1 s by default)
READY_CACHE_SECONDS = 0.5
OK = "ok"


class Beat:
    """A loop's pulse: :meth:`tick` at every turn, :meth:`rest` while the loop legitimately has nothing to run."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, resting: bool = True) -> None:
        """A new beat rests (is not checked) until its loop's first :meth:`tick`."""
        self.clock = clock
        self.at = clock()
        self.resting = resting

    def tick(self) -> None:
        self.at = self.clock()
        self.resting = False

    def rest(self) -> None:
        self.resting = True

    def age(self) -> float:
        return max(0.0, self.clock() - self.at)


@dataclass(frozen=True)
class Report:
    """The outcome of one round of checks: every check's name -> ``"ok"`` or its reason."""

    checks: dict[str, str]

    @property
    def ok(self) -> bool:
        return all(result == OK for result in self.checks.values())

    @property
    def status(self) -> int:
        return 200 if self.ok else 503

    def body(self) -> bytes:
        failing = {name: why for name, why in self.checks.items() if why != OK}
        document = {"status": "ok" if self.ok else "failing", "checks": self.checks, "failing": sorted(failing)}
        return json.dumps(document, sort_keys=True).encode() + b"\n"


class Health:
    """The liveness and readiness checks of one process (thread-safe: checks are added from any thread)."""

    def __init__(self, live_within: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.live_within = live_within
        self.clock = clock
        self._live: dict[str, Check] = {}
        self._ready: dict[str, Check] = {}
        self._lock = threading.Lock()
        self._cached: tuple[float, Report] | None = None

    def configure(self, settings: Settings) -> Health:
        """Take the liveness bound from the settings (CRAWLFLEET_LIVENESS_SECONDS)."""
        self.live_within = float(settings.liveness_seconds)
        return self

    # --- registering ----------------------------------------------------------------------------------------------
    def live(self, name: str, check: Check) -> None:
        with self._lock:
            self._live[name] = check
            self._cached = None

    def ready(self, name: str, check: Check) -> None:
        with self._lock:
            self._ready[name] = check
            self._cached = None

    def beat(self, name: str, beat: Beat | None = None) -> Beat:
        """A liveness check on ``beat`` (default: a new one, resting until its first tick): its loop must tick
        within the liveness bound while it does not rest."""
        watched = beat if beat is not None else Beat(self.clock)
        self.live(name, lambda: self._recent(watched))
        return watched

    def age(self, name: str, age: Callable[[], float | None]) -> None:
        """A liveness check on a loop that keeps its own time: ``age()`` is the seconds since its last turn (None:
        not running yet, or resting)."""
        def check() -> str | None:
            seconds = age()
            if seconds is None or seconds <= self.live_within:
                return None
            return f"no turn for {seconds:.1f}s (bound {self.live_within:g}s)"

        self.live(name, check)

    def remove(self, *names: str) -> None:
        with self._lock:
            for name in names:
                self._live.pop(name, None)
                self._ready.pop(name, None)
            self._cached = None

    def clear(self) -> None:
        with self._lock:
            self._live.clear()
            self._ready.clear()
            self._cached = None

    def _recent(self, beat: Beat) -> str | None:
        if beat.resting:
            return None
        age = beat.age()
        return None if age <= self.live_within else f"no turn for {age:.1f}s (bound {self.live_within:g}s)"

    # --- answering ------------------------------------------------------------------------------------------------
    def liveness(self) -> Report:
        with self._lock:
            checks = dict(self._live)
        return Report(_run(checks))

    def readiness(self) -> Report:
        now = self.clock()
        with self._lock:
            if self._cached is not None and now - self._cached[0] < READY_CACHE_SECONDS:
                return self._cached[1]
            checks = {**self._live, **self._ready}
        report = Report(_run(checks))
        with self._lock:
            self._cached = (now, report)
        return report


def _run(checks: dict[str, Check]) -> dict[str, str]:
    results: dict[str, str] = {}
    for name, check in sorted(checks.items()):
        try:
            reason = check()
        except Exception as exc:  # a check that raises has failed, with its reason
            reason = f"{type(exc).__name__}: {exc}"
        results[name] = OK if reason is None else str(reason)
    return results


HEALTH = Health()
"""The process-wide checks, served by :func:`messaging.metrics.serve_metrics` (one process, one endpoint)."""


def redis_answers(settings: Settings) -> Check:
    """A readiness check: the process's Redis answers a PING within :data:`STORE_TIMEOUT` (a client of its own, so
    a probe never waits behind the process's own calls, nor they behind it)."""
    from messaging.clients import redis_client

    client: Any = None

    def check() -> str | None:
        nonlocal client
        if client is None:
            client = redis_client(settings, socket_timeout=STORE_TIMEOUT, socket_connect_timeout=STORE_TIMEOUT,
                                  health_check_interval=0)
        client.ping()
        return None

    return check


def outage_clear(outage: Any) -> Check:
    """A readiness check on a loop's :class:`messaging.outage.OutageLog`: failing while the loop sees its stores
    fail (e.g. the Kafka monitor's batches, whose Kafka errors show nowhere else)."""
    def check() -> str | None:
        return f"{outage.what}: failing" if outage.down else None

    return check
