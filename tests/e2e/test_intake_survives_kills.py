"""Chaos: while requests stream in, kill -9 a Kafka monitor, the leading master and Redis (restarted from its AOF) in
turn, with hostile requests among the valid ones. At the end every valid request is in Redis exactly once, every
hostile one was refused or dead-lettered, and dispatch is running."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path

import pytest
import redis as redis_py

from deploy.procs import free_port, kill_hard, port_free, wait_for
from deploy.services.redis import redis_server_bin
from frontier.registry import WorkerInfo, WorkerRegistry
from messaging import clients, keys
from messaging.kafka_monitor.monitor import topic_partitions
from messaging.settings import load
from messaging.siteconfig import Rate, SitePaths, write_defaults
from messaging.tasks import Task, push_seeds
from tests.plugins.fleet import leader_of
from tests.plugins.services import read_topic

pytestmark = pytest.mark.e2e

RULE = {"first_page_xpath": {"list_from": "//li", "title": "a/text()"}}
PHASE = 300  # valid requests per phase
HOSTILE = [
    b"{not json",
    json.dumps({"userid": "eve", "crawlid": "evil", "spider_type": "list", "rule": RULE,
                "url": "http://a{b}.com/"}).encode(),
    json.dumps({"userid": "eve", "crawlid": "evil\n", "spider_type": "list", "rule": RULE,
                "url": "http://evil.example.com/newline"}).encode(),
    json.dumps({"userid": "eve", "crawlid": "evil", "spider_type": "universal", "url": "http://evil.example.com/re",
                "rule": {"rules": [{"allow": "a{4294967296}"}]}}).encode(),
    json.dumps({"userid": "eve", "crawlid": "evil", "spider_type": "universal", "url": "http://evil.example.com/la",
                "rule": {"rules": [{"allow": "(?<=a)b"}]}}).encode(),
    json.dumps([1, 2, 3]).encode(),
]


def valid(i: int) -> bytes:
    return json.dumps({"userid": "ops", "crawlid": f"chaos-{i % 5}", "spider_type": "list", "rule": RULE,
                       "url": f"http://site{i % 17}.example.com/page/{i}"}).encode()


def test_the_fleet_survives_kills_restarts_and_hostile_requests(cf, procs, tmp_path: Path) -> None:
    # Redis of this test only, persisted (AOF, fsync always) so that a kill -9 and a restart lose nothing
    port, data = free_port(), tmp_path / "redis"
    data.mkdir()
    redis_argv = [redis_server_bin(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data), "--save", "",
                  "--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no", "--logfile", ""]
    env = cf.with_env(CRAWLFLEET_REDIS_URL=f"redis://127.0.0.1:{port}/0", CRAWLFLEET_KAFKA_GROUP=cf.name,
                      CRAWLFLEET_HEARTBEAT_TTL="60", CRAWLFLEET_DISPATCH_INITIAL_RATE="100000",
                      CRAWLFLEET_KAFKA_MONITOR_BATCH="100", CRAWLFLEET_FINISH_INTERVAL="0.5")
    settings = load(env)
    redis_proc = procs.start(redis_argv, env, name="redis", service=True)
    redis = clients.redis_client(settings)
    wait_for(redis.ping, 20, "the test's Redis")
    clients.ensure_topics(settings, topic_partitions(settings))

    # 17 sites, every task dispatched to the one worker: the sites are fast (at the default rate each site's share of
    # the queues, master.shares, would keep most of its tasks in seeds)
    write_defaults(cf.zk(), SitePaths(cf.settings.zk_root), Rate(600_000, 60))
    registry = WorkerRegistry(redis)
    registry.register(WorkerInfo("w", "list", "127.0.0.1", "test", 1))
    stop = threading.Event()

    def heartbeat() -> None:  # a worker that stays alive through the Redis restart and takes nothing
        while not stop.wait(0.5):
            try:
                registry.heartbeat("w")
            except redis_py.exceptions.RedisError:
                pass

    threading.Thread(target=heartbeat, daemon=True).start()
    producer = clients.kafka_producer(settings, value_serializer=None, linger_ms=5)
    sent: list[str] = []

    def stream(first: int, count: int) -> None:
        for i in range(first, first + count):
            producer.send(settings.topic_incoming, valid(i))
            sent.append(json.loads(valid(i))["url"])
            if i % 50 == 0:
                producer.send(settings.topic_incoming, HOSTILE[(i // 50) % len(HOSTILE)])
        producer.flush(timeout=30)

    def in_redis() -> Counter[str]:
        found: Counter[str] = Counter()
        for key in [keys.SEEDS, *redis.scan_iter(match=keys.queue_pattern(), count=1000)]:
            found.update(Task.decode(member).url for member in redis.zrange(key, 0, -1))
        return found

    try:
        masters = {name: procs.crawlfleet("master", "--id", name, env=env, name=f"master-{name}")
                   for name in ("m1", "m2")}
        monitors = [procs.crawlfleet("kafka-monitor", env=env, name=f"kafka-monitor-{n}") for n in (1, 2)]
        procs.crawlfleet("redis-monitor", env=env)
        for monitor in monitors:
            procs.wait_log(monitor, f"partitions assigned: {settings.topic_incoming}[", 60)
        wait_for(lambda: leader_of(procs, masters), 30, "a leading master")

        # a poison task as a worker could push it (a link found on a page): dead-lettered, not a stalled master
        push_seeds(redis, [Task("http://x{y}.example.com/", "chaos-0", "list", userid="ops")])

        stream(0, PHASE)
        wait_for(lambda: len(in_redis()) >= PHASE // 3, 60, "requests arriving")
        kill_hard(monitors[0].pid)  # 1. a Kafka monitor

        stream(PHASE, PHASE)
        leader = leader_of(procs, masters)
        kill_hard(masters.pop(leader).pid)  # 2. the leading master
        survivor = next(iter(masters.values()))
        procs.wait_log(survivor, "leading the dispatch with epoch", 30)

        stream(2 * PHASE, PHASE)
        wait_for(lambda: len(in_redis()) >= 2 * PHASE, 60, "the second phase arriving")
        kill_hard(redis_proc.pid)  # 3. Redis, restarted from its AOF on the same port
        wait_for(lambda: port_free(port), 20, "Redis's port to be released")
        stream(3 * PHASE, PHASE // 2)  # arrives while Redis is down
        procs.start(redis_argv, env, name="redis-restarted", service=True)
        wait_for(redis.ping, 20, "the restarted Redis")

        total = 3 * PHASE + PHASE // 2
        wait_for(lambda: len(in_redis()) >= total, 90, f"all {total} valid requests in Redis")
        found = in_redis()
        assert sorted(found) == sorted(sent) and len(sent) == total  # each one, and nothing hostile
        assert max(found.values()) == 1  # exactly once

        # dispatch is running: new requests reach the worker's queues
        wait_for(lambda: redis.zcard(keys.SEEDS) == 0, 60, "the backlog dispatched")
        stream(total, 20)
        wait_for(lambda: redis.zcard(keys.SEEDS) == 0 and len(in_redis()) == total + 20, 60,
                 "dispatch after the chaos")
        assert int(redis.hget(keys.DEAD_LETTER_COUNTS, "chaos-0") or 0) == 1
        rejected = read_topic(settings, settings.topic_failed, 1 + len(HOSTILE), timeout=30)
        reasons = " ".join(record["reason"] for record in rejected)
        assert "x{y}.example.com" in reasons and "a{b}.com" in reasons
        assert all("unreadable" not in record["reason"] for record in rejected)
    finally:
        stop.set()
        producer.close()
        redis.close()
