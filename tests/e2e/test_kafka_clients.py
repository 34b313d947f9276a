"""A standard Kafka client against the local broker (Tansu): confluent-kafka (librdkafka >= 2.x), as documented in
README ("Submitting crawls and asking questions") and docs/kafka-cli.md.

Debian's kcat 1.7.1 (librdkafka 2.0.2) cannot talk to Tansu at all ("ApiVersionRequest failed: Read underflow"), and
the Apache Kafka console tools come with an Apache Kafka; the docs say so. This test runs the Python commands the docs
show: produce a crawl request keyed by its crawlid and an info request, read the answer on the outbound topic and a
rejection on the failed topic, with the monitors running.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

pytestmark = pytest.mark.e2e

RULE = {"rules": [{"allow": "/article/", "extract": {"title": "//h1/text()"}}], "start": "url", "required": ["title"]}
READ_TIMEOUT = 60.0


def read_until(bootstrap: str, topic: str, wanted: Any, timeout: float = READ_TIMEOUT) -> dict[str, Any]:
    """The first record of ``topic`` (every partition, from the beginning) for which ``wanted(record)`` holds."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"docs-{topic}",
                                         "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                         for p in partitions])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            record = json.loads(message.value())
            if wanted(record):
                return record
        raise AssertionError(f"no wanted record on {topic} within {timeout} s")
    finally:
        consumer.close()


def test_confluent_kafka_submits_and_reads_answers(cf, procs):
    env = cf.with_env(CRAWLFLEET_KAFKA_GROUP=cf.name)
    kafka_monitor = procs.crawlfleet("kafka-monitor", env=env)
    redis_monitor = procs.crawlfleet("redis-monitor", env=env)
    procs.wait_log(kafka_monitor, f"partitions assigned: {cf.settings.topic_incoming}[", 60)
    procs.wait_log(redis_monitor, "redis-monitor: watching", 30)
    boot, incoming = cf.settings.kafka_bootstrap, cf.settings.topic_incoming

    producer = confluent_kafka.Producer({"bootstrap.servers": boot})
    crawl = {"userid": "alice", "crawlid": "news-2026", "spider_type": "universal",
             "url": "http://news.example.com/", "rule": RULE}
    producer.produce(incoming, json.dumps(crawl).encode(), key=b"news-2026")
    producer.produce(incoming, json.dumps({"action": "info", "userid": "alice", "crawlid": "news-2026",
                                           "uuid": "q-1"}).encode())
    producer.produce(incoming, json.dumps({**crawl, "url": "javascript:alert(1)", "crawlid": "bad"}).encode())
    assert producer.flush(30) == 0, "the local broker did not acknowledge every record"

    answer = read_until(boot, cf.settings.topic_outbound, lambda record: record.get("uuid") == "q-1")
    assert answer["kind"] == "info" and answer["status"] == "ok"
    rejected = read_until(boot, cf.settings.topic_failed, lambda record: "reason" in record)
    assert rejected["reason"].startswith("$.url: ")


def test_the_readme_confluent_kafka_snippet_runs_against_the_local_broker(cf, procs):
    """The README's Python block, run as written (only the topic names are this test's own)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    snippet = re.search(r"```sh\npython - <<'EOF'\n(.*?)\nEOF\n```", readme, re.S)
    assert snippet, "README lost its confluent-kafka example"
    code = (snippet.group(1).replace('"crawlfleet.incoming"', json.dumps(cf.settings.topic_incoming))
            .replace('"crawlfleet.outbound"', json.dumps(cf.settings.topic_outbound)))
    env = cf.with_env(CRAWLFLEET_KAFKA_GROUP=cf.name)
    kafka_monitor = procs.crawlfleet("kafka-monitor", env=env)
    redis_monitor = procs.crawlfleet("redis-monitor", env=env)
    procs.wait_log(kafka_monitor, f"partitions assigned: {cf.settings.topic_incoming}[", 60)
    procs.wait_log(redis_monitor, "redis-monitor: watching", 30)
    shell = {**env, "CRAWLFLEET_KAFKA_BOOTSTRAP": cf.settings.kafka_bootstrap}  # what eval "$(crawlfleet env)" sets
    result = subprocess.run([sys.executable, "-c", code], env=shell, capture_output=True, text=True,
                            timeout=READ_TIMEOUT + 30)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["uuid"] == "q-1" and answer["kind"] == "info" and answer["status"] == "ok"
