"""The command line's errors: a service that cannot be reached is one line naming the setting to check, not a hang.

The commands first check that the service they need accepts a TCP connection (a few seconds at most, see
:data:`REACH_TIMEOUT`): Kafka (:func:`require_kafka`), ZooKeeper (:func:`require_zookeeper`), MongoDB
(:func:`require_mongo`), instead of letting a client retry for half a minute and end in a traceback.
:class:`FriendlyGroup` turns the connection errors of the client libraries that still escape a command into the same
one line (exit code 1), and keeps the libraries' own logging (kazoo's ``Connection dropped`` at every retry,
kafka-python's and pymongo's warnings) off a command's output: one outage, one line. A long-running command
(a monitor, a worker, the manager) configures logging itself and still logs them, once per outage.

Exit codes: 0 done; 1 refused, failed or unreachable; 2 a usage error (click's); :data:`EXIT_UNCONFIRMED` (3) a
request was sent and no answer came in time: it may still take effect (the message says how to check).
"""

from __future__ import annotations

import logging
import re
import socket
from typing import Any
from urllib.parse import urlsplit

import click

from messaging.settings import Settings

REACH_TIMEOUT = 3.0  # seconds for one TCP connect to a service
HINT = "is it running? `crawlfleet up` starts the services on this host"
EXIT_UNCONFIRMED = 3
CLIENT_LIBRARIES = ("kazoo", "kafka", "pymongo", "redis", "urllib3")


class Unconfirmed(click.ClickException):
    """A request went out and no answer came in time: exit code :data:`EXIT_UNCONFIRMED`, not "failed"."""

    exit_code = EXIT_UNCONFIRMED

    def show(self, file: Any = None) -> None:
        click.echo(self.format_message(), err=True)  # not "Error: ": nothing failed


def quiet_client_libraries(names: tuple[str, ...] = CLIENT_LIBRARIES) -> None:
    """A null handler on each client library's logger: with no handler of its own, Python would print their
    warnings (a retry each) to stderr; a command that configures logging still gets them through the root."""
    for name in names:
        library = logging.getLogger(name)
        if not any(isinstance(handler, logging.NullHandler) for handler in library.handlers):
            library.addHandler(logging.NullHandler())


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


def require_zookeeper(settings: Settings) -> None:
    """Raise :class:`Unreachable` unless one of the ZooKeeper servers accepts a connection."""
    hosts = settings.zk_hosts.split("/", 1)[0]  # a chroot follows the host list
    servers = [server for server in hosts.split(",") if server.strip()]
    reasons = [reachable(server, 2181) for server in servers]
    if servers and all(reasons):
        raise Unreachable("ZooKeeper", settings.zk_hosts, "CRAWLFLEET_ZK_HOSTS", reasons[0])


def require_mongo(settings: Settings) -> None:
    """Raise :class:`Unreachable` unless the first MongoDB server of the URI accepts a connection."""
    parts = urlsplit(settings.mongo_uri)
    if parts.scheme == "mongodb+srv":
        return  # DNS decides the servers: the client's own error says
    servers = parts.netloc.rpartition("@")[2].split(",")
    reasons = [reachable(server, 27017) for server in servers if server]
    if reasons and all(reasons):
        shown = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"  # never the credentials
        raise Unreachable("MongoDB", shown, "CRAWLFLEET_MONGO_URI", reasons[0])


def one_line(exc: BaseException) -> str:
    """The first line of an error, without pymongo's topology description and timeouts."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    text = text.split(", Timeout:", 1)[0].split(", Topology Description:", 1)[0]
    return re.sub(r"\s*\(configured timeouts:[^)]*\)", "", text)


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
        quiet_client_libraries()
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:
            found = _setting_of(exc)
            if found is None:
                raise
            service, setting = found
            raise click.ClickException(f"cannot reach {service} ({one_line(exc)}): check {setting}; {HINT}") from None
