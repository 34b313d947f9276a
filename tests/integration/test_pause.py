"""Pause and resume on real Redis (and Kafka for the answers): where a paused crawl's tasks wait, who parks them,
who puts them back, and who leaves a paused crawl alone (issue 42, item 4; messaging.pause)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from frontier.client import FrontierClient, add_to_index
from frontier.config_watch import StaticSiteConfig
from frontier.politeness import Politeness
from frontier.registry import WorkerInfo, WorkerRegistry
from master.dispatcher import DispatchConfig, Dispatcher
from master.finisher import Finisher
from master.requeue import Requeuer
from master.stalls import StallWatch
from messaging import clients, keys, pause
from messaging.answers import AnswerWaiter
from messaging.clock import RedisClock
from messaging.kafka_monitor.batch import REQUEST_STORE
from messaging.kafka_monitor.monitor import topic_partitions
from messaging.redis_monitor.monitor import RedisMonitor
from messaging.redis_monitor.plugins import Context
from messaging.redis_monitor.plugins.stop import StopPlugin
from messaging.siteconfig import Rate
from messaging.tasks import CrawlFields, CrawlState, Task, push_seeds
from messaging.validation import canonical_json
from spiders.dupefilter import BloomDupeFilter
from spiders.worker.commit import Committer
from spiders.worker.crawls import CrawlCatalog
from spiders.worker.feed import FeedConfig, TaskFeed

pytestmark = pytest.mark.integration
DOMAIN = "site.test"
JOB = "pause-job"


def crawl(redis: Any, crawlid: str, state: str = CrawlState.RUNNING) -> None:
    redis.hset(keys.crawl(crawlid), mapping={CrawlFields.STATE: state, CrawlFields.SPIDER_TYPE: "list",
                                             CrawlFields.USERID: "u", CrawlFields.CREATED: 1,
                                             CrawlFields.RULE: json.dumps({"first_page_xpath": {"list_from": "//li"}})})
    redis.sadd(keys.CRAWLS, crawlid)


def tasks(crawlid: str, count: int, site: str = DOMAIN) -> list[Task]:
    return [Task(url=f"http://{site}/{crawlid}/{n}", crawlid=crawlid, spider_type="list") for n in range(count)]


def pending_everywhere(redis: Any, crawlid: str, domains: tuple[str, ...] = (DOMAIN,)) -> int:
    return int(redis.hget(keys.PENDING_SEEDS, crawlid) or 0) + sum(
        int(redis.hget(keys.pending_domain(domain), crawlid) or 0) for domain in domains)


@pytest.mark.parametrize("cluster", [False, pytest.param(True, marks=pytest.mark.cluster)])
def test_a_paused_crawl_waits_parked_out_of_seeds_while_the_dispatcher_serves_the_others(
        cf: Any, request: pytest.FixtureRequest, cluster: bool) -> None:
    cf = request.getfixturevalue("cf_cluster") if cluster else cf
    redis = cf.redis()
    for crawlid in ("p", "o"):
        crawl(redis, crawlid)
    push_seeds(redis, tasks("p", 5))  # the paused crawl's tasks come first in seeds
    push_seeds(redis, tasks("o", 3))
    scores = {member: score for member, score in redis.zrange(keys.SEEDS, 0, -1, withscores=True)}
    change = pause.pause(redis, "p")
    assert change.changed and change.state == "paused" and change.moved == 5 and change.since
    assert redis.hget(keys.crawl("p"), CrawlFields.STATE) == b"paused"
    assert redis.zcard(keys.parked_seeds("p")) == 5 and redis.zcard(keys.SEEDS) == 3
    assert int(redis.hget(keys.PENDING_SEEDS, "p")) == 5  # still counted: nothing is lost, it cannot finish
    assert pause.pause(redis, "p").changed is False  # again: nothing changes, it says since when
    # a task of the paused crawl pushed later (a child of a page that was in flight) is parked by the dispatcher
    push_seeds(redis, tasks("p", 6)[5:])
    WorkerRegistry(redis).register(WorkerInfo(JOB, "list", "10.0.0.1", "host", 1))
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), DispatchConfig(initial_rate=600))
    result = dispatcher.round(RedisClock(redis).now())
    assert result.total == 3 and result.parked == 1  # only the other crawl's tasks took the worker's room
    assert {Task.decode(m).crawlid for m in redis.zrange(keys.queue(JOB, DOMAIN), 0, -1)} == {"o"}
    assert redis.zcard(keys.SEEDS) == 0 and redis.zcard(keys.parked_seeds("p")) == 6
    resumed = pause.resume(redis, "p")
    assert resumed.changed and resumed.state == "running" and resumed.moved == 6
    assert redis.hget(keys.crawl("p"), CrawlFields.STATE) == b"running"
    assert not redis.hexists(keys.crawl("p"), CrawlFields.PAUSED) and not redis.hexists(keys.PAUSED, "p")
    back = {member: score for member, score in redis.zrange(keys.SEEDS, 0, -1, withscores=True)}
    assert all(back[member] == score for member, score in scores.items() if member in back)  # their old places
    assert len(back) == 6 and int(redis.hget(keys.PENDING_SEEDS, "p")) == 6
    assert redis.sismember(keys.FINISH_CANDIDATES, "p")
    with pytest.raises(pause.NotPausable, match="no such crawl"):
        pause.pause(redis, "nothing")


def worker(cf: Any, listener: Any = None) -> TaskFeed:
    redis = cf.redis()
    frontier = FrontierClient(redis, JOB, "list", "10.0.0.1", Politeness(StaticSiteConfig(Rate(10_000, 60))))
    catalog = CrawlCatalog(redis, refresh_seconds=60)
    committer = Committer(redis, frontier, BloomDupeFilter(redis, cf.settings), catalog)
    return TaskFeed(WorkerInfo(JOB, "list", "10.0.0.1", "host", 1), frontier, WorkerRegistry(redis), catalog,
                    committer, FeedConfig(prefetch=4), listener)


def land(redis: Any, queued: list[Task]) -> None:
    """As the dispatcher lands tasks in the job's queue: queue, pending count, domain set, ready index."""
    redis.sadd(keys.job_domains(JOB), DOMAIN)
    redis.zadd(keys.queue(JOB, DOMAIN), {task.encode(): n for n, task in enumerate(queued)})
    for task in queued:
        redis.hincrby(keys.pending_domain(DOMAIN), task.crawlid, 1)
    add_to_index(redis, JOB, "list", {DOMAIN: len(queued)})


@pytest.mark.parametrize("cluster", [False, pytest.param(True, marks=pytest.mark.cluster)])
def test_a_worker_hands_back_what_it_holds_of_a_paused_crawl_and_takes_it_up_when_resumed(
        cf: Any, request: pytest.FixtureRequest, cluster: bool) -> None:
    """The feed's side (spiders.worker.pausing), its crank turned by the test: the leases it took and has not handed
    out are parked with their hits withdrawn, what its queue holds is parked, its scheduler is told; a task taken
    later is parked unfetched; the other crawl on the same site goes on; resumed, everything is back in the queue."""
    cf = request.getfixturevalue("cf_cluster") if cluster else cf
    redis = cf.redis()
    for crawlid in ("p", "o"):
        crawl(redis, crawlid)
    paused_told: list[set[str]] = []
    feed = worker(cf, SimpleNamespace(tasks_ready=lambda: None, crawls_paused=paused_told.append))
    feed.register()
    land(redis, [t for pair in zip(tasks("p", 6), tasks("o", 6), strict=True) for t in pair])  # interleaved
    assert feed._fill() and len(feed.ready) == 4  # two of each crawl, leased
    throttle = keys.throttle_type("list", DOMAIN)
    assert redis.zcard(throttle) == 4
    pause.pause(redis, "p")
    feed.crawl_changed("p", "paused")  # as the block listener's thread hears it on crawls:states
    feed.pausing.turn()
    assert paused_told == [{"p"}]
    assert [leased.lease.task.crawlid for leased in feed.ready] == ["o", "o"]
    parked = feed.frontier.parking.parked_tasks(DOMAIN)
    assert sorted(t.url for t in parked) == sorted(t.url for t in tasks("p", 6))  # 2 leased + 4 queued
    assert redis.zcard(keys.inflight(JOB, DOMAIN)) == 2 and redis.zcard(throttle) == 2  # their hits withdrawn
    assert pending_everywhere(redis, "p") == 6 and pending_everywhere(redis, "o") == 6  # nothing lost
    # a task of the paused crawl landing late (staged before the pause) is taken and parked, never handed out
    late = Task(url=f"http://{DOMAIN}/p/late", crawlid="p", spider_type="list")
    land(redis, [late])
    while feed.ready:
        feed.pop()
    feed.unsent.clear()  # the other crawl's requests went out
    assert feed._fill()
    assert {leased.lease.task.crawlid for leased in feed.ready} == {"o"}
    assert late.encode() in {t.encode() for t in feed.frontier.parking.parked_tasks(DOMAIN)}
    # the scheduler hands back a request it held (TaskFeed.hand_back): parked on the next pass
    feed.pause(True)  # storage back-pressure: nothing more is taken while we look
    pause.resume(redis, "p")
    feed.crawl_changed("p", "running")
    feed.pausing.turn()
    assert not feed.frontier.parking.parked_tasks(DOMAIN)
    queued = [Task.decode(m).crawlid for m in redis.zrange(keys.queue(JOB, DOMAIN), 0, -1)]
    assert queued.count("p") == 7 and redis.zscore(keys.ready(JOB), DOMAIN) is not None
    assert pending_everywhere(redis, "p") == 7


def test_a_lease_handed_back_by_the_scheduler_is_parked_and_a_retired_jobs_parked_tasks_go_back_to_seeds(
        cf: Any) -> None:
    redis = cf.redis()
    crawl(redis, "p")
    feed = worker(cf)
    feed.register()
    land(redis, tasks("p", 3))
    assert feed._fill()
    leased = feed.pop()
    assert leased is not None and leased.slot is not None
    pause.pause(redis, "p")
    feed.hand_back(leased.lease, leased.slot.hit)  # the scheduler's request, held for its slot
    feed.crawl_changed("p", "paused")
    feed.pausing.turn()  # the state is read: the rest is parked too
    assert len(feed.frontier.parking.parked_tasks(DOMAIN)) == 3 and leased.member not in feed.held
    assert not feed.unsent and redis.zcard(keys.inflight(JOB, DOMAIN)) == 0
    # the worker dies: the master puts its parked tasks back into seeds, where the dispatcher parks them again
    epoch = int(redis.incr(keys.MASTER_EPOCH))
    WorkerRegistry(redis).retire(JOB)
    assert Requeuer(redis, epoch).requeue(JOB) == 3
    assert redis.zcard(keys.SEEDS) == 3 and pending_everywhere(redis, "p") == 3
    WorkerRegistry(redis).register(WorkerInfo("pause-job-2", "list", "10.0.0.1", "host", 2))  # its successor
    Dispatcher(redis, epoch, DispatchConfig(initial_rate=600)).round(RedisClock(redis).now())
    assert redis.zcard(keys.parked_seeds("p")) == 3 and redis.zcard(keys.SEEDS) == 0


def test_a_lease_handed_back_as_the_resume_is_heard_goes_back_to_the_queue(cf: Any) -> None:
    """The scheduler handed a lease back while the feed was hearing the resume: it is not left parked."""
    redis = cf.redis()
    crawl(redis, "p")
    feed = worker(cf)
    feed.register()
    land(redis, tasks("p", 2))
    assert feed._fill()
    leased = feed.pop()
    assert leased is not None
    pause.pause(redis, "p")
    feed.crawl_changed("p", "paused")
    feed.pausing.turn()
    pause.resume(redis, "p")
    feed.crawl_changed("p", "running")
    feed.pausing.turn()  # taken up: the parked task is back in the queue
    feed.hand_back(leased.lease)  # ... and then the scheduler's hand-back of the popped lease arrives
    feed.pausing.turn()
    assert not feed.frontier.parking.parked_tasks(DOMAIN) and redis.zcard(keys.queue(JOB, DOMAIN)) == 2
    assert pending_everywhere(redis, "p") == 2


def test_a_stop_purges_a_paused_crawls_parked_tasks_and_a_new_request_keeps_it_paused(cf: Any) -> None:
    redis = cf.redis()
    crawl(redis, "p")
    push_seeds(redis, tasks("p", 2))
    redis.zadd(keys.parked(JOB, DOMAIN), {task.encode(): 1 for task in tasks("p", 5)[2:]})
    pause.pause(redis, "p")
    from messaging.kafka_monitor.plugins.crawl import UPSERT, crawl_fields

    request = {"crawlid": "p", "userid": "u", "spider_type": "list", "url": f"http://{DOMAIN}/again",
               "rule": {"first_page_xpath": {"list_from": "//li"}}}
    UPSERT.on(redis)(keys=[keys.crawl("p")], args=[CrawlFields.STATE, CrawlState.STOPPED, CrawlState.RUNNING,
                                                   CrawlFields.CREATED, CrawlFields.URL, request["url"],
                                                   CrawlState.PAUSED, *crawl_fields(request)])
    assert redis.hget(keys.crawl("p"), CrawlFields.STATE) == b"paused"  # its new start URL will wait, parked
    answer = StopPlugin().handle("stop:x", {"crawlid": "p"}, Context(redis, cf.settings))
    assert answer["purged"] == {"seeds": 0, "queues": 0, "leases": 0, "parked": 5} and answer["total"] == 5
    assert not redis.exists(keys.parked_seeds("p")) and not redis.exists(keys.parked(JOB, DOMAIN))
    assert redis.hget(keys.crawl("p"), CrawlFields.STATE) == b"stopped" and not redis.hexists(keys.PAUSED, "p")
    with pytest.raises(pause.NotPausable, match="stopped"):
        pause.resume(redis, "p")


def test_the_finisher_and_the_stall_watch_leave_a_paused_crawl_alone_until_it_is_resumed(cf: Any) -> None:
    redis = cf.redis()
    crawl(redis, "p")
    redis.hset(keys.crawl_totals("p"), mapping={"pages": 3, "items": 3})
    pause.pause(redis, "p")  # its last tasks finished as it was paused: nothing is left anywhere
    redis.sadd(keys.FINISH_CANDIDATES, "p")
    events: list[dict[str, Any]] = []
    finisher = Finisher(redis, events.append)
    now = RedisClock(redis).now()
    assert finisher.check(now) == [] and not events
    stalled: list[Any] = []
    watch = StallWatch(redis, 10, lambda *event: stalled.append(event))
    assert watch.check(now) == [] and watch.check(now + 3600) == [] and not stalled
    pause.resume(redis, "p")  # a resumed crawl with nothing left finishes
    assert finisher.check(now + 1) == ["p"] and events[0]["pages"] == 3


def answered(cf: Any, monitor: RedisMonitor, kind: str, crawlid: str, uuid: str) -> dict[str, Any]:
    key = keys.pause_request("u", crawlid, uuid) if kind == "pause" else keys.resume_request("u", crawlid, uuid)
    request = {"action": kind, "userid": "u", "crawlid": crawlid, "uuid": uuid}
    with AnswerWaiter(cf.settings) as waiter:
        assert int(monitor.redis.eval(REQUEST_STORE.source, 2, key, keys.request_stream(kind),
                                      canonical_json(request), 3600)) == 1
        assert monitor.run_once() == 1
        return waiter.wait([uuid], 20)[uuid]


def test_the_redis_monitor_answers_pause_and_resume_requests(cf: Any) -> None:
    redis = cf.redis()
    clients.ensure_topics(cf.settings, topic_partitions(cf.settings))
    crawl(redis, "p")
    crawl(redis, "done", CrawlState.FINISHED)
    push_seeds(redis, tasks("p", 2))
    monitor = RedisMonitor(cf.settings, redis=cf.redis())  # the default plugins: the registry's kinds
    monitor.connect()
    try:
        first = answered(cf, monitor, "pause", "p", "p-1")
        assert (first["status"], first["kind"], first["state"], first["changed"], first["parked"]) == (
            "ok", "pause", "paused", True, 2)
        again = answered(cf, monitor, "pause", "p", "p-2")
        assert again["changed"] is False and again["since"] == first["since"]
        refused = answered(cf, monitor, "pause", "done", "p-3")
        assert refused["status"] == "rejected" and "finished" in refused["reason"]
        resumed = answered(cf, monitor, "resume", "p", "r-1")
        assert (resumed["state"], resumed["changed"], resumed["parked"]) == ("running", True, 2)
    finally:
        monitor.close()
