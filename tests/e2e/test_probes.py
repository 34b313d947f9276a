"""Probes that mean health, on real processes (messaging/health.py, spiders/health.py):

- Redis stopped: a master and a worker are not ready within seconds (``/readyz`` 503 naming ``redis``), stay live
  for an outage longer than the liveness bound (their loops keep turning while they retry), and are ready again once
  Redis is back (restarted from its append-only file on the same port);
- a worker whose feed thread is wedged (a test hook: tests/plugins/wedge.py) fails ``/livez``, naming ``feed``,
  while its reactor and heartbeat still turn.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from deploy.procs import free_port, stop_pid, wait_for
from deploy.services.redis import redis_server_bin
from messaging import clients
from messaging.settings import load
from tests.plugins.wedge import extensions_with_wedge

pytestmark = pytest.mark.e2e

LIVE_WITHIN = 12  # seconds: above the slowest loop's period (the alive-key heartbeat's 10 s)
OUTAGE = 16  # longer than the bound: a loop that stopped turning while Redis is away would fail liveness
METRICS_URL = re.compile(r"http://[0-9.]+:([0-9]+)/metrics")


def probe(port: int, path: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def metrics_port(procs: Any, proc: Any) -> int:
    """The port a process announced its /metrics (and probes) on."""
    found: list[int] = []

    def announced() -> bool:
        found[:] = [int(m.group(1)) for m in METRICS_URL.finditer(procs.log(proc))]
        return bool(found)

    wait_for(announced, 60, f"pid {proc.pid} to announce its metrics port")
    return found[0]


def wait_status(port: int, path: str, status: int, timeout: float) -> dict[str, Any]:
    seen: list[Any] = [None]

    def reached() -> bool:
        seen[0] = probe(port, path)
        return bool(seen[0][0] == status)

    wait_for(reached, timeout, f"{path} on port {port} to answer {status} (last: {seen[0]})", interval=0.2)
    return seen[0][1]


def test_redis_away_makes_masters_and_workers_unready_but_never_unlive(cf: Any, procs: Any, tmp_path: Path) -> None:
    port, data = free_port(), tmp_path / "redis"
    data.mkdir()
    redis_argv = [redis_server_bin(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data), "--save", "",
                  "--appendonly", "yes", "--appendfsync", "always"]
    env = cf.with_env(CRAWLFLEET_REDIS_URL=f"redis://127.0.0.1:{port}/0", CRAWLFLEET_LIVENESS_SECONDS=str(LIVE_WITHIN),
                      CRAWLFLEET_HEARTBEAT_INTERVAL="1")
    redis_proc = procs.start(redis_argv, env, name="redis", service=True)
    redis = clients.redis_client(load(env))
    wait_for(redis.ping, 20, "the test's Redis")
    master = procs.crawlfleet("master", "--id", "m0", env=env, name="master")
    worker = procs.crawlfleet("worker", "--spider", "list", "--job", f"{cf.name}-probe", env=env, name="worker")
    ports = {"master": metrics_port(procs, master), "worker": metrics_port(procs, worker)}
    for port_ in ports.values():
        wait_status(port_, "/readyz", 200, 60)

    stop_pid(redis_proc.pid, timeout=10)
    stopped = time.monotonic()
    for name, port_ in ports.items():
        body = wait_status(port_, "/readyz", 503, 10)
        assert "redis" in body["failing"], (name, body)
    while time.monotonic() - stopped < OUTAGE:  # every loop still turns: live throughout
        for name, port_ in ports.items():
            status, body = probe(port_, "/livez")
            assert status == 200, (name, body)
        time.sleep(0.5)

    procs.start(redis_argv, env, name="redis-again", service=True)
    wait_for(redis.ping, 20, "the restarted Redis")
    for name, port_ in ports.items():
        body = wait_status(port_, "/readyz", 200, 30)
        assert probe(port_, "/livez")[0] == 200, name
    assert master.poll() is None and worker.poll() is None
    redis.close()


def test_a_wedged_feed_thread_fails_the_workers_liveness(cf: Any, procs: Any) -> None:
    env = cf.with_env(CRAWLFLEET_LIVENESS_SECONDS="3", CRAWLFLEET_HEARTBEAT_INTERVAL="1")
    worker = procs.crawlfleet("worker", "--spider", "list", "--job", f"{cf.name}-wedge", "-s", extensions_with_wedge(),
                              env=env, name="worker")
    port = metrics_port(procs, worker)
    body = wait_status(port, "/readyz", 200, 60)
    assert {"reactor", "feed", "heartbeat", "redis", "registered"} <= set(body["checks"])

    os.kill(worker.pid, signal.SIGUSR2)  # the hook: the feed's next pass never returns
    body = wait_status(port, "/livez", 503, 15)
    assert body["failing"] == ["feed"], body
    assert body["checks"]["reactor"] == body["checks"]["heartbeat"] == "ok"
    assert probe(port, "/readyz")[0] == 503  # not live is not ready either
