"""The local fleet's supervisor: what stays unhealthy past a bound is restarted, with back-off, and the log says why.

``crawlfleet up`` starts it as one of the fleet's recorded processes (``crawlfleet supervise``); ``down`` stops it
first, so that it never restarts what is being stopped. Every CRAWLFLEET_SUPERVISE_INTERVAL seconds it checks:

- **services** (``deploy.services``), each through the path that matters and at the address the fleet's clients
  use (Redis: a write; MongoDB: a write to a health collection; Kafka: a produce; ZooKeeper: it serves). One that
  stays unhealthy for CRAWLFLEET_SUPERVISE_BOUND seconds is restarted in place (same port, same data), so that every
  client reconnects by itself: a MongoDB whose storage failed (a full disk: ping answers, every write fails) is not
  healed by freeing space, only by a restart, which no person has to do any more;
- **processes** of the fleet: one that died is started again; a worker whose job id the master retired (fenced: its
  heartbeat stopped — a hung or SIGSTOPped process) is killed and replaced by a new job id, so the fleet keeps its
  configured number of workers.

A restart of the same thing within a short time waits longer each time (CRAWLFLEET_SUPERVISE_BACKOFF doubling up to
CRAWLFLEET_SUPERVISE_BACKOFF_MAX): a service that cannot start is not hammered. The supervisor is watched in turn: it
writes a heartbeat every second from a thread of its own, and every master of the fleet starts it again when its
process is gone or its heartbeat is older than CRAWLFLEET_SUPERVISOR_HEARTBEAT_TTL (``deploy.keeper``). The decisions
are made by :meth:`Supervisor.check` on an injectable clock; the actions go through :class:`FleetActions`. After each
check it also rewrites the Prometheus ``file_sd`` file of the cluster's /metrics endpoints (:mod:`messaging.discovery`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from deploy import fleet as local_fleet
from deploy import services as local_services
from deploy.keeper import beat_forever
from deploy.services.base import ServiceRecord
from deploy.state import locked
from messaging import clients, discovery, keys
from messaging.outage import OutageLog
from messaging.settings import Settings, load, read_state

logger = logging.getLogger(__name__)
READY_LINE = "supervisor: watching"


@dataclass
class Watch:
    """One supervised thing: since when it is unhealthy, and its restarts' back-off."""

    since: float | None = None
    restarts: int = 0
    not_before: float = 0.0
    last_restart: float = field(default=-1e18)


class Actions(Protocol):
    def services(self) -> dict[str, tuple[bool, str]]: ...

    def restart_service(self, name: str) -> None: ...

    def processes(self) -> list[dict[str, Any]]: ...

    def retired(self, jobs: list[str]) -> set[str]: ...

    def replace(self, name: str, kill: bool) -> str: ...


class Supervisor:
    def __init__(self, actions: Actions, bound: float, backoff: float, backoff_max: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.actions = actions
        self.bound = bound
        self.backoff = backoff
        self.backoff_max = backoff_max
        self.clock = clock
        self.watches: dict[str, Watch] = {}
        self.outage = OutageLog(logger, "supervisor: checking the fleet")

    def check(self) -> list[str]:
        """One pass; returns what it restarted or replaced (``service:<name>``, ``process:<name>``)."""
        done = []
        now = self.clock()
        for name, (healthy, detail) in self.actions.services().items():
            if self._due(f"service:{name}", healthy, now, detail):
                since = self.watches[f"service:{name}"].since
                since = now if since is None else since
                logger.warning("supervisor: restarting %s: unhealthy for %.0fs (%s)", name, now - since, detail)
                self._restart(f"service:{name}", now, partial(self.actions.restart_service, name))
                done.append(f"service:{name}")
        processes = self.actions.processes()
        jobs = [p["job"] for p in processes if p.get("role") == "worker" and p.get("job") and p.get("alive")]
        retired = self.actions.retired(jobs) if jobs else set()
        for process in processes:
            fenced = process.get("job") in retired
            healthy = process.get("alive", False) and not fenced
            why = "retired by the master (no heartbeat: hung or stopped)" if fenced else "not running"
            # a dead process is restarted at once (bound 0); a fenced worker is already known dead to the cluster
            if self._due(f"process:{process['name']}", healthy, now, why, bound=0.0):
                logger.warning("supervisor: replacing %s: %s", process["name"], why)
                self._restart(f"process:{process['name']}", now,
                              partial(self.actions.replace, process["name"], kill=fenced))
                done.append(f"process:{process['name']}")
        return done

    def _due(self, key: str, healthy: bool, now: float, detail: str, bound: float | None = None) -> bool:
        watch = self.watches.setdefault(key, Watch())
        if healthy:
            if watch.since is not None:
                logger.info("supervisor: %s is healthy again after %.0fs", key, now - watch.since)
            watch.since = None
            if now - watch.last_restart > self.backoff_max * 2:
                watch.restarts = 0  # healthy for long: the next trouble starts the back-off afresh
            return False
        if watch.since is None:
            watch.since = now
            logger.warning("supervisor: %s is unhealthy: %s", key, detail)
        limit = self.bound if bound is None else bound
        return now - watch.since >= limit and now >= watch.not_before

    def _restart(self, key: str, now: float, action: Callable[[], Any]) -> None:
        watch = self.watches[key]
        watch.restarts += 1
        watch.last_restart = now
        watch.not_before = now + min(self.backoff_max, self.backoff * 2 ** (watch.restarts - 1))
        try:
            action()
        except Exception as exc:  # the next pass tries again after the back-off
            logger.error("supervisor: restarting %s failed: %s: %s (next try in %.0fs)", key, type(exc).__name__,
                         exc, watch.not_before - now)
            return
        watch.since = None


class FleetActions:
    """What the supervisor does to the fleet of a run directory (its services and recorded processes)."""

    def __init__(self, run_dir: Path, timeout: float = 90.0) -> None:
        self.run_dir = run_dir
        self.timeout = timeout
        self._redis: Any = None

    def services(self) -> dict[str, tuple[bool, str]]:
        state = read_state(self.run_dir)
        result = {}
        for name, data in state.get("services", {}).items():
            record = ServiceRecord.from_dict(name, data)
            result[name] = local_services.recorded(name, data).ping(_as_clients_see(record, state))
        return result

    def restart_service(self, name: str) -> None:
        with locked(self.run_dir, "fleet"):
            local_services.restart(self.run_dir, name, self.timeout)

    def processes(self) -> list[dict[str, Any]]:
        return list(local_fleet.status(self.run_dir)["processes"])

    def retired(self, jobs: list[str]) -> set[str]:
        try:
            if self._redis is None:
                self._redis = clients.redis_client(load(local_fleet.child_env(self.run_dir)), socket_timeout=5)
            pipe = self._redis.pipeline(transaction=False)
            for job in jobs:
                pipe.zscore(keys.RETIRED_WORKERS, job)
            return {job for job, score in zip(jobs, pipe.execute(), strict=True) if score is not None}
        except Exception:  # Redis away: its own check says so; a worker is not replaced on a guess
            self._redis = None
            return set()

    def replace(self, name: str, kill: bool) -> str:
        with locked(self.run_dir, "fleet"):
            return local_fleet.replace_process(self.run_dir, name, kill=kill, timeout=self.timeout)

    def write_targets(self, settings: Settings) -> None:
        """Rewrite the Prometheus file_sd file (messaging.discovery) from the endpoints registered in Redis."""
        try:
            if self._redis is None:
                self._redis = clients.redis_client(load(local_fleet.child_env(self.run_dir)), socket_timeout=5)
            discovery.refresh(self._redis, settings)
        except Exception:
            self._redis = None
            raise


def _as_clients_see(record: ServiceRecord, state: dict[str, Any]) -> ServiceRecord:
    """The record with the port the fleet's clients use (the state's connection string), when it names one."""
    address = {"redis": state.get("redis_url"), "mongo": state.get("mongo_uri"),
               "kafka": f"//{state['kafka_bootstrap']}" if state.get("kafka_bootstrap") else None}.get(record.name)
    if not address or record.extra.get("cluster"):
        return record
    try:
        port = urlsplit(address).port
    except ValueError:
        return record
    if not port or port == record.port:
        return record
    return ServiceRecord(record.name, record.pids, [port, *record.ports[1:]], record.log, record.data_dir,
                         record.extra)


def run(settings: Settings) -> None:
    """``crawlfleet supervise``: check the fleet of the run directory until SIGTERM/SIGINT."""
    import signal

    run_dir = Path(settings.run_dir).resolve()
    actions = FleetActions(run_dir)
    supervisor = Supervisor(actions, settings.supervise_bound, settings.supervise_backoff,
                            settings.supervise_backoff_max)
    targets = OutageLog(logger, "supervisor: writing the Prometheus targets")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    beat_forever(run_dir, stop)  # the masters keep a supervisor that stops beating running (deploy.keeper)
    logger.info("%s %s every %.1fs (restart after %.0fs unhealthy)", READY_LINE, run_dir,
                settings.supervise_interval, settings.supervise_bound)
    while not stop.wait(settings.supervise_interval):
        try:
            supervisor.check()
        except Exception as exc:  # the state file being rewritten, a service half-started: next pass
            supervisor.outage.failed(exc)
        else:
            supervisor.outage.ok()
        try:
            actions.write_targets(settings)
        except Exception as exc:  # Redis away: the file keeps the last known endpoints
            targets.failed(exc)
        else:
            targets.ok()
    logger.info("supervisor: stopped")
