"""The interface of a local service, and what every one of them shares.

A local service is one real server (Redis, ZooKeeper, Kafka, MongoDB) started from the project's own files on
127.0.0.1, on a free port, under the run directory. ``start`` spawns it, ``ready`` tells whether it serves,
``ping`` whether it is healthy, ``connection`` the settings (state-file fields) that point clients at it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from deploy.procs import log_tail, pid_alive, port_free, stop_pid, wait_for


class ServiceError(RuntimeError):
    """A service could not be started or stopped; the message says which and why (with its log file)."""


@dataclass
class ServiceRecord:
    """What the state file keeps of a running service."""

    name: str
    pids: list[int]
    ports: list[int]
    log: str
    data_dir: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def port(self) -> int:
        return self.ports[0]

    def to_dict(self) -> dict[str, Any]:
        return {"pids": self.pids, "ports": self.ports, "log": self.log, "data_dir": self.data_dir, **self.extra}

    @classmethod
    def from_dict(cls, name: str, data: dict[str, Any]) -> ServiceRecord:
        known = {"pids", "ports", "log", "data_dir"}
        extra = {key: value for key, value in data.items() if key not in known}
        return cls(name, list(data["pids"]), list(data["ports"]), data["log"], data["data_dir"], extra)


class LocalService(ABC):
    name: str = ""
    host = "127.0.0.1"

    @abstractmethod
    def start(self, run_dir: Path) -> ServiceRecord:
        """Spawn the server(s); returns at once (readiness is awaited separately)."""

    @abstractmethod
    def ready(self, record: ServiceRecord) -> bool:
        """True when the service answers requests (not merely accepts connections)."""

    @abstractmethod
    def connection(self, record: ServiceRecord) -> dict[str, Any]:
        """State-file fields that configure clients (``redis_url``, ``kafka_bootstrap``, …)."""

    def healthy(self, record: ServiceRecord) -> bool:
        """True when the service does what the fleet needs from it — a write where it stores (Redis: a SET, MongoDB:
        a write to a health collection, Kafka: a produce), not merely an answer to a ping: a MongoDB whose disk is
        full still answers ping while every write fails. Raises with the reason when it does not."""
        return self.ready(record)

    def ping(self, record: ServiceRecord) -> tuple[bool, str]:
        """Health for ``status`` and the supervisor: (healthy, detail), through :meth:`healthy`."""
        dead = [pid for pid in record.pids if not pid_alive(pid)]
        if dead:
            return False, f"process {dead} not running"
        try:
            return (True, "ok") if self.healthy(record) else (False, "not answering")
        except Exception as exc:
            return False, f"{type(exc).__name__}: {_one_line(str(exc))}"

    def wait_ready(self, record: ServiceRecord, timeout: float) -> None:
        def exited() -> str | None:
            dead = [pid for pid in record.pids if not pid_alive(pid)]
            return f"process {dead} exited; see {record.log}" if dead else None

        try:
            wait_for(lambda: self.ready(record), timeout, f"{self.name} on port {record.ports}", 0.1, exited)
        except TimeoutError as exc:
            raise ServiceError(f"{self.name} did not start: {exc}; log: {log_tail(record.log)}") from exc

    def stop(self, record: ServiceRecord, timeout: float = 10.0) -> None:
        """TERM each process, wait, KILL; then wait until its ports are free (a restart must be able to bind)."""
        for pid in record.pids:
            stop_pid(pid, timeout)
        for port in record.ports:
            try:
                wait_for(partial(port_free, port, self.host), 15.0, f"port {port} to be free")
            except TimeoutError as exc:
                raise ServiceError(f"{self.name}: {exc}") from exc


def _one_line(text: str, limit: int = 300) -> str:
    return " ".join(text.split())[:limit]
