"""The manager's configuration, resolved once from :func:`messaging.settings.load` (the ``manager`` group).

Security is decided here, before anything listens: a bind address other than loopback without
CRAWLFLEET_MANAGER_AUTH raises :class:`InsecureBind`, so a manager that would let anyone on the network start
processes never starts (seed 5.3; scrapyd leaves that to its operator).
"""

from __future__ import annotations

import ipaddress
import multiprocessing
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from messaging.identity import node_name
from messaging.settings import Settings, default, load

PROJECT = "crawlfleet"  # the installed project (the rule spiders); others are deployed as eggs (manager.projects)
MAX_PROC_PER_CPU = 4  # scrapyd's default when max_proc is 0


class InsecureBind(ValueError):
    """The manager would listen beyond loopback without authentication."""


def is_loopback(address: str) -> bool:
    if address.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def parse_auth(value: str) -> tuple[str, str] | None:
    """``user:password`` -> (user, password); empty -> None. A user name cannot hold a colon (RFC 7617)."""
    if not value:
        return None
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise ValueError("CRAWLFLEET_MANAGER_AUTH must be user:password, both non-empty")
    return user, password


@dataclass(frozen=True)
class ManagerConfig:
    bind: str
    port: int
    auth: tuple[str, str] | None
    url: str
    node_name: str
    max_proc: int
    finished_to_keep: int
    logs_dir: Path
    dbs_dir: Path
    poll_interval: float
    kill_timeout: float
    project_dir: Path
    work_dir: Path  # deployed projects' jobs run in <work_dir>/<project>
    builtin_project: bool
    settings: Settings
    heartbeat_interval: float = default("CRAWLFLEET_MANAGER_HEARTBEAT_INTERVAL")

    @property
    def registry_ttl(self) -> float:
        return self.heartbeat_interval * 4

    @classmethod
    def from_settings(cls, settings: Settings | None = None, bind: str | None = None,
                      port: int | None = None) -> ManagerConfig:
        s = settings if settings is not None else load()
        bind = bind if bind is not None else s.manager_bind
        port = int(port if port is not None else s.manager_port)
        auth = parse_auth(s.manager_auth)
        if not is_loopback(bind) and auth is None:
            raise InsecureBind(f"binding {bind} (not loopback) requires HTTP basic authentication: set "
                               f"CRAWLFLEET_MANAGER_AUTH=user:password")
        run_dir = Path(s.run_dir) / "manager"
        max_proc = int(s.manager_max_proc) or (multiprocessing.cpu_count() or 1) * MAX_PROC_PER_CPU
        host = bind if bind not in ("0.0.0.0", "::", "") else socket.getfqdn()
        url = s.manager_url or f"http://{_bracket(host)}:{port}"
        return cls(
            bind=bind, port=port, auth=auth, url=url.rstrip("/"), node_name=node_name(s), max_proc=max_proc,
            finished_to_keep=int(s.manager_finished_to_keep),
            logs_dir=Path(s.manager_logs or run_dir / "logs").resolve(),
            dbs_dir=Path(s.manager_dbs or run_dir / "dbs").resolve(),
            poll_interval=float(s.manager_poll_interval), kill_timeout=float(s.manager_kill_timeout),
            project_dir=Path(s.manager_project_dir or os.getcwd()).resolve(), work_dir=(run_dir / "projects").resolve(),
            builtin_project=bool(s.manager_builtin_project), settings=s,
            heartbeat_interval=float(s.manager_heartbeat_interval),
        )  # fmt: skip


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host
