"""messaging/health.py: beats, the reports and the /livez and /readyz answers beside /metrics."""

from __future__ import annotations

import json
from typing import Any

import pytest

from messaging.health import READY_CACHE_SECONDS, Beat, Health, outage_clear
from messaging.metrics import metrics_app

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_beat_fails_liveness_only_past_the_bound_and_never_while_it_rests() -> None:
    clock = Clock()
    health = Health(live_within=10, clock=clock)
    beat = health.beat("loop")
    clock.now += 60
    assert health.liveness().ok  # resting until its loop's first turn
    beat.tick()
    clock.now += 10
    assert health.liveness().ok
    clock.now += 0.5
    report = health.liveness()
    assert not report.ok and report.status == 503 and report.checks["loop"].startswith("no turn for 10.5s")
    beat.rest()  # a standby master's dispatch loop
    assert health.liveness().ok
    beat.tick()
    assert health.liveness().ok


def test_readiness_includes_liveness_names_the_failing_checks_and_is_cached_briefly() -> None:
    clock = Clock()
    health = Health(live_within=10, clock=clock)
    calls = []

    def store() -> str | None:
        calls.append(clock.now)
        raise ConnectionError("Error 111 connecting to redis:6379")

    health.ready("redis", store)
    health.age("feed", lambda: 3.0)
    health.ready("registered", lambda: None)
    report = health.readiness()
    assert report.checks == {"feed": "ok", "redis": "ConnectionError: Error 111 connecting to redis:6379",
                             "registered": "ok"}
    body = json.loads(report.body())
    assert body["status"] == "failing" and body["failing"] == ["redis"]
    assert health.readiness() is report and len(calls) == 1  # probes from several sources: one round of checks
    clock.now += READY_CACHE_SECONDS
    health.readiness()
    assert len(calls) == 2
    health.age("feed", lambda: 11.0)  # a wedged loop: not live, so not ready either
    clock.now += READY_CACHE_SECONDS
    assert health.readiness().checks["feed"].startswith("no turn for 11.0s")
    assert health.liveness().checks == {"feed": health.readiness().checks["feed"]}


def test_an_outage_log_that_is_down_fails_readiness() -> None:
    class Outage:
        what, down = "kafka-monitor: a batch", False

    outage = Outage()
    check = outage_clear(outage)
    assert check() is None
    outage.down = True
    assert check() == "kafka-monitor: a batch: failing"


def call(app: Any, path: str, method: str = "GET") -> tuple[str, dict[str, str], bytes]:
    answer: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        answer.update(status=status, headers=dict(headers))

    body = b"".join(app({"PATH_INFO": path, "REQUEST_METHOD": method, "QUERY_STRING": ""}, start_response))
    return answer["status"], answer["headers"], body


def test_the_metrics_port_answers_probes_and_still_serves_metrics() -> None:
    from prometheus_client import CollectorRegistry, Gauge

    registry = CollectorRegistry()
    Gauge("crawlfleet_test_gauge", "a gauge", registry=registry).set(7)
    health = Health()
    health.live("loop", lambda: None)
    health.ready("redis", lambda: "down")
    app = metrics_app(health, registry)
    status, headers, body = call(app, "/livez")
    assert status == "200 OK" and headers["Content-Type"] == "application/json" and json.loads(body)["status"] == "ok"
    status, _, body = call(app, "/readyz")
    assert status == "503 Service Unavailable" and json.loads(body)["checks"]["redis"] == "down"
    assert call(app, "/readyz", "HEAD")[2] == b""
    status, _, body = call(app, "/metrics")
    assert status.startswith("200") and b"crawlfleet_test_gauge 7.0" in body


def test_a_new_beat_rests_until_its_first_tick() -> None:
    assert Beat().resting and not Beat(resting=False).resting
