"""Prometheus discovery (``messaging.discovery``): the file_sd file lists every live /metrics endpoint registered in
Redis and every live manager, is replaced atomically, and forgets an endpoint whose registration expired."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from manager.registry import ManagerRegistry
from messaging import discovery, keys
from messaging.metrics import MetricsEndpoint
from messaging.settings import load
from tests.plugins.services import Isolated

pytestmark = pytest.mark.integration


def test_the_file_lists_live_endpoints_and_managers_and_is_replaced_atomically(cf: Isolated, tmp_path: Path) -> None:
    redis = cf.redis()
    target = tmp_path / "sd" / "targets.json"
    settings = load(cf.with_env(CRAWLFLEET_PROMETHEUS_SD_FILE=str(target)))
    crawler = MetricsEndpoint("crawler", "127.0.0.1", 40123, server=None)
    master = MetricsEndpoint("master", "127.0.0.1", 40200, server=None)
    crawler.register(redis, ttl=30)
    master.register(redis, ttl=30)
    ManagerRegistry(redis).heartbeat("host-a", "http://127.0.0.1:6800", "node-a", 4, 0, 0)

    assert discovery.refresh(redis, settings) == target
    groups = {group["labels"]["service"]: group for group in json.loads(target.read_text())}
    assert set(groups) == {"crawler", "master", "manager"}
    assert groups["crawler"]["targets"] == ["127.0.0.1:40123"]
    assert groups["manager"]["targets"] == ["127.0.0.1:6800"]
    assert all(g["labels"]["__metrics_path__"] == "/metrics" and g["labels"]["__scheme__"] == "http"
               for g in groups.values())
    assert not {"job", "instance"} & {label for g in groups.values() for label in g["labels"]}

    first = target.stat().st_ino
    discovery.refresh(redis, settings)
    assert target.stat().st_ino == first  # the same endpoints: not rewritten

    redis.delete(crawler.key())  # its registration expired (the process died without unregistering)
    discovery.refresh(redis, settings)
    assert target.stat().st_ino != first  # a new file renamed over the old one, never written in place
    assert {g["labels"]["service"] for g in json.loads(target.read_text())} == {"master", "manager"}
    assert redis.smembers(keys.METRICS_INDEX) == {master.key().encode()}  # the index forgot it too
    assert not list(target.parent.glob(".targets.json.*"))  # no temporary file left behind

    master.unregister(redis)
    ManagerRegistry(redis).leave("host-a")
    discovery.refresh(redis, settings)
    assert json.loads(target.read_text()) == []


def test_off_writes_nothing(cf: Isolated, tmp_path: Path) -> None:
    settings = load(cf.with_env(CRAWLFLEET_PROMETHEUS_SD_FILE="off"))
    assert discovery.refresh(cf.redis(), settings) is None
    default = load(cf.with_env(CRAWLFLEET_PROMETHEUS_SD_FILE=""))
    assert discovery.sd_file(default) == Path(default.run_dir) / "prometheus" / "targets.json"
