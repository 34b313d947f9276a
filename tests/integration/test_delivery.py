"""Records once on the topic (issue 37, item 4), against a broker of the test's own: the local broker (Tansu) takes
kafka-python's idempotent producer, a record whose send outlasts the caller's patience (the broker paused) is not
sent twice, and a note left by a process that died between producing and the acknowledgement keeps the next sender
from sending it again."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kafka import TopicPartition

from deploy.procs import wait_for
from messaging import clients, keys
from messaging.delivery import HEADER, Delivery, DeliveryPending, Record
from tests.plugins.services import read_topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PAUSE = 20.0  # seconds: longer than a produce request's timeout (15 s), so that the producer retries it


def copies(settings: Any, topic: str, record_id: str, seconds: float = 3.0) -> int:
    """How many records of ``topic`` carry ``record_id`` (read from the beginning for ``seconds``)."""
    consumer = clients.kafka_consumer(settings, group_id=None)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [0])]
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        found = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                found += sum(1 for r in records if (HEADER, record_id.encode()) in (r.headers or []))
        return found
    finally:
        consumer.close()


def test_a_record_is_on_the_topic_once_across_a_broker_pause(cf, own_kafka) -> None:
    settings = cf.settings
    clients.ensure_topics(settings, {settings.topic_outbound: 4})
    delivery = Delivery(settings, cf.redis())
    warm = Record(settings.topic_outbound, {"warm": True}, "k", "warm-up")
    delivery.send([warm])  # metadata and the partition's offset are known before the pause
    assert clients.is_idempotent(delivery._kafka())  # the local broker takes kafka-python's idempotent producer
    event = Record(settings.topic_outbound, {"event": "crawl_finished", "crawlid": "c"}, "c", "c@1")
    own_kafka.pause()
    try:
        with pytest.raises(DeliveryPending):
            delivery.send([event], timeout=3)  # the broker holds the request: the caller gives up waiting ...
        with pytest.raises(DeliveryPending):
            delivery.send([event], timeout=3)  # ... and its retry waits for the same send, it makes no second one
        time.sleep(PAUSE - 6)  # the pause itself (the producer's request times out and is retried meanwhile)
    finally:
        own_kafka.resume()
    wait_for(lambda: _sent(delivery, event), 60, "the event acknowledged after the pause")
    assert copies(settings, settings.topic_outbound, "c@1") == 1
    note = cf.redis().get(keys.delivery_note("c@1"))
    assert note is not None and note.decode().endswith("\tsent")


def _sent(delivery: Delivery, record: Record) -> bool:
    try:
        delivery.send([record], timeout=2)
        return True
    except DeliveryPending:
        return False


def test_a_record_noted_by_a_process_that_died_is_not_sent_again(cf, own_kafka) -> None:
    settings = cf.settings
    clients.ensure_topics(settings, {settings.topic_outbound: 4})
    redis = cf.redis()
    record = Record(settings.topic_outbound, {"event": "crawl_finished", "crawlid": "d"}, "d", "d@2")
    first = Delivery(settings, redis)
    first.send([record])
    # the first sender died after producing, before it knew Kafka had the record: its note still says "sending"
    raw = redis.get(keys.delivery_note("d@2")).decode()
    redis.set(keys.delivery_note("d@2"), raw.replace("\tsent", "\tsending"))
    second = Delivery(settings, redis)
    second.send([record])
    assert (second.checks, second.found) == (1, 1)  # it read the partition and found the record there
    # a note that says "sent" (an answer to a request Kafka delivers again) is not even looked for
    third = Delivery(settings, redis)
    third.send([record])
    assert third.checks == 0
    # a "sending" note whose record never reached the topic: looked for, not found, sent
    lost = Record(settings.topic_outbound, {"event": "crawl_finished", "crawlid": "e"}, "e", "e@3")
    partition, since = raw.split("\t")[1:3]
    redis.set(keys.delivery_note("e@3"), f"{lost.topic}\t{partition}\t{since}\tsending")
    fourth = Delivery(settings, redis)
    fourth.send([lost])
    assert (fourth.checks, fourth.found) == (1, 0)
    for delivery in (first, second, third, fourth):
        delivery.close()
    assert copies(settings, settings.topic_outbound, "d@2") == 1
    assert copies(settings, settings.topic_outbound, "e@3") == 1
    assert read_topic(settings, settings.topic_outbound, 2, timeout=10)  # plain JSON values, as before
