"""Prometheus ``/metrics`` for every long-running process, on a port that never collides.

Each module has its own port setting (``CRAWLFLEET_<MODULE>_METRICS_PORT``, e.g. CRAWLFLEET_CRAWLER_METRICS_PORT for
the Scrapy workers); -1 there takes CRAWLFLEET_METRICS_PORT. With a port P > 0 a process takes the first free port
from P upwards (so several processes on a host get P, P+1, …); with 0 it takes an ephemeral port. Either way the
endpoint is logged and registered in Redis (``metrics:<module>:<host>:<pid>``, refreshed with the module's
heartbeat, listed in ``endpoints:metrics``) so that a scraper can discover it: :mod:`messaging.discovery` writes
them all into a Prometheus ``file_sd`` file. Besides each module's own metrics, every endpoint carries the process
collector of prometheus-client (CPU seconds, resident memory, open files) and :data:`UP`.
"""

from __future__ import annotations

import errno
import os
import socket
from dataclasses import dataclass
from typing import Any

from prometheus_client import Gauge, start_http_server

from messaging import keys
from messaging.clients import RedisClient
from messaging.settings import Settings

PORT_SEARCH = 100
ANY_ADDRESS = ("0.0.0.0", "::", "")

UP = Gauge("crawlfleet_process_up", "1 while this crawlfleet process runs, by module.", ["module"])


@dataclass
class MetricsEndpoint:
    module: str
    host: str
    port: int
    server: Any

    @property
    def url(self) -> str:
        # bound to every address: announce a name others can reach (in a container: its service's host name)
        host = socket.gethostname() if self.host in ANY_ADDRESS else self.host
        return f"http://{host}:{self.port}/metrics"

    def key(self) -> str:
        return keys.metrics_endpoint(self.module, socket.gethostname(), os.getpid())

    def register(self, redis: RedisClient, ttl: int = 30) -> None:
        pipe = redis.pipeline(transaction=False)
        pipe.set(self.key(), self.url, ex=ttl)
        pipe.sadd(keys.METRICS_INDEX, self.key())  # discovery reads the index, never a scan (messaging.discovery)
        pipe.execute()

    def unregister(self, redis: RedisClient) -> None:
        pipe = redis.pipeline(transaction=False)
        pipe.delete(self.key())
        pipe.srem(keys.METRICS_INDEX, self.key())
        pipe.execute()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def metrics_port(settings: Settings, module: str) -> int:
    """The module's own port setting, or CRAWLFLEET_METRICS_PORT when that is -1 (or the module has none)."""
    name = f"CRAWLFLEET_{module.upper().replace('-', '_')}_METRICS_PORT"
    own = settings.get(name, -1)
    return settings.metrics_port if own < 0 else own


def serve_metrics(settings: Settings, module: str) -> MetricsEndpoint:
    host = settings.metrics_host
    base = metrics_port(settings, module)
    candidates = [0] if base == 0 else range(base, base + PORT_SEARCH)
    last_error: OSError | None = None
    for port in candidates:
        try:
            server, _thread = start_http_server(port, addr=host)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            last_error = exc
            continue
        UP.labels(module).set(1)
        return MetricsEndpoint(module, host, server.server_address[1], server)
    raise OSError(f"no free metrics port in {base}..{base + PORT_SEARCH - 1}: {last_error}")
