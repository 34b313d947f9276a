"""Failover: two Kafka monitors share 20,000 requests; one is killed with SIGKILL midway; each lands in seeds once."""

from __future__ import annotations

import json

import pytest

from deploy.procs import kill_hard, wait_for
from messaging import clients, keys
from messaging.stats import Stats
from messaging.tasks import Task

pytestmark = pytest.mark.e2e

COUNT = 20_000
RULE = {"first_page_xpath": {"list_from": "//li", "title": "a/text()"}}


def holds_partitions(log: str, topic: str) -> bool:
    """Whether the monitor's latest assignment includes partitions of the topic."""
    assigned = [line for line in log.splitlines() if "partitions assigned: " in line]
    return bool(assigned) and f"{topic}[" in assigned[-1]


def test_a_killed_monitor_loses_nothing_and_duplicates_nothing(cf, procs):
    topic = cf.settings.topic_incoming
    env = cf.with_env(CRAWLFLEET_KAFKA_GROUP=cf.name, CRAWLFLEET_KAFKA_MONITOR_BATCH="500")
    first = procs.crawlfleet("kafka-monitor", env=env, name="kafka-monitor-a")
    procs.wait_log(first, f"partitions assigned: {topic}[", 60)
    second = procs.crawlfleet("kafka-monitor", env=env, name="kafka-monitor-b")
    wait_for(lambda: holds_partitions(procs.log(first), topic) and holds_partitions(procs.log(second), topic), 60,
             "both monitors to hold partitions after the rebalance")

    producer = clients.kafka_producer(cf.settings, value_serializer=None, batch_size=512 * 1024, linger_ms=20)
    for i in range(COUNT):
        request = {"userid": "ops", "crawlid": f"fo-{i % 7}", "spider_type": "list", "rule": RULE,
                   "url": f"http://site{i % 40}.example.com/page/{i}"}
        producer.send(topic, json.dumps(request).encode())
    producer.flush(timeout=120)
    producer.close()

    redis = cf.redis()
    wait_for(lambda: redis.zcard(keys.SEEDS) >= COUNT // 5, 60, "a fifth of the requests in seeds", 0.01)
    kill_hard(first.pid)
    at_kill = redis.zcard(keys.SEEDS)
    assert at_kill < COUNT, "the kill must happen midway for this test to mean anything"

    wait_for(lambda: redis.zcard(keys.SEEDS) >= COUNT, 120, f"{COUNT} tasks in seeds after the kill",
             alive=lambda: f"the survivor exited:\n{procs.log(second)[-2000:]}" if second.poll() else None)
    urls = sorted(Task.decode(member).url for member in redis.zrange(keys.SEEDS, 0, -1))
    assert len(urls) == COUNT == len(set(urls))
    assert urls == sorted(f"http://site{i % 40}.example.com/page/{i}" for i in range(COUNT))
    # A redelivered request is a duplicate, never a second enqueue; the counts are written after the enqueue, so the
    # killed monitor may have taken up to one batch's counts with it.
    enqueued = sum(int(redis.hget(keys.crawl(f"fo-{c}"), "enqueued") or 0) for c in range(7))
    assert COUNT - 500 <= enqueued <= COUNT
    assert COUNT - 500 <= Stats(redis, "kafka-monitor").value("crawl", "lifetime") <= COUNT
    assert holds_partitions(procs.log(second), topic)
