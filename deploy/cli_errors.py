"""The command line's errors: a service that cannot be reached is one line naming the setting to check, not a hang.

The request commands first check that a Kafka bootstrap server accepts a TCP connection (a few seconds at most, see
:data:`REACH_TIMEOUT`) instead of letting the client retry its bootstrap for 30 s and end in a traceback.
:class:`FriendlyGroup` turns the connection errors of the client libraries that still escape a command into the same
one line (exit code 1).
"""

from __future__ import annotations

import socket
from typing import Any
from urllib.parse import urlsplit

import click

from messaging.settings import Settings

REACH_TIMEOUT = 3.0  # seconds for one TCP connect to a service
HINT = "is it running? `crawlfleet up` starts the services on this host"


class Unreachable(click.ClickException):
    """A service cannot be reached: its name, the address tried and the setting that holds it."""

    def __init__(self, service: str, address: str, setting: str, detail: str = "") -> None:
        why = f" ({detail})" if detail else ""
        super().__init__(f"cannot reach {service} at {address}{why}: check {setting}; {HINT}")


def _host_port(address: str, default_port: int) -> tuple[str, int]:
    parsed = urlsplit(f"//{address.strip()}")
    return parsed.hostname or "127.0.0.1", parsed.port or default_port


def reachable(address: str, default_port: int, timeout: float = REACH_TIMEOUT) -> str:
    """'' when ``host:port`` accepts a TCP connection within ``timeout``, else why not."""
    host, port = _host_port(address, default_port)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return ""
    except OSError as exc:
        return exc.strerror or str(exc) or type(exc).__name__


def require_kafka(settings: Settings) -> None:
    """Raise :class:`Unreachable` unless one of the bootstrap servers accepts a connection."""
    servers = [server for server in settings.kafka_bootstrap.split(",") if server.strip()]
    reasons = [reachable(server, 9092) for server in servers]
    if servers and all(reasons):
        raise Unreachable("Kafka", settings.kafka_bootstrap, "CRAWLFLEET_KAFKA_BOOTSTRAP", reasons[0])


def _setting_of(exc: BaseException) -> tuple[str, str] | None:
    """(service, setting) when ``exc`` is a connection failure of one of the client libraries."""
    module = type(exc).__module__
    name = type(exc).__name__
    if module.startswith("kafka") and name in ("NoBrokersAvailable", "KafkaTimeoutError", "KafkaConnectionError"):
        return "Kafka", "CRAWLFLEET_KAFKA_BOOTSTRAP"
    if module.startswith("redis") and name in ("ConnectionError", "TimeoutError"):
        return "Redis", "CRAWLFLEET_REDIS_URL"
    if module.startswith("kazoo") and "Timeout" in name:
        return "ZooKeeper", "CRAWLFLEET_ZK_HOSTS"
    if module.startswith("pymongo") and name in ("ServerSelectionTimeoutError", "AutoReconnect"):
        return "MongoDB", "CRAWLFLEET_MONGO_URI"
    return None


class FriendlyGroup(click.Group):
    """A click group whose commands end with one line when a service is unreachable, not with a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:
            found = _setting_of(exc)
            if found is None:
                raise
            service, setting = found
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise click.ClickException(f"cannot reach {service} ({first_line}): check {setting}; {HINT}") from None
