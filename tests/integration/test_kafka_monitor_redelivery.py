"""The Kafka monitor and redelivery: a redelivered first request is answered for what happened to the request."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from messaging import keys
from messaging.kafka_monitor.monitor import KafkaMonitor
from messaging.kafka_monitor.plugins.crawl import CrawlPlugin
from messaging.stats import Stats
from messaging.tasks import CrawlFields

pytestmark = pytest.mark.integration

REQUEST = {"userid": "alice", "crawlid": "once", "spider_type": "list", "url": "http://once.example.com/",
           "rule": {"first_page_xpath": {"list_from": "//li"}}, "uuid": "q-1"}


@dataclass
class Record:
    topic: str
    partition: int
    offset: int
    value: bytes


class Sent:
    def failed(self) -> bool:
        return False


class Producer:
    """Captures what the monitor produces (answers and rejections)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def send(self, topic: str, value: dict[str, Any], key: Any = None) -> Sent:
        self.sent.append((topic, value))
        return Sent()

    def flush(self, timeout: float | None = None) -> None:
        pass


class Consumer:
    def commit(self) -> None:
        pass


def test_a_redelivered_first_request_is_answered_accepted(cf) -> None:
    redis = cf.redis()
    monitor = KafkaMonitor(cf.settings, redis=redis, plugins=[CrawlPlugin()])
    producer = monitor.producer = Producer()
    monitor.consumer = Consumer()
    raw = json.dumps(REQUEST).encode()
    topic = cf.settings.topic_incoming

    def deliver(offset: int) -> dict[str, Any]:
        producer.sent.clear()
        monitor.process({(topic, 0): [Record(topic, 0, offset, raw)]})
        answers = [value for sent_to, value in producer.sent if sent_to == cf.settings.topic_outbound]
        assert len(answers) == 1
        return answers[0]

    first = deliver(7)
    assert (first["status"], first["enqueued"]) == ("accepted", True)
    # the monitor died after the Redis write, before the commit: Kafka delivers the same record again
    again = deliver(7)
    assert (again["uuid"], again["status"], again["enqueued"]) == ("q-1", "accepted", True)
    # another request with the same content is a duplicate
    assert deliver(8)["status"] == "duplicate"
    assert redis.zcard(keys.SEEDS) == 1
    assert redis.hget(keys.crawl("once"), CrawlFields.ENQUEUED) == b"1"
    stats = Stats(redis, "kafka-monitor")
    assert (stats.value("crawl", "lifetime"), stats.value("duplicate", "lifetime")) == (1, 1)
    assert stats.value("redelivered", "lifetime") == 1
