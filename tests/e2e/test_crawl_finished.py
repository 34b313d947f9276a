"""Crawl finished: nothing left in seeds, queues or leases -> one ``crawl_finished`` event per crawl."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from bench.sim_worker import SimWorker
from deploy.procs import wait_for
from master.dispatcher import DispatchConfig, Dispatcher
from master.finisher import EVENT_FIELD, Finisher
from messaging import clients, keys
from messaging.clock import RedisClock
from messaging.tasks import CrawlFields, CrawlState, Task, push_seeds
from tests.plugins.services import read_topic

pytestmark = pytest.mark.e2e

T0 = 1_700_000_040.0


def start_crawl(redis: Any, crawlid: str, urls: list[str], created: float = T0) -> list[Task]:
    redis.hset(keys.crawl(crawlid), mapping={CrawlFields.STATE: CrawlState.RUNNING, CrawlFields.CREATED: created,
                                              CrawlFields.USERID: "u1", CrawlFields.SPIDER_TYPE: "list"})
    tasks = [Task(url=url, crawlid=crawlid, spider_type="list") for url in urls]
    push_seeds(redis, tasks)
    return tasks


def test_finished_only_when_nothing_is_left_and_announced_once(cf) -> None:
    redis = cf.redis()
    events: list[dict[str, Any]] = []
    finisher = Finisher(redis, events.append)
    start_crawl(redis, "a", [f"http://a{i}.test/" for i in range(4)])
    start_crawl(redis, "stopped", ["http://s.test/"])
    worker = SimWorker(redis, "w", 60)
    worker.register(T0)
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), DispatchConfig(initial_rate=600))
    dispatcher.round(T0)
    redis.hset(keys.crawl("stopped"), CrawlFields.STATE, CrawlState.STOPPED)
    assert finisher.check(T0) == []  # everything is in the worker's queues
    leased = worker.lease(4, T0 + 1)
    assert finisher.check(T0 + 1) == []  # ... now leased
    # one task's child is pushed before its parent is acknowledged
    parent = Task.decode(leased[0][1])
    push_seeds(redis, [parent.child("http://a0.test/child")])
    worker.ack(leased, T0 + 2)
    redis.hset(keys.crawl("a"), mapping={CrawlFields.PAGES: 5, CrawlFields.ITEMS: 3})
    assert finisher.check(T0 + 2) == []  # the child waits in seeds
    dispatcher.round(T0 + 3)
    assert finisher.check(T0 + 3) == []  # ... then in a queue
    worker.step(T0 + 60, 57)
    assert finisher.check(T0 + 61) == ["a"]
    assert finisher.check(T0 + 62) == []
    assert [e["crawlid"] for e in events] == ["a"]
    assert events[0] == {"event": "crawl_finished", "crawlid": "a", "userid": "u1", "spider_type": "list",
                         "pages": 5, "items": 3, "restored": 0, "retried": 0, "failures": {},
                         "failed_urls": {"listed": 0, "unlisted": 0}, "start_failure": None,
                         "event_id": f"a@{T0 + 61!r}", "finished": T0 + 61, "duration": 61.0, "retries": 0}
    assert redis.hget(keys.crawl("a"), CrawlFields.STATE) == b"finished"
    assert redis.hget(keys.crawl("stopped"), CrawlFields.STATE) == b"stopped"
    assert not redis.smembers(keys.FINISH_CANDIDATES)


def test_a_task_pushed_without_counting_keeps_the_crawl_open(cf) -> None:
    redis = cf.redis()
    events: list[dict[str, Any]] = []
    start_crawl(redis, "a", ["http://a.test/1"])
    worker = SimWorker(redis, "w", 60)
    worker.register(T0)
    Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), DispatchConfig(initial_rate=600)).round(T0)
    stray = Task(url="http://a.test/2", crawlid="a", spider_type="list")
    redis.zadd(keys.SEEDS, {stray.encode(): 1})  # not through push_seeds: not counted
    worker.step(T0 + 60, 60)
    assert Finisher(redis, events.append).check(T0 + 61) == []
    assert int(redis.hget(keys.PENDING_SEEDS, "a")) == 1  # the verification scan counted it


def test_an_event_whose_sending_failed_is_sent_by_the_next_check(cf) -> None:
    redis = cf.redis()
    start_crawl(redis, "a", ["http://a.test/1"])
    worker = SimWorker(redis, "w", 60)
    worker.register(T0)
    Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), DispatchConfig(initial_rate=600)).round(T0)
    worker.step(T0 + 60, 60)

    def broken(event: dict[str, Any]) -> None:
        raise ConnectionError("Kafka is away")

    with pytest.raises(ConnectionError):  # raised for the reporting loop to log once per outage
        Finisher(redis, broken).check(T0 + 61)
    assert redis.hget(keys.crawl("a"), EVENT_FIELD) == b"pending"
    events: list[dict[str, Any]] = []
    assert Finisher(redis, events.append).check(T0 + 62) == ["a"]
    assert len(events) == 1 and events[0]["finished"] == T0 + 61


def test_the_master_process_produces_crawl_finished_once_per_crawl(cf, procs) -> None:
    clients.ensure_topics(cf.settings, {cf.settings.topic_outbound: 1})
    redis = cf.redis()
    now = RedisClock(redis).now()
    start_crawl(redis, "one", [f"http://one{i}.test/" for i in range(6)], created=now)
    start_crawl(redis, "two", [f"http://two{i}.test/" for i in range(3)], created=now)
    env = cf.with_env(CRAWLFLEET_FINISH_INTERVAL="0.2", CRAWLFLEET_DISPATCH_INTERVAL="0.1",
                      CRAWLFLEET_DISPATCH_INITIAL_RATE="600")
    master = procs.crawlfleet("master", env=env)
    procs.wait_log(master, "leading the dispatch with epoch", timeout=30)
    worker = SimWorker(redis, "w1", 6000)
    worker.register(RedisClock(redis).now())
    stop = threading.Event()

    def work() -> None:  # a worker at the Redis clock: completes what it is given
        while not stop.is_set():
            worker.step(RedisClock(redis).now(), 0.1)
            stop.wait(0.1)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:
        wait_for(lambda: worker.completed >= 9, 30, "the worker to complete the 9 tasks")
        events = read_topic(cf.settings, cf.settings.topic_outbound, 2, timeout=30)
        # the finisher keeps running: after both crawls left the candidates, no other event appears
        wait_for(lambda: not redis.smembers(keys.FINISH_CANDIDATES), 10, "the candidates to be checked")
        procs.wait_log(master, "crawl two finished", timeout=10)
    finally:
        stop.set()
        thread.join(timeout=10)
    events = read_topic(cf.settings, cf.settings.topic_outbound, 2, timeout=10)
    assert sorted(e["crawlid"] for e in events if e["event"] == "crawl_finished") == ["one", "two"]
    assert len(events) == 2
    assert {e["crawlid"]: e["duration"] >= 0 for e in events} == {"one": True, "two": True}


def test_a_finished_crawl_takes_its_bloom_filter_with_it(cf) -> None:
    from frontier.bloom import BloomSpec, crawl_namespace, open_filter

    redis = cf.redis()
    bloom = open_filter(redis, crawl_namespace("b"), BloomSpec(capacity=1_000, shards=2))  # no TTL of its own
    bloom.add(["http://b.test/1", "http://b.test/2"])
    for crawlid in ("b", "without-filter"):
        start_crawl(redis, crawlid, [])
        redis.sadd(keys.FINISH_CANDIDATES, crawlid)
    assert all(redis.ttl(key) == -1 for key in bloom.key_names())
    assert sorted(Finisher(redis, lambda event: None, crawl_ttl=3600).check(T0)) == ["b", "without-filter"]
    assert all(0 < redis.ttl(key) <= 3600 for key in bloom.key_names())
    assert not redis.exists(keys.bloom_meta(crawl_namespace("without-filter")))  # nothing created
