"""Prometheus ``/metrics`` for every long-running process, on a port that never collides.

With CRAWLFLEET_METRICS_PORT = P > 0, a process takes the first free port from P upwards (so several processes on a
host get P, P+1, …); with 0 it takes an ephemeral port. Either way the endpoint is registered in Redis
(``metrics:<module>:<host>:<pid>``, refreshed with the module's heartbeat) so that a scraper can discover it.
"""

from __future__ import annotations

import errno
import os
import socket
from dataclasses import dataclass
from typing import Any

from prometheus_client import start_http_server

from messaging import keys
from messaging.settings import Settings

PORT_SEARCH = 100


@dataclass
class MetricsEndpoint:
    module: str
    host: str
    port: int
    server: Any

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def register(self, redis: Any, ttl: int = 30) -> None:
        redis.set(keys.metrics_endpoint(self.module, socket.gethostname(), os.getpid()), self.url, ex=ttl)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve_metrics(settings: Settings, module: str) -> MetricsEndpoint:
    host = settings.metrics_host
    base = settings.metrics_port
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
        return MetricsEndpoint(module, host, server.server_address[1], server)
    raise OSError(f"no free metrics port in {base}..{base + PORT_SEARCH - 1}: {last_error}")
