"""Health that means health (issue 29, item 1): each service's check exercises the path that matters — a MongoDB
whose storage fails while ping still answers, and a Redis that refuses writes, are reported unhealthy with why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis as redis_py

from deploy.services.base import ServiceRecord
from deploy.services.kafka import KafkaService
from deploy.services.mongo import MongoService
from deploy.services.redis import RedisService
from tests.plugins.mongo_faults import MongoFaultProxy

pytestmark = pytest.mark.integration


def _record(name: str, port: int, pid: int) -> ServiceRecord:
    return ServiceRecord(name, [pid], [port], "", "")


def test_a_mongodb_that_answers_ping_but_fails_writes_is_unhealthy(local_services: dict[str, Any]) -> None:
    mongo = local_services["services"]["mongo"]
    proxy = MongoFaultProxy(mongo["ports"][0], server_pid=lambda: mongo["pids"][0]).start()
    try:
        record = _record("mongo", proxy.port, mongo["pids"][0])
        service = MongoService()
        assert service.ping(record) == (True, "ok")
        proxy.panic()
        assert service.ready(record)  # ping still answers, as with a full disk
        healthy, detail = service.ping(record)
        assert not healthy and "No space left on device" in detail, detail
        assert proxy.refused >= 1
    finally:
        proxy.stop()


def test_a_redis_that_refuses_writes_is_unhealthy(local_services: dict[str, Any], tmp_path: Path) -> None:
    service = RedisService(aof=False)
    record = service.start(tmp_path)
    try:
        service.wait_ready(record, 20)
        assert service.ping(record) == (True, "ok")
        with redis_py.Redis(port=record.port) as client:
            client.config_set("min-replicas-to-write", 1)  # no replica: every write is refused, PING answers
        healthy, detail = service.ping(record)
        assert not healthy and "NOREPLICAS" in detail, detail
    finally:
        service.stop(record)


def test_kafka_health_is_a_produce(local_services: dict[str, Any]) -> None:
    kafka = local_services["services"]["kafka"]
    assert KafkaService().ping(_record("kafka", kafka["ports"][0], kafka["pids"][0])) == (True, "ok")
