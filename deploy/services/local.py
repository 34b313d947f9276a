"""The local cluster of real services: up, down, status; the state file records what runs where.

``up`` spawns every service first and then awaits each one's readiness, so that the slow starters (the JVM of
ZooKeeper, SecantusDB's Python) start side by side. ``down`` stops each by PID and waits for its ports to be free.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy.services.base import LocalService, ServiceError, ServiceRecord
from deploy.services.kafka import KafkaService
from deploy.services.mongo import MongoService
from deploy.services.redis import RedisClusterService, RedisService
from deploy.services.zookeeper import ZooKeeperService
from deploy.state import modify_state
from messaging.settings import read_state

SERVICE_NAMES = ("redis", "zookeeper", "kafka", "mongo")
CONNECTION_FIELDS = ("redis_url", "redis_cluster", "kafka_bootstrap", "zk_hosts", "mongo_uri")


@dataclass(frozen=True)
class Options:
    redis_cluster: bool = False
    redis_aof: bool = False
    mongo_storage: str | None = None  # None: on disk under the run dir; ":memory:" in memory (a test's)
    mongo_cache: str | None = None  # None: CRAWLFLEET_LOCAL_MONGO_CACHE, else sized from the machine
    only: tuple[str, ...] = SERVICE_NAMES
    timeout: float = 60.0


def _service(name: str, options: Options | None = None, record: dict[str, Any] | None = None,
             same_port: bool = False) -> LocalService:
    """The service to start (from ``options``) or of a recorded one (``record``; ``same_port``: to restart it where
    its clients look for it, with the same data)."""
    options = options or Options()
    port = record["ports"][0] if record is not None and same_port else None
    if name == "redis":
        cluster = record.get("cluster", False) if record is not None else options.redis_cluster
        if cluster:
            return RedisClusterService()
        aof = bool(record.get("aof")) if record is not None else options.redis_aof
        return RedisService(aof=aof, port=port)
    if name == "zookeeper":
        return ZooKeeperService(port=port)
    if name == "kafka":
        return KafkaService(port=port)
    if name == "mongo":
        if record is not None:  # its data and its cache as it ran
            return MongoService(record.get("storage_path"), port=port, cache=record.get("cache_size"))
        return MongoService(options.mongo_storage, cache=options.mongo_cache)
    raise ValueError(f"unknown service {name!r} (known: {', '.join(SERVICE_NAMES)})")


def up(run_dir: str | os.PathLike[str], options: Options | None = None) -> dict[str, Any]:
    """Start the services that are not running yet; returns the state. On failure, stops what it started."""
    options = options or Options()
    run_dir = Path(run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    current = status(run_dir)
    started: list[tuple[LocalService, ServiceRecord]] = []
    try:
        for name in options.only:
            if current.get(name, {}).get("healthy"):
                continue
            if name in read_state(run_dir).get("services", {}):
                down(run_dir, (name,))  # a stale record: a crashed service, or a half-started one
            service = _service(name, options)
            started.append((service, service.start(run_dir)))
        for service, record in started:
            service.wait_ready(record, options.timeout)
    except BaseException:
        for service, record in started:
            service.stop(record)
        raise

    def record_started(state: dict[str, Any]) -> None:
        services = state.setdefault("services", {})
        for service, record in started:
            services[service.name] = record.to_dict()
            state.update(service.connection(record))
        state["run_dir"] = str(run_dir)

    return modify_state(run_dir, record_started)


def down(run_dir: str | os.PathLike[str], only: tuple[str, ...] = SERVICE_NAMES) -> list[str]:
    """Stop the recorded services by PID; returns the names stopped."""
    run_dir = Path(run_dir).resolve()
    records = read_state(run_dir).get("services", {})
    stopped, errors = [], []
    for name in only:
        if name not in records:
            continue
        try:
            _service(name, record=records[name]).stop(ServiceRecord.from_dict(name, records[name]))
            stopped.append(name)
        except ServiceError as exc:
            errors.append(str(exc))

    def forget(state: dict[str, Any]) -> None:
        services = state.get("services", {})
        for name in stopped:
            services.pop(name, None)
        if not services:
            for key in CONNECTION_FIELDS:
                state.pop(key, None)

    modify_state(run_dir, forget)
    if errors:
        raise ServiceError("; ".join(errors))
    return stopped


def recorded(name: str, data: dict[str, Any]) -> LocalService:
    """The service of a state-file record (for its health check or a restart)."""
    return _service(name, record=data)


def restart(run_dir: str | os.PathLike[str], name: str, timeout: float = 60.0) -> ServiceRecord:
    """Stop a recorded service and start it again on its port with its data (a single server, not a Redis Cluster),
    so that every client finds it where it was; the state file records the new pids."""
    run_dir = Path(run_dir).resolve()
    data = read_state(run_dir).get("services", {}).get(name)
    if data is None:
        raise ServiceError(f"{name} is not recorded in {run_dir}")
    if data.get("cluster"):
        raise ServiceError(f"{name}: a Redis Cluster is not restarted in place")
    service = _service(name, record=data, same_port=True)
    service.stop(ServiceRecord.from_dict(name, data))
    started = service.start(run_dir)
    service.wait_ready(started, timeout)
    modify_state(run_dir, lambda state: state["services"][name].update(pids=started.pids))
    return started


def status(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Each recorded service's health, pids, ports and connection string, plus the connection settings."""
    state = read_state(Path(run_dir).resolve())
    result: dict[str, Any] = {}
    for name, data in state.get("services", {}).items():
        record = ServiceRecord.from_dict(name, data)
        service = _service(name, record=data)
        healthy, detail = service.ping(record)
        result[name] = {"healthy": healthy, "detail": detail, "pids": record.pids, "ports": record.ports,
                        **service.connection(record)}
    for key in CONNECTION_FIELDS:
        if key in state:
            result[key] = state[key]
    return result
