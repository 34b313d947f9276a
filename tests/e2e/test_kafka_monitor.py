"""The Kafka monitor on the real broker and Redis: routing, idempotence, stopped crawls, back-pressure, counters."""

from __future__ import annotations

import json
import urllib.request
import uuid
from typing import Any

import pytest

from deploy.procs import wait_for
from messaging import clients, keys
from messaging.answers import AnswerWaiter
from messaging.clients import as_text
from messaging.kafka_monitor.batch import DUPLICATE, ENQUEUED, REDELIVERED, Batch, Incoming
from messaging.kafka_monitor.plugins.crawl import CrawlPlugin
from messaging.stats import Stats
from messaging.tasks import CrawlFields, CrawlState, Task, push_seeds
from messaging.validation import Rejected, parse_request
from tests.plugins.services import read_topic

pytestmark = pytest.mark.e2e

RULE = {"first_page_xpath": {"list_from": "//li", "second_page_url": "a/@href", "title": "a/text()"},
        "second_page_xpath": {"body": "//article"}, "required": ["title"]}
IP = "10.9.8.7"


def crawl(crawlid: str, url: str, **extra: Any) -> dict[str, Any]:
    return {"userid": "alice", "crawlid": crawlid, "url": url, "spider_type": "list", "rule": RULE, **extra}


def monitor_env(cf: Any, **extra: str) -> dict[str, str]:
    return cf.with_env(CRAWLFLEET_KAFKA_GROUP=cf.name, CRAWLFLEET_WORKER_IP=IP, **extra)


def start_monitor(cf: Any, procs: Any, env: dict[str, str]) -> Any:
    proc = procs.crawlfleet("kafka-monitor", env=env)
    procs.wait_log(proc, f"partitions assigned: {cf.settings.topic_incoming}[", 60)
    return proc


def produce(settings: Any, messages: list[Any], key: str | None = None) -> None:
    producer = clients.kafka_producer(settings, value_serializer=None)
    try:
        for message in messages:
            raw = message if isinstance(message, bytes) else json.dumps(message).encode()
            producer.send(settings.topic_incoming, raw, key=key)
        producer.flush(timeout=30)
    finally:
        producer.close()


def test_requests_are_routed_into_redis(cf, procs):
    redis = cf.redis()
    env = monitor_env(cf)
    start_monitor(cf, procs, env)
    waiter = AnswerWaiter(cf.settings)
    asked = uuid.uuid4().hex
    first = crawl("news", "http://news.example.com/1")
    produce(cf.settings, [first, crawl("news", "http://news.example.com/2", priority=200),
                          crawl("news", "http://other.example.org/3"), first,
                          crawl("news", "http://news.example.com/4", uuid=asked)], key="news")
    produce(cf.settings, [{"action": "info", "userid": "alice", "crawlid": "news", "uuid": "i1"},
                          {"stats": "all", "userid": "alice", "uuid": "s1"},
                          {"action": "rate", "userid": "alice", "domain": "Example.COM", "rate": 3, "uuid": "z1"},
                          {"action": "blacklist", "userid": "alice", "domain": "spam.example"},
                          {"action": "stop", "userid": "alice", "crawlid": "old", "uuid": "x1"},
                          {"userid": "alice", "crawlid": "bad", "url": "gopher://x", "rule": RULE,
                           "spider_type": "list", "uuid": "bad1"}])
    answers = waiter.wait([asked, "bad1"], 30)
    waiter.close()
    assert answers[asked]["status"] == "accepted" and answers[asked]["enqueued"] is True
    assert answers["bad1"]["status"] == "rejected" and answers["bad1"]["path"] == "$.url"

    members = [Task.decode(member) for member in redis.zrange(keys.SEEDS, 0, -1)]
    assert [task.url for task in members] == ["http://news.example.com/2", "http://news.example.com/1",
                                              "http://other.example.org/3", "http://news.example.com/4"]
    assert members[0].priority == 200 and members[0].crawlid == "news" and members[0].userid == "alice"
    info = {key.decode(): value.decode() for key, value in redis.hgetall(keys.crawl("news")).items()}
    assert json.loads(info[CrawlFields.RULE]) == RULE
    assert info[CrawlFields.STATE] == CrawlState.RUNNING and info[CrawlFields.SPIDER_TYPE] == "list"
    assert info[CrawlFields.ENQUEUED] == "4" and info[CrawlFields.URL] == "http://news.example.com/1"
    assert redis.sismember(keys.CRAWLS, "news")

    wait_for(lambda: redis.exists(keys.stop_request("alice", "old", "x1")), 15, "the stop request key")
    stored = json.loads(redis.get(keys.info_request("alice", "news", "i1")))
    assert stored == {"action": "info", "userid": "alice", "crawlid": "news", "uuid": "i1"}
    assert redis.exists(keys.stats_request("alice", "all", "s1"))
    assert redis.exists(keys.zk_request("rate", "example.com", "alice", "z1"))
    assert 0 < redis.ttl(keys.zk_request("rate", "example.com", "alice", "z1")) <= cf.settings.request_ttl
    assert len(list(redis.scan_iter(match="zk:{requests}:blacklist:spam.example:alice:*"))) == 1
    # each stored request is also an entry of its kind's stream, which the Redis monitors read (no keyspace scan)
    entries = {kind: [as_text(fields[b"key"]) for _, fields in redis.xrange(keys.request_stream(kind))]
               for kind in ("info", "stats", "site", "stop")}
    assert entries["info"] == [keys.info_request("alice", "news", "i1")]
    assert entries["stop"] == [keys.stop_request("alice", "old", "x1")]
    assert keys.zk_request("rate", "example.com", "alice", "z1") in entries["site"] and len(entries["site"]) == 2

    failed = read_topic(cf.settings, cf.settings.topic_failed, 1)
    assert failed[0]["path"] == "$.url" and "gopher" in failed[0]["reason"]
    assert json.loads(failed[0]["original"])["crawlid"] == "bad"

    stats = Stats(redis, "kafka-monitor")
    wait_for(lambda: stats.value("rejected", "lifetime") == 1, 10, "the rejection to be counted")
    assert stats.value("crawl", "lifetime") == 4 and stats.value("duplicate", "lifetime") == 1
    for plugin in ("info", "stats", "zookeeper", "stop"):
        assert stats.value(plugin, 60) >= 1, plugin
    assert redis.exists(keys.stats_alive("kafka-monitor", IP))
    endpoint = [key for key in redis.scan_iter(match="metrics:kafka-monitor:*")]
    assert len(endpoint) == 1
    with urllib.request.urlopen(redis.get(endpoint[0]).decode(), timeout=10) as response:
        text = response.read().decode()
    assert 'crawlfleet_events_total{module="kafka-monitor",plugin="crawl"} 4.0' in text


def test_a_stopped_crawl_takes_no_new_requests(cf, procs):
    redis = cf.redis()
    redis.hset(keys.crawl("halted"), mapping={CrawlFields.STATE: CrawlState.STOPPED, CrawlFields.USERID: "alice"})
    start_monitor(cf, procs, monitor_env(cf))
    with AnswerWaiter(cf.settings) as waiter:
        produce(cf.settings, [crawl("halted", "http://example.com/", uuid="h1")])
        answer = waiter.wait(["h1"], 30)["h1"]
    assert answer["status"] == "rejected" and "was stopped" in answer["reason"]
    assert redis.zcard(keys.SEEDS) == 0
    assert redis.hget(keys.crawl("halted"), CrawlFields.STATE) == b"stopped"
    assert "was stopped" in read_topic(cf.settings, cf.settings.topic_failed, 1)[0]["reason"]


def test_back_pressure_pauses_above_high_water_and_resumes_below_low_water(cf, procs):
    redis = cf.redis()
    push_seeds(redis, [Task(f"http://filler.example/{i}", "filler", "list") for i in range(10)])
    proc = start_monitor(cf, procs, monitor_env(cf, CRAWLFLEET_SEEDS_HIGH_WATER="5", CRAWLFLEET_SEEDS_LOW_WATER="3"))
    procs.wait_log(proc, "paused consuming: seeds holds 10 tasks", 15)
    produce(cf.settings, [crawl("later", f"http://later.example.com/{i}") for i in range(4)])
    assert redis.zcard(keys.SEEDS) == 10  # nothing consumed while paused
    redis.zpopmin(keys.SEEDS, 8)
    procs.wait_log(proc, "resumed consuming: seeds holds 2 tasks", 15)
    wait_for(lambda: redis.zcard(keys.SEEDS) == 6, 20, "the 4 requests to arrive after the resume")


@pytest.mark.parametrize("cluster", [False, pytest.param(True, marks=pytest.mark.cluster)])
def test_a_redelivered_batch_is_not_enqueued_twice(cf, request, cluster):
    isolated = request.getfixturevalue("cf_cluster") if cluster else cf
    redis = isolated.redis()
    raw = [json.dumps(crawl("dedup", f"http://dedup.example.com/{i}")).encode() for i in range(50)]

    def deliver(first_offset: int = 0) -> tuple[set[str], dict[str, int]]:
        items = [Incoming("incoming", 0, first_offset + offset, body, request=parse_request(body)) for offset, body
                 in enumerate(raw)]
        batch = Batch(redis, dedup_ttl=60, request_ttl=60)
        plugin = CrawlPlugin()
        plugin.prepare(items, batch)
        for item in items:
            item.plugin = plugin.name
            plugin.handle(item, batch)
        written = batch.write()
        return {item.outcome for item in items}, dict(written)

    assert deliver() == ({ENQUEUED}, {"crawl": 50})
    redis.zpopmin(keys.SEEDS, 50)  # dispatched meanwhile: ZADD NX alone would enqueue them again
    assert deliver() == ({REDELIVERED}, {})  # the same records again: accepted once, not enqueued again
    assert deliver(first_offset=1000) == ({DUPLICATE}, {})  # other records with the same content
    assert redis.zcard(keys.SEEDS) == 0
    assert 0 < redis.ttl(keys.intake_seen(parse_request(raw[0]).digest)) <= 60
    assert redis.hget(keys.crawl("dedup"), CrawlFields.ENQUEUED) == b"50"
    assert redis.hget(keys.PENDING_SEEDS, "dedup") == b"50"  # counted once for the finisher, redelivery or not

    redis.hset(keys.crawl("dedup"), CrawlFields.STATE, CrawlState.STOPPED)
    item = Incoming("incoming", 0, 99, raw[0], request=parse_request(raw[0]))
    batch = Batch(redis, dedup_ttl=60, request_ttl=60)
    CrawlPlugin().prepare([item], batch)
    with pytest.raises(Rejected, match="was stopped"):
        CrawlPlugin().handle(item, batch)
