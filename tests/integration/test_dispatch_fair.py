"""No crawl waits behind another (issue 37, item 1), the dispatcher against real Redis: a paced site gets only a few
minutes of its own hits of the workers' queues, the rest of its tasks are passed by (and remembered) in seeds, a
worker whose queued tasks all wait for their sites' next slots gets work whatever it holds, and why each crawl waits
is published."""

from __future__ import annotations

import json

import pytest

from frontier.config_watch import StaticSiteConfig
from frontier.registry import WorkerInfo, WorkerRegistry, record_completion
from master.dispatcher import DispatchConfig, Dispatcher
from messaging import keys
from messaging.siteconfig import Rate, SiteConfig
from messaging.tasks import Task, push_seeds

pytestmark = pytest.mark.integration

T0 = 1_700_000_040.0
SLOW = "slow.test"
SITES = StaticSiteConfig(Rate(6000, 60), {SLOW: SiteConfig(rate=10, window=60)})  # the slow site: 10 a minute


def pages(site: str, n: int, crawlid: str, spider_type: str = "list") -> list[Task]:
    return [Task(url=f"http://{site}/p/{i}", crawlid=crawlid, spider_type=spider_type) for i in range(n)]


def worker(redis, job: str, rate: int = 30, spider_type: str = "list") -> None:
    """A worker that completed ``rate`` tasks in each of the 10 minutes before T0 (its bound: 1.2 x rate x 2)."""
    registry = WorkerRegistry(redis)
    registry.register(WorkerInfo(job, spider_type, "ip", "h", 1), now=T0 - 11 * 60)
    for minute in range(1, 11):
        record_completion(redis, job, rate, T0 - minute * 60 + 1)
    registry.heartbeat(job, now=T0)


def held(redis, job: str, domain: str) -> int:
    return int(redis.zcard(keys.queue(job, domain)))


def test_a_paced_site_gets_its_quota_and_a_new_crawl_gets_room_behind_it(cf) -> None:
    redis = cf.redis()
    push_seeds(redis, pages(SLOW, 300, "slow"))
    push_seeds(redis, pages("new.test", 5, "new"))
    worker(redis, "w1")
    worker(redis, "w2")
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), sites=SITES)
    first = dispatcher.round(T0)
    # 10 hits a minute x CRAWLFLEET_DISPATCH_SITE_MINUTES (2) = 20 of the slow site, all workers together
    assert held(redis, "w1", SLOW) + held(redis, "w2", SLOW) == 20
    assert held(redis, "w1", "new.test") + held(redis, "w2", "new.test") == 5
    assert first.total == 25 and redis.zcard(keys.SEEDS) == 280
    # the slow site's tasks now lead seeds: a round passes them by once and remembers the run ...
    push_seeds(redis, pages("later.test", 3, "later"))
    second = dispatcher.round(T0 + 0.5)
    assert second.total == 3 and second.scanned == 283
    # ... and the next rounds read only what came after it
    push_seeds(redis, pages("last.test", 2, "last"))
    third = dispatcher.round(T0 + 0.6)
    assert third.total == 2 and third.scanned == 2
    # a task of higher priority arriving before the run is seen at once
    push_seeds(redis, [Task(url="http://urgent.test/", crawlid="urgent", spider_type="list", priority=200)])
    assert dispatcher.round(T0 + 0.7).total == 1
    # why they wait, for the info answer and the crawl page
    waits = json.loads(redis.hget(keys.DISPATCH_WAITS, "slow"))["waits"]
    assert waits == [{"reason": "paced", "domain": SLOW, "tasks": 280, "held": 20, "quota": 20}]
    assert redis.hget(keys.DISPATCH_WAITS, "new") is None
    room = json.loads(redis.hget(keys.DISPATCH_ROOM, "list"))
    assert room["workers"] == 2 and room["bound"] == 2 * 72  # ceil(1.2 x 30 a minute x 2 minutes) each


def test_a_site_gets_more_once_its_tasks_left_the_queues(cf) -> None:
    redis = cf.redis()
    push_seeds(redis, pages(SLOW, 100, "slow"))
    worker(redis, "w1")
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), sites=SITES)
    dispatcher.round(T0)
    assert held(redis, "w1", SLOW) == 20

    def five_leave() -> None:  # completed: the domain's pending count goes down as the ack does
        for member in redis.zrange(keys.queue("w1", SLOW), 0, 4):
            redis.zrem(keys.queue("w1", SLOW), member)
        redis.hincrby(keys.pending_domain(SLOW), "slow", -5)

    five_leave()
    assert dispatcher.round(T0 + 0.1).total == 0  # its count was read less than a second ago (at T0)
    assert dispatcher.round(T0 + 1.2).total == 5  # read again: it has room for five
    five_leave()
    assert dispatcher.round(T0 + 1.3).total == 0
    assert dispatcher.round(T0 + 2.4).total == 5
    assert held(redis, "w1", SLOW) == 20


def test_a_rate_changed_in_zookeeper_changes_the_quota(cf) -> None:
    redis = cf.redis()
    push_seeds(redis, pages(SLOW, 100, "slow"))
    worker(redis, "w1", rate=600)
    sites = StaticSiteConfig(Rate(6000, 60), {SLOW: SiteConfig(rate=10, window=60)})
    sites.changes = 0  # type: ignore[attr-defined]  # as SiteConfigWatch counts the changes it applied
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), sites=sites)
    dispatcher.round(T0)
    assert held(redis, "w1", SLOW) == 20
    sites.sites = {SLOW: SiteConfig(rate=30, window=60)}
    sites.changes = 1  # type: ignore[attr-defined]
    dispatcher.round(T0 + 31)  # the skip mark is forgotten after 30 s at the latest
    assert held(redis, "w1", SLOW) == 60


def test_a_worker_whose_tasks_all_wait_for_their_sites_gets_work(cf) -> None:
    redis = cf.redis()
    push_seeds(redis, pages("a.test", 40, "a") + pages("b.test", 40, "b"))
    worker(redis, "w1", rate=10)  # its bound: ceil(1.2 x 10 x 2) = 24 tasks
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), DispatchConfig(window_minutes=10),
                            sites=SITES)
    assert dispatcher.round(T0).total == 24
    assert dispatcher.round(T0 + 1).total == 0  # at its bound, with tasks due
    # its walk found every domain throttled: each waits for its next slot, a minute from now
    seconds, micros = redis.time()
    later = (seconds + 60) * 1_000_000 + micros
    for domain in redis.zrange(keys.ready("w1"), 0, -1):
        redis.zadd(keys.ready("w1"), {domain: later}, xx=True)
    result = dispatcher.round(T0 + 2)
    assert result.total == 24  # its whole bound again: what it holds can only leave at its sites' pace
    room = json.loads(redis.hget(keys.DISPATCH_ROOM, "list"))
    assert room["idle"] == 1


def test_tasks_of_a_type_without_workers_and_without_room_say_why(cf) -> None:
    redis = cf.redis()
    push_seeds(redis, pages("u.test", 3, "u", spider_type="universal"))
    push_seeds(redis, pages("l.test", 50, "l"))
    worker(redis, "w1", rate=10)
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), sites=SITES)
    dispatcher.round(T0)
    dispatcher.round(T0 + 1.5)
    assert json.loads(redis.hget(keys.DISPATCH_WAITS, "u"))["waits"] == [
        {"reason": "no_worker", "spider_type": "universal", "tasks": 3}]
    room = json.loads(redis.hget(keys.DISPATCH_ROOM, "list"))
    assert room["budget"] == 0 and room["held"] == 24 and room["bound"] == 24
