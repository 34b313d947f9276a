"""The manager's ``/metrics`` (Prometheus text), on its own HTTP port: its jobs and the cluster's gauges.

The manager's jobs (pending, running, finished kept, process slots), the cluster as
:class:`frontier.metrics.ClusterCollector` reads it from Redis (seeds, workers alive, each worker's queued and leased
tasks and heartbeat age, crawls' pages and items, responses by status), the masters in the election, and the process
(CPU, memory). Collected off the reactor: the Redis and ZooKeeper reads block. One registry per manager, so that
nothing is global.

``/livez`` and ``/readyz`` (:class:`ProbeResource`, :mod:`messaging.health`) are answered without authentication,
as a platform's probes need: live while the reactor turns (it ticks every second, and answers the probe itself);
ready while Redis answers (checked off the reactor).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from twisted.internet import threads
from twisted.web import http, resource, server

from frontier.metrics import ClusterCollector
from messaging.health import Health, Report
from messaging.metrics import MemoEvictions


class ManagerCollector:
    def __init__(self, manager: Any) -> None:
        self.manager = manager

    def collect(self) -> Iterator[Metric]:
        m = self.manager
        jobs = GaugeMetricFamily("crawlfleet_manager_jobs", "This manager's jobs by state.", labels=["state"])
        jobs.add_metric(["pending"], m.queue.count())
        jobs.add_metric(["running"], len(m.launcher.processes))
        jobs.add_metric(["finished"], len(m.history))
        slots = GaugeMetricFamily("crawlfleet_manager_process_slots", "Process slots (CRAWLFLEET_MANAGER_MAX_PROC).")
        slots.add_metric([], m.config.max_proc)
        yield jobs
        yield slots


def manager_registry(manager: Any) -> CollectorRegistry:
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    registry.register(ManagerCollector(manager))
    registry.register(MemoEvictions())  # the manager's own bounded memos, as every process serves them
    registry.register(ClusterCollector(manager.redis, manager.config.settings.heartbeat_ttl,
                                       stall_show_after=manager.config.settings.stall_show_after))
    return registry


class MetricsResource(resource.Resource):
    isLeaf = True

    def __init__(self, manager: Any) -> None:
        super().__init__()
        self.registry = manager_registry(manager)

    def render_GET(self, request: Any) -> Any:
        d = threads.deferToThread(generate_latest, self.registry)

        def write(body: bytes) -> None:
            request.setHeader(b"content-type", CONTENT_TYPE_LATEST.encode())
            request.write(body)
            request.finish()

        def failed(failure: Any) -> None:
            request.setResponseCode(http.INTERNAL_SERVER_ERROR)
            request.setHeader(b"content-type", b"text/plain; charset=utf-8")
            request.write(f"metrics unavailable: {failure.getErrorMessage()}\n".encode())
            request.finish()

        d.addCallbacks(write, failed)
        d.addErrback(lambda _: None)  # the scraper went away
        return server.NOT_DONE_YET


class ProbeResource(resource.Resource):
    """``/livez`` or ``/readyz`` of the manager's :class:`~messaging.health.Health` (200 or 503, JSON)."""

    isLeaf = True

    def __init__(self, health: Health, ready: bool) -> None:
        super().__init__()
        self.health = health
        self.ready = ready

    def render_GET(self, request: Any) -> Any:
        # readiness checks may wait for a store (a second at most): never on the reactor
        d = threads.deferToThread(self.health.readiness if self.ready else self.health.liveness)

        def write(report: Report) -> None:
            request.setResponseCode(report.status)
            request.setHeader(b"content-type", b"application/json")
            request.setHeader(b"cache-control", b"no-store")
            request.write(report.body())
            request.finish()

        d.addCallback(write)
        d.addErrback(lambda _: None)  # the prober went away
        return server.NOT_DONE_YET
