"""The Redis monitor on real Redis (single and Cluster), Kafka and ZooKeeper: info, stats, site config, stop, and the
request streams' hand-over (one monitor per request, taken over from a dead one, kept while a plugin runs long)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from deploy.procs import wait_for
from messaging import clients, keys
from messaging.answers import AnswerWaiter
from messaging.kafka_monitor.batch import REQUEST_STORE
from messaging.kafka_monitor.monitor import topic_partitions
from messaging.redis_monitor.monitor import GROUP, RedisMonitor
from messaging.redis_monitor.plugins import Plugin
from messaging.settings import load
from messaging.siteconfig import SitePaths, read_site
from messaging.stats import Stats
from messaging.tasks import CrawlFields, CrawlState, Task, push_seeds, queue_score
from messaging.validation import canonical_json

pytestmark = pytest.mark.integration


def task(url: str, crawlid: str = "big") -> Task:
    return Task(url=url, crawlid=crawlid, spider_type="list", userid="alice")


def populate(redis: Any) -> None:
    """Crawl "big": 3 tasks in seeds (2 domains), 2 queued at job-1, 1 leased at job-2; crawl "small" alongside."""
    push_seeds(redis, [task("http://a.example.com/1"), task("http://www.a.example.com/2"),
                       task("http://b.example.org/3"), task("http://a.example.com/9", "small")])
    redis.zadd(keys.queue("job-1", "example.com"), {task("http://a.example.com/4").encode(): queue_score(100),
                                                     task("http://a.example.com/5").encode(): queue_score(100),
                                                     task("http://a.example.com/6", "small").encode(): 1})
    redis.zadd(keys.inflight("job-2", "example.org"), {task("http://b.example.org/7").encode(): 2e9})
    redis.zadd(keys.queue("job-2", "example.org"), {'{"crawlid":"big", not a task': 1})
    redis.hset(keys.crawl("big"), mapping={CrawlFields.STATE: CrawlState.RUNNING, CrawlFields.USERID: "alice",
                                           CrawlFields.SPIDER_TYPE: "list", CrawlFields.ITEMS: 5,
                                           CrawlFields.PAGES: 7, CrawlFields.ENQUEUED: 12})


KIND_OF_KEY = {"info": "info", "statsrequest": "stats", "zk": "site", "stop": "stop"}


def stream_of(key: str) -> str:
    return keys.request_stream(KIND_OF_KEY[key.split(":", 1)[0]])


def leave_request(redis: Any, key: str, request: dict[str, Any]) -> None:
    """As the Kafka monitor leaves it: the request key and its stream entry, in one call."""
    assert int(redis.eval(REQUEST_STORE.source, 2, key, stream_of(key), canonical_json(request), 3600)) == 1


def pending(redis: Any, key: str) -> list[dict[str, Any]]:
    return redis.xpending_range(stream_of(key), GROUP, "-", "+", 10)


@pytest.fixture
def monitor(cf: Any) -> Any:
    clients.ensure_topics(cf.settings, topic_partitions(cf.settings))
    monitors: list[RedisMonitor] = []

    def make(isolated: Any = cf, plugins: list[Plugin] | None = None) -> RedisMonitor:
        created = RedisMonitor(isolated.settings, redis=isolated.redis(), plugins=plugins)
        created.connect()
        monitors.append(created)
        return created

    yield make
    for created in monitors:
        created.close()


def ask(cf: Any, monitor: RedisMonitor, key: str, request: dict[str, Any]) -> dict[str, Any]:
    with AnswerWaiter(cf.settings) as waiter:
        leave_request(monitor.redis, key, request)
        assert monitor.run_once() == 1
        answer = waiter.wait([request["uuid"]], 20)[request["uuid"]]
    assert not monitor.redis.exists(key), "the request key is deleted once answered"
    assert monitor.redis.xlen(stream_of(key)) == 0 and not pending(monitor.redis, key), "the entry is gone"
    return answer


@pytest.mark.parametrize("cluster", [False, pytest.param(True, marks=pytest.mark.cluster)])
def test_info_counts_a_crawls_tasks_everywhere(cf, monitor, request, cluster):
    isolated = request.getfixturevalue("cf_cluster") if cluster else cf
    running = monitor(isolated)
    populate(running.redis)
    info = {"action": "info", "userid": "alice", "crawlid": "big", "uuid": "i-1"}
    answer = ask(isolated, running, keys.info_request("alice", "big", "i-1"), info)
    assert answer["status"] == "ok" and answer["kind"] == "info" and answer["userid"] == "alice"
    assert (answer["pending"], answer["queued"], answer["leased"]) == (3, 2, 1)
    assert answer["total_domains"] == 2
    assert answer["domains"] == {"example.com": {"pending": 2, "queued": 2, "leased": 0, "parked": 0},
                                 "example.org": {"pending": 1, "queued": 0, "leased": 1, "parked": 0}}
    assert answer["jobs"] == {"job-1": {"queued": 2, "leased": 0, "parked": 0, "domains": ["example.com"]},
                              "job-2": {"queued": 0, "leased": 1, "parked": 0, "domains": ["example.org"]}}
    assert (answer["state"], answer["items"], answer["pages"], answer["enqueued"]) == ("running", 5, 7, 12)
    assert answer["items_in_mongodb"] == 0
    assert Stats(running.redis, "redis-monitor").value("info", "lifetime") == 1


@pytest.mark.parametrize("cluster", [False, pytest.param(True, marks=pytest.mark.cluster)])
def test_stop_purges_the_crawl_and_marks_it_stopped(cf, monitor, request, cluster):
    isolated = request.getfixturevalue("cf_cluster") if cluster else cf
    running = monitor(isolated)
    redis = running.redis
    populate(redis)
    stop = {"action": "stop", "userid": "alice", "crawlid": "big", "uuid": "s-1"}
    answer = ask(isolated, running, keys.stop_request("alice", "big", "s-1"), stop)
    assert answer["status"] == "ok"
    assert answer["purged"] == {"seeds": 3, "queues": 2, "leases": 1, "parked": 0} and answer["total"] == 6
    assert redis.hget(keys.crawl("big"), CrawlFields.STATE) == b"stopped"
    assert 0 < redis.ttl(keys.crawl("big")) <= isolated.settings.crawl_ttl
    remaining = [Task.decode(member).crawlid for member in redis.zrange(keys.SEEDS, 0, -1)]
    assert remaining == ["small"]
    assert redis.zcard(keys.queue("job-1", "example.com")) == 1  # the other crawl's task stays
    assert redis.zcard(keys.inflight("job-2", "example.org")) == 0


def test_site_changes_go_to_zookeeper_with_compare_and_set(cf, monitor):
    running = monitor()
    zk = cf.zk()
    paths = SitePaths(cf.settings.zk_root)
    rate = {"action": "rate", "userid": "alice", "domain": "www.Example.co.uk", "rate": 4, "window": 30, "uuid": "r1"}
    answer = ask(cf, running, keys.zk_request("rate", "www.example.co.uk", "alice", "r1"), rate)
    assert answer["domain"] == "example.co.uk" and answer["path"] == paths.site("example.co.uk")
    listed = {"action": "blacklist", "userid": "alice", "domain": "example.co.uk", "uuid": "b1"}
    ask(cf, running, keys.zk_request("blacklist", "example.co.uk", "alice", "b1"), listed)
    config = read_site(zk, paths, "example.co.uk")
    assert (config.rate, config.window, config.blacklisted) == (4, 30.0, True)  # neither change lost the other
    assert json.loads(zk.get(paths.site("example.co.uk"))[0]) == {"rate": 4, "window": 30.0, "blacklisted": True}
    removed = {"action": "rate-remove", "userid": "alice", "domain": "example.co.uk", "uuid": "r2"}
    answer = ask(cf, running, keys.zk_request("rate-remove", "example.co.uk", "alice", "r2"), removed)
    assert answer["site"] == {"rate": None, "window": None, "blacklisted": True}
    unlisted = {"action": "blacklist-remove", "userid": "alice", "domain": "example.co.uk", "uuid": "b2"}
    ask(cf, running, keys.zk_request("blacklist-remove", "example.co.uk", "alice", "b2"), unlisted)
    assert not read_site(zk, paths, "example.co.uk").blacklisted
    # "host": true configures the host alone (a crawl partitioned by host applies it), not its registered domain
    hosted = {"action": "rate", "userid": "alice", "domain": "API.example.co.uk.", "rate": 120, "window": 60,
              "host": True, "uuid": "h1"}
    answer = ask(cf, running, keys.zk_request("rate", "api.example.co.uk", "alice", "h1"), hosted)
    assert answer["domain"] == "api.example.co.uk" and answer["path"] == paths.site("api.example.co.uk")
    assert read_site(zk, paths, "api.example.co.uk").rate == 120 and read_site(zk, paths, "example.co.uk").rate is None


def test_stats_report_counters_alive_hosts_and_crawler_statuses(cf, monitor):
    running = monitor()
    redis = running.redis
    kafka = Stats(redis, "kafka-monitor")
    kafka.incr("crawl", 3)
    kafka.heartbeat("10.1.2.3")
    crawler = Stats(redis, "crawler")
    crawler.incr("list:200", 2)
    crawler.incr("universal:200", 1)
    crawler.incr("list:404")
    push_seeds(redis, [task("http://a.example.com/1")])
    request = {"stats": "all", "userid": "alice", "uuid": "st-1"}
    answer = ask(cf, running, keys.stats_request("alice", "all", "st-1"), request)
    modules = answer["modules"]
    assert set(modules) >= {"kafka-monitor", "redis-monitor", "crawler", "master"}
    assert modules["kafka-monitor"]["plugins"]["crawl"]["60"] == 3
    assert modules["kafka-monitor"]["plugins"]["crawl"]["lifetime"] == 3
    assert modules["kafka-monitor"]["alive"]["10.1.2.3"]["expires_in"] > 0
    spider_types = modules["crawler"]["spider_types"]
    assert spider_types["list"]["200"]["60"] == 2 and spider_types["list"]["404"]["300"] == 1
    assert spider_types["all"]["200"]["60"] == 3  # summed over spider types (seed table 4-6)
    assert modules["master"]["seeds"] == 1
    only = ask(cf, running, keys.stats_request("alice", "crawler", "st-2"),
               {"stats": "crawler", "userid": "alice", "uuid": "st-2"})
    assert list(only["modules"]) == ["crawler"]


def test_a_request_read_by_a_monitor_that_died_is_taken_over_after_the_ttl(cf, monitor):
    clients.ensure_topics(cf.settings, topic_partitions(cf.settings))
    ttl = 1
    first = monitor()
    second = RedisMonitor(load(cf.with_env(CRAWLFLEET_MONITOR_LOCK_TTL=str(ttl))), redis=cf.redis())
    key = keys.stats_request("alice", "master", "l-1")
    try:
        second.connect()
        leave_request(first.redis, key, {"stats": "master", "userid": "alice", "uuid": "l-1"})
        entries = first._read(None)  # the first monitor reads it, then stalls (or dies) before answering
        assert len(entries) == 1
        read_at = time.monotonic()
        assert second.run_once() == 0, "a request pending at a live monitor was taken"
        assert first.redis.exists(key) and pending(first.redis, key)[0]["consumer"] == first.token.encode()
        with AnswerWaiter(cf.settings) as waiter:
            wait_for(lambda: second.run_once() == 1, 20, "the other monitor to take the request over", 0.2)
            assert time.monotonic() - read_at >= ttl, "taken over before the TTL"
            assert waiter.wait(["l-1"], 20)["l-1"]["status"] == "ok"
        assert not first.redis.exists(key) and first.redis.xlen(stream_of(key)) == 0 and not pending(first.redis, key)
        assert second.run_once() == 0
        assert first.handle_entry(*entries[0]) == 0, "the stalled monitor answered a request taken over from it"
    finally:
        second.close()


def test_a_redelivered_request_still_waiting_is_stored_once(cf):
    redis = cf.redis()
    key = keys.info_request("alice", "x", "d-1")
    request = canonical_json({"action": "info", "userid": "alice", "crawlid": "x", "uuid": "d-1"})
    assert int(redis.eval(REQUEST_STORE.source, 2, key, stream_of(key), request, 3600)) == 1
    assert int(redis.eval(REQUEST_STORE.source, 2, key, stream_of(key), request, 3600)) == 0
    assert redis.xlen(stream_of(key)) == 1 and 0 < redis.ttl(key) <= 3600


def test_a_failing_plugin_answers_with_an_error(cf, monitor):
    class Broken(Plugin):
        name, kind = "broken", "info"

        def handle(self, key: str, request: dict[str, Any], context: Any) -> dict[str, Any]:
            raise RuntimeError("the disk is on fire")

    running = monitor(plugins=[Broken()])
    answer = ask(cf, running, keys.info_request("alice", "x", "e-1"),
                 {"action": "info", "userid": "alice", "crawlid": "x", "uuid": "e-1"})
    assert answer["status"] == "error" and "the disk is on fire" in answer["reason"]
    assert Stats(running.redis, "redis-monitor").value("errors", "lifetime") == 1


def test_a_plugin_running_past_the_lock_ttl_keeps_its_request(cf):
    """The request is renewed while the plugin runs: each time its entry has been idle for longer than the TTL (as
    Redis counts it: set with XCLAIM's IDLE, not waited for), the next renewal makes it the first monitor's again,
    and another monitor cannot take it."""
    clients.ensure_topics(cf.settings, topic_partitions(cf.settings))
    ttl = 1
    settings = load(cf.with_env(CRAWLFLEET_MONITOR_LOCK_TTL=str(ttl)))
    started, finish = threading.Event(), threading.Event()

    class Slow(Plugin):
        name, kind = "slow", "info"

        def handle(self, key: str, request: dict[str, Any], context: Any) -> dict[str, Any]:
            started.set()
            assert finish.wait(30), "the test never let the plugin finish"
            return {"slow": True}

    class Quick(Slow):
        def handle(self, key: str, request: dict[str, Any], context: Any) -> dict[str, Any]:
            return {"quick": True}

    first = RedisMonitor(settings, redis=cf.redis(), plugins=[Slow()])
    second = RedisMonitor(settings, redis=cf.redis(), plugins=[Quick()])
    key = keys.info_request("alice", "x", "slow-1")
    handled: list[int] = []
    worker = threading.Thread(target=lambda: handled.append(first.run_once()))
    try:
        first.connect()
        second.connect()
        with AnswerWaiter(cf.settings) as waiter:
            leave_request(first.redis, key, {"action": "info", "userid": "alice", "crawlid": "x", "uuid": "slow-1"})
            worker.start()
            assert started.wait(20), "the plugin never started"
            entry = pending(first.redis, key)[0]["message_id"]
            for _ in range(3):  # three TTLs without a renewal, as far as Redis can tell: renewed each time
                first.redis.xclaim(stream_of(key), GROUP, first.token, 0, [entry], idle=3 * ttl * 1000, justid=True)
                wait_for(lambda: pending(first.redis, key)[0]["time_since_delivered"] < ttl * 1000, 5 * ttl,
                         "the renewer to reset the entry's idle time")
            assert second.run_once() == 0, "another monitor took a request whose plugin still runs"
            owner = pending(first.redis, key)[0]
            assert owner["consumer"] == first.token.encode(), "the request is still the first monitor's"
            assert owner["time_since_delivered"] < ttl * 1000, "its idle time is reset while the plugin runs"
            finish.set()
            worker.join(30)
            assert handled == [1]
            assert waiter.wait(["slow-1"], 20)["slow-1"]["slow"] is True
        assert not first.redis.exists(key) and not pending(first.redis, key)
    finally:
        finish.set()
        if worker.is_alive():
            worker.join(30)
        first.close()
        second.close()
