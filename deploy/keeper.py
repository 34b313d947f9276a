"""The watcher watched: the fleet's masters keep its supervisor running (issue 37, item 5).

The supervisor (:mod:`deploy.supervisor`) restarts what dies in a local fleet; before this, nothing restarted the
supervisor itself: after its kill -9 a retired worker was never replaced and no status or log line said so. Now:

- the supervisor **beats**: a thread of its own writes ``<run dir>/supervisor.beat`` (its pid and the time) every
  second, however long a restart it is making takes (:func:`beat_forever`);
- every master of the fleet (``crawlfleet master --keep-supervisor``, which ``crawlfleet up`` starts) runs a
  :class:`Keeper` thread: once a second it reads the fleet's record and the beat; a supervisor whose process is gone
  is started again, and one whose process lives but whose beat is older than CRAWLFLEET_SUPERVISOR_HEARTBEAT_TTL (it
  hangs, or was SIGSTOPped) is killed and started again — under the fleet's lock, after reading the record again,
  so that two masters (or ``crawlfleet up`` and ``down``) never start two supervisors or revive a fleet being
  stopped. The supervisor in turn restarts a master that died: each watches the other, and either alone comes back;
- :func:`supervisor_status` says what ``crawlfleet fleet status`` shows: ``ok`` (with the beat's age), ``missing``,
  ``hung`` or ``none`` (a fleet without one: the demo).

In docker-compose there is no supervisor: Docker restarts a container whose process exits (``restart:
unless-stopped``) and the health checks make a stuck store exit; a master started without ``--keep-supervisor``
keeps nothing.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deploy import fleet as local_fleet
from deploy.procs import kill_hard, pid_alive
from deploy.state import locked
from messaging.outage import OutageLog
from messaging.settings import read_state

logger = logging.getLogger(__name__)
BEAT_FILE = "supervisor.beat"
BEAT_SECONDS = 1.0
KEEP_SECONDS = 1.0
SUPERVISOR = "supervisor"


def beat_path(run_dir: Path) -> Path:
    return run_dir / BEAT_FILE


def beat(run_dir: Path, pid: int | None = None, now: float | None = None) -> None:
    """Write the supervisor's beat (atomically: a reader never sees half a file)."""
    path = beat_path(run_dir)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"pid": pid or os.getpid(), "at": time.time() if now is None else now}))
    os.replace(tmp, path)


def beat_forever(run_dir: Path, stop: threading.Event) -> threading.Thread:
    """The supervisor's beat thread: a beat now, then every BEAT_SECONDS until ``stop``."""
    beat(run_dir)

    def run() -> None:
        while not stop.wait(BEAT_SECONDS):
            try:
                beat(run_dir)
            except OSError as exc:  # a full disk: the keepers will restart a supervisor that cannot beat
                logger.warning("supervisor: cannot write its heartbeat: %s", exc)

    thread = threading.Thread(target=run, name="supervisor-beat", daemon=True)
    thread.start()
    return thread


def supervisor_status(run_dir: Path, ttl: float, now: float | None = None) -> dict[str, Any]:
    """The fleet's supervisor: ``state`` ``ok`` | ``missing`` (its process is gone) | ``hung`` (alive, no beat for
    ``ttl`` seconds) | ``none`` (the fleet has none), with its ``pid`` and the beat's age (``heartbeat_age``)."""
    record = read_state(run_dir).get("fleet") or {}
    process = next((p for p in record.get("processes", []) if p.get("role") == SUPERVISOR), None)
    if process is None:
        return {"state": "none", "pid": None, "heartbeat_age": None}
    pid = int(process.get("pid") or 0)
    age = _beat_age(run_dir, pid, time.time() if now is None else now)
    if not pid or not pid_alive(pid):
        state = "missing"
    elif age is not None and age > ttl:
        state = "hung"
    else:
        state = "ok"  # a beat of another pid (or none yet): a supervisor that is starting
    return {"state": state, "pid": pid, "heartbeat_age": age}


def _beat_age(run_dir: Path, pid: int, now: float) -> float | None:
    """Seconds since ``pid``'s last beat; None when the beat is another process's (or missing)."""
    try:
        data = json.loads(beat_path(run_dir).read_text())
    except (OSError, ValueError):
        return None
    if int(data.get("pid", 0)) != pid:
        return None
    return max(0.0, now - float(data.get("at", 0.0)))


class Keeper:
    """One master's watch over the fleet's supervisor (see the module docstring)."""

    def __init__(self, run_dir: Path, ttl: float, timeout: float = 90.0,
                 replace: Callable[[Path, str, bool, float], str] | None = None) -> None:
        self.run_dir = run_dir
        self.ttl = ttl
        self.timeout = timeout
        self._replace = replace or _replace_process
        self.outage = OutageLog(logger, "keeping the fleet's supervisor running")
        self.restarts = 0
        self._started_seen: dict[int, float] = {}  # pid -> when this keeper first saw it without a beat of its own

    def check(self) -> str | None:
        """One look; returns what it did (``restarted``, ``replaced``) or None."""
        status = self._judge()
        if status is None:
            return None
        with locked(self.run_dir, "fleet"):
            again = self._judge()  # under the lock: another master or `up`/`down` may have acted meanwhile
            if again is None or again["pid"] != status["pid"]:
                return None
            hung = again["state"] == "hung"
            if hung:
                logger.warning("supervisor (pid %s) hangs: no heartbeat for %.0fs; killing it and starting another",
                               again["pid"], again["heartbeat_age"] or self.ttl)
                kill_hard(int(again["pid"]))
            else:
                logger.warning("supervisor (pid %s) is not running: starting it again", again["pid"])
            name = self._replace(self.run_dir, SUPERVISOR, hung, self.timeout)
        self.restarts += 1
        logger.info("supervisor started again (%s)", name)
        return "replaced" if hung else "restarted"

    def _judge(self) -> dict[str, Any] | None:
        """The supervisor's status when it needs a restart (missing, hung, or never beating), else None."""
        status = supervisor_status(self.run_dir, self.ttl)
        if status["state"] in ("missing", "hung"):
            return status
        if status["state"] == "ok" and status["heartbeat_age"] is None and status["pid"]:
            # alive but not beating under its own pid: starting, or stuck before its first beat
            first = self._started_seen.setdefault(int(status["pid"]), time.monotonic())
            if time.monotonic() - first > max(self.ttl, self.timeout):
                return {**status, "state": "hung"}
        return None

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(KEEP_SECONDS):
            try:
                self.check()
            except Exception as exc:  # the state file half-written, a start that failed: the next look tries again
                self.outage.failed(exc)
            else:
                self.outage.ok()


def _replace_process(run_dir: Path, name: str, kill: bool, timeout: float) -> str:
    return local_fleet.replace_process(run_dir, name, kill=kill, timeout=timeout)


def keep(run_dir: Path, ttl: float, stop: threading.Event) -> threading.Thread:
    """Start a master's keeper thread (``crawlfleet master --keep-supervisor``)."""
    thread = threading.Thread(target=Keeper(run_dir, ttl).run, args=(stop,), name="supervisor-keeper", daemon=True)
    thread.start()
    return thread
