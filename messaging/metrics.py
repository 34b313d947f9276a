"""Prometheus ``/metrics`` for every long-running process, on a port that never collides.

Each module has its own port setting (``CRAWLFLEET_<MODULE>_METRICS_PORT``, e.g. CRAWLFLEET_CRAWLER_METRICS_PORT for
the Scrapy workers); -1 there takes CRAWLFLEET_METRICS_PORT. With a port P > 0 a process takes the first free port
from P upwards (so several processes on a host get P, P+1, …); with 0 it takes an ephemeral port. Either way the
endpoint is logged and registered in Redis (``metrics:<module>:<host>:<pid>``, refreshed with the module's
heartbeat, listed in ``endpoints:metrics``) so that a scraper can discover it: :mod:`messaging.discovery` writes
them all into a Prometheus ``file_sd`` file. Besides each module's own metrics, every endpoint carries the process
collector of prometheus-client (CPU seconds, resident memory, open files), :data:`UP` and
``crawlfleet_memo_evictions_total{memo}``: the entries each bounded per-crawl, per-host or per-URL memo of the
process evicted to stay within its bound (:mod:`messaging.bounded`; docs/architecture.md lists them), so that a bound
that costs something (a robots.txt record read again, a rule built again) shows.

The same port answers ``/livez`` and ``/readyz`` (:mod:`messaging.health`: 200 or 503, a JSON body naming each
check), so that a platform's probes and its scraper need one port per process.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import REGISTRY, CollectorRegistry, Gauge, make_wsgi_app
from prometheus_client.core import CounterMetricFamily
from prometheus_client.exposition import ThreadingWSGIServer

from messaging import keys
from messaging.bounded import evictions
from messaging.clients import RedisClient
from messaging.health import HEALTH, Health
from messaging.settings import Settings

PORT_SEARCH = 100
ANY_ADDRESS = ("0.0.0.0", "::", "")

UP = Gauge("crawlfleet_process_up", "1 while this crawlfleet process runs, by module.", ["module"])


class MemoEvictions:
    """``crawlfleet_memo_evictions_total{memo}`` from :func:`messaging.bounded.evictions`, read when scraped."""

    def collect(self) -> Iterable[CounterMetricFamily]:
        family = CounterMetricFamily(
            "crawlfleet_memo_evictions", "Entries a bounded per-crawl, per-host or per-URL memo of this process "
            "evicted to stay within its bound, by memo.", labels=["memo"])
        for memo, count in sorted(evictions().items()):
            family.add_metric([memo], count)
        yield family


REGISTRY.register(MemoEvictions())


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


WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
PROBES = {"/livez": Health.liveness, "/readyz": Health.readiness}


def metrics_app(health: Health, registry: CollectorRegistry = REGISTRY) -> WsgiApp:
    """``/livez`` and ``/readyz`` from ``health``; every other path is prometheus-client's exposition (as before)."""
    exposition = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        probe = PROBES.get(environ.get("PATH_INFO", ""))
        if probe is None:
            served: Iterable[bytes] = exposition(environ, start_response)
            return served
        report = probe(health)
        body = report.body() if environ.get("REQUEST_METHOD") != "HEAD" else b""
        start_response("200 OK" if report.ok else "503 Service Unavailable",
                       [("Content-Type", "application/json"), ("Cache-Control", "no-store")])
        return [body]

    return app


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # probes every few seconds: not one log line each
        pass


def _serve(host: str, port: int, app: WsgiApp) -> ThreadingWSGIServer:
    family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]

    class Server(ThreadingWSGIServer):
        address_family = family

    server = make_server(host, port, app, Server, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name=f"metrics-{port}", daemon=True).start()
    return server


def serve_metrics(settings: Settings, module: str, health: Health = HEALTH) -> MetricsEndpoint:
    """Serve ``/metrics``, ``/livez`` and ``/readyz`` on the module's port; ``health`` takes its liveness bound
    from the settings."""
    host = settings.metrics_host
    base = metrics_port(settings, module)
    candidates = [0] if base == 0 else range(base, base + PORT_SEARCH)
    app = metrics_app(health.configure(settings))
    last_error: OSError | None = None
    for port in candidates:
        try:
            server = _serve(host, port, app)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            last_error = exc
            continue
        UP.labels(module).set(1)
        return MetricsEndpoint(module, host, server.server_address[1], server)
    raise OSError(f"no free metrics port in {base}..{base + PORT_SEARCH - 1}: {last_error}")
