"""The Kafka monitor and redelivery: a redelivered first request is answered for what happened to the request (the
answer a monitor that died before producing it leaves to the next one)."""

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


class Delivery:
    """Captures what the monitor asks to produce (answers and rejections); once each on the topic is
    messaging.delivery's part (tests/integration/test_delivery.py)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def send(self, records: list[Any], timeout: float = 30.0) -> None:
        self.sent += [(record.topic, record.value) for record in records]


class Consumer:
    def commit(self) -> None:
        pass


def test_a_redelivered_first_request_is_answered_accepted(cf) -> None:
    redis = cf.redis()
    monitor = KafkaMonitor(cf.settings, redis=redis, plugins=[CrawlPlugin()])
    producer = monitor.delivery = Delivery()  # type: ignore[assignment]
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
