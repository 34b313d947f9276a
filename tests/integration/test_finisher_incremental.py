"""The incremental finisher (issue 30, item 3): a check reads only pending counts that changed, and only while no busy
domain keeps the crawl waiting, never every domain of a crawl, and still declares a crawl finished exactly when
nothing is left — also when a change-log entry is lost. Real Redis; dispatch, leases and completions through the
fleet's own code."""

from __future__ import annotations

from typing import Any

import pytest

from bench.sim_worker import SimWorker
from master.dispatcher import DispatchConfig, Dispatcher
from master.finisher import READ_CHUNK, RESYNC_SECONDS, Finisher
from messaging import keys
from messaging.tasks import CrawlFields, CrawlState, Task, push_seeds

pytestmark = pytest.mark.integration

T0 = 1_700_000_040.0
DOMAINS = 400


def start_crawl(redis: Any, crawlid: str, urls: list[str]) -> None:
    redis.hset(keys.crawl(crawlid), mapping={CrawlFields.STATE: CrawlState.RUNNING, CrawlFields.CREATED: T0,
                                              CrawlFields.USERID: "u1", CrawlFields.SPIDER_TYPE: "list"})
    push_seeds(redis, [Task(url=url, crawlid=crawlid, spider_type="list") for url in urls])


def dispatch_all(redis: Any, dispatcher: Dispatcher, now: float) -> None:
    for _ in range(50):
        if not redis.zcard(keys.SEEDS):
            return
        dispatcher.round(now)
    raise AssertionError("seeds did not drain")


def test_a_check_reads_only_what_changed_and_the_end_is_exact(cf: Any) -> None:
    redis = cf.redis()
    events: list[dict[str, Any]] = []
    finisher = Finisher(redis, events.append)
    start_crawl(redis, "broad", [f"http://site{i}.test/" for i in range(DOMAINS)])
    worker = SimWorker(redis, "w", 60)
    worker.register(T0)
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), DispatchConfig(initial_rate=60_000))
    dispatch_all(redis, dispatcher, T0)
    assert finisher.check(T0) == []
    assert finisher.reads["full"] == DOMAINS  # the crawl's first view: every domain, once

    # a task lands in a new domain of the crawl: logged by the settle step, its count is unread; five tasks
    # complete: five more. The crawl's other busy domains keep it waiting: the checks read nothing
    push_seeds(redis, [Task(url="http://late.test/", crawlid="broad", spider_type="list")])
    dispatch_all(redis, dispatcher, T0 + 1)
    assert finisher.check(T0 + 1) == []
    leased = worker.lease(5, T0 + 2)
    assert worker.ack(leased, T0 + 2) == 5
    for second in range(3, 7):
        assert finisher.check(T0 + second) == []
    assert finisher.reads["touched"] == 0 and finisher.reads["full"] == DOMAINS
    assert finisher._views["broad"].unread == {"late.test"} | {domain for domain, _ in leased}

    # the busy domains resynced (lazily): the first chunk read finds one busy, the others stay unread
    assert finisher.check(T0 + RESYNC_SECONDS) == []
    assert finisher.reads["touched"] == READ_CHUNK and finisher.reads["full"] == DOMAINS

    before = finisher.reads["touched"]
    while leased := worker.lease(100, T0 + 7):
        worker.ack(leased, T0 + 7)
    # every count is zero now: the declaration still rests on one full read (and the sweep of seeds)
    assert finisher.check(T0 + 8) == ["broad"]
    assert finisher.reads["full"] == 2 * DOMAINS + 1
    # then each changed count once at most (those of the chunk read at zero were dropped from the view already)
    assert DOMAINS + 1 - 6 <= finisher.reads["touched"] - before <= DOMAINS + 1
    assert finisher.check(T0 + 9) == [] and [e["crawlid"] for e in events] == ["broad"]


def test_a_lost_change_log_delays_the_end_never_hastens_it(cf: Any) -> None:
    redis = cf.redis()
    events: list[dict[str, Any]] = []
    finisher = Finisher(redis, events.append)
    start_crawl(redis, "c", [f"http://d{i}.test/" for i in range(5)])
    worker = SimWorker(redis, "w", 60)
    worker.register(T0)
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), DispatchConfig(initial_rate=6000))
    dispatch_all(redis, dispatcher, T0)
    assert finisher.check(T0) == []
    worker.ack(worker.lease(5, T0 + 1), T0 + 1)
    redis.delete(keys.FINISH_TOUCHED)  # e.g. a worker that died between its ack and its hint
    assert finisher.check(T0 + 2) == []  # the view still says busy: late ...
    assert finisher.check(T0 + RESYNC_SECONDS + 1) == ["c"]  # ... until the view is read again in full
    assert [e["crawlid"] for e in events] == ["c"]

    # the other way round: a landing the finisher never heard of (its log taken by a stale leader) is found by the
    # full read that every declaration rests on
    start_crawl(redis, "d", ["http://e0.test/"])
    dispatch_all(redis, dispatcher, T0 + 100)
    assert finisher.check(T0 + 100) == []
    worker.ack(worker.lease(1, T0 + 101), T0 + 101)
    push_seeds(redis, [Task(url="http://e1.test/", crawlid="d", spider_type="list")])
    dispatch_all(redis, dispatcher, T0 + 102)
    redis.delete(keys.FINISH_TOUCHED)
    finisher._views["d"].busy.clear()  # as if the hint of e0's completion had come, and e1's landing had not
    assert finisher.check(T0 + 103) == []
    assert finisher._views["d"].busy == {"e1.test"}
    worker.ack(worker.lease(1, T0 + 104), T0 + 104)
    assert finisher.check(T0 + 105) == ["d"]


def test_a_crawl_settled_between_the_poll_and_its_triage_stays_a_candidate(cf: Any) -> None:
    """The poll reads a candidate's seeds count above zero; before the finisher acts on that, the settle step lands
    the last tasks: the count drops to zero and the crawl is added to the candidates again. That addition must stand
    (a removal after the read once undid it, and the crawl never finished)."""
    redis = cf.redis()
    finisher = Finisher(redis, lambda event: None)
    start_crawl(redis, "raced", ["http://raced.test/"])
    redis.sadd(keys.FINISH_CANDIDATES, "raced")  # a candidate whose seeds count is above zero again
    poll = finisher._poll

    def poll_then_settle(**kwargs: Any) -> Any:
        answer = poll(**kwargs)
        redis.hset(keys.PENDING_SEEDS, "raced", 0)  # what the settle step does, in this order, when tasks land
        redis.sadd(keys.FINISH_CANDIDATES, "raced")
        return answer

    finisher._poll = poll_then_settle
    assert finisher.check(T0) == []
    assert redis.sismember(keys.FINISH_CANDIDATES, "raced")
    finisher._poll = poll
    finisher.check(T0 + 1)  # the count is zero now: the crawl is checked (its task is still in seeds: not finished)
    assert redis.hget(keys.crawl("raced"), CrawlFields.STATE).decode() == CrawlState.RUNNING
