"""The master under faults: a poison task is dead-lettered, a rolling restart does not stall dispatch, the finisher
does bounded work per check and runs off the dispatch path."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from deploy.procs import wait_for
from frontier.registry import WorkerInfo, WorkerRegistry, record_completion
from master.dispatcher import DispatchConfig, Dispatcher
from master.finisher import Finisher
from master.requeue import Requeuer
from master.service import MasterService
from master.staging import Pick, Staging
from messaging import clients, keys
from messaging.redis_monitor.plugins import Context
from messaging.redis_monitor.plugins.info import InfoPlugin
from messaging.tasks import CrawlFields, CrawlState, Task, push_seeds
from tests.plugins.services import read_topic

pytestmark = pytest.mark.e2e

T0 = 1_700_000_040.0
POISON_URL = "http://a{b}.com/"


def tasks(n: int, crawlid: str = "c1", spider_type: str = "list") -> list[Task]:
    return [Task(url=f"http://{spider_type}{i % 5}.test/p/{i}", crawlid=crawlid, spider_type=spider_type, userid="u")
            for i in range(n)]


def with_history(redis: Any, job: str, rate: int, spider_type: str = "list") -> None:
    """A worker that completed ``rate`` tasks in each of the 10 minutes before T0."""
    WorkerRegistry(redis).register(WorkerInfo(job, spider_type, "ip", "h", 1), now=T0 - 11 * 60)
    for minute in range(1, 11):
        record_completion(redis, job, rate, T0 - minute * 60 + 1)
    WorkerRegistry(redis).heartbeat(job, now=T0)


def queued(redis: Any, job: str) -> list[str]:
    found = []
    for domain in redis.smembers(keys.job_domains(job)):
        found += [m.decode() for m in redis.zrange(keys.queue(job, domain.decode()), 0, -1)]
    return found


# --- 1. a task the dispatcher cannot place ------------------------------------------------------------------------
def test_a_poison_task_is_dead_lettered_and_dispatch_goes_on(cf) -> None:
    redis = cf.redis()
    poison = Task(url=POISON_URL, crawlid="c1", spider_type="list", userid="u")
    push_seeds(redis, [poison])  # first in line
    push_seeds(redis, tasks(20))
    redis.zadd(keys.SEEDS, {"not a task": 1})  # a foreign member: not even JSON
    with_history(redis, "w", 600)
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)))
    result = dispatcher.round(T0)
    assert result.total == 20 and result.dead == 2
    assert redis.zcard(keys.SEEDS) == 0 and len(queued(redis, "w")) == 20
    assert int(redis.hget(keys.DEAD_LETTER_COUNTS, "c1")) == 1
    assert redis.hget(keys.PENDING_SEEDS, "c1") is None  # the crawl can still finish
    assert b"c1" in redis.smembers(keys.FINISH_CANDIDATES)
    records = {r["crawlid"]: r for r in map(json.loads, redis.lrange(keys.DEAD_LETTER_OUTBOX, 0, -1))}
    assert set(records) == {"c1", None}
    assert "'{'" in records["c1"]["reason"] and records["c1"]["original"] == poison.encode()
    assert records[None]["path"] == "$" and "not a JSON task" in records[None]["reason"]
    assert redis.llen(keys.DEAD_LETTERS) == 2
    push_seeds(redis, tasks(5, crawlid="c2"))
    assert dispatcher.round(T0 + 1).total == 5  # and the next rounds go on


def test_a_poison_batch_left_staged_by_a_crashed_leader_is_recovered(cf) -> None:
    redis = cf.redis()
    poison = Task(url=POISON_URL, crawlid="c1", spider_type="list", userid="u")
    push_seeds(redis, [poison, *tasks(10)])
    with_history(redis, "w", 600)
    # the leader that staged the poison task crashed while landing it, after listing its domain for the job
    old = Staging(redis, int(redis.incr(keys.MASTER_EPOCH)))
    old.stage([Pick(poison.encode(), "w", "a{b}.com", "c1", "list", 0.0)])
    redis.sadd(keys.job_domains("w"), "a{b}.com")
    redis.sadd(keys.crawl_domains("c1"), "a{b}.com")
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)))
    assert dispatcher.staging.recover(minute=0) == (0, 1)  # back in seeds ...
    result = dispatcher.round(T0)
    assert (result.total, result.dead) == (10, 1)  # ... and from there to the dead letters
    assert redis.hget(keys.PENDING_SEEDS, "c1") is None
    # the job dies: its requeue skips the domain that can have no queue
    assert WorkerRegistry(redis).retire("w", now=T0 + 1)
    assert Requeuer(redis, dispatcher.staging.epoch).requeue("w") == 10
    assert redis.zcard(keys.SEEDS) == 10


def test_the_master_answers_dead_letters_on_the_failed_topic_and_info_shows_them(cf, procs) -> None:
    clients.ensure_topics(cf.settings, {cf.settings.topic_failed: 1, cf.settings.topic_outbound: 1})
    redis = cf.redis()
    registry = WorkerRegistry(redis)
    registry.register(WorkerInfo("w", "list", "127.0.0.1", "test", 1))
    redis.hset(keys.crawl("c1"), mapping={CrawlFields.STATE: CrawlState.RUNNING, CrawlFields.USERID: "u"})
    push_seeds(redis, [Task(url=POISON_URL, crawlid="c1", spider_type="list", userid="u")])
    push_seeds(redis, tasks(30))
    stop = threading.Event()
    beats = threading.Thread(target=lambda: [registry.heartbeat("w") for _ in iter(lambda: stop.wait(0.5), True)],
                             daemon=True)
    beats.start()
    try:
        master = procs.crawlfleet("master", env=cf.env)
        wait_for(lambda: len(queued(redis, "w")) == 30, 30, "the valid tasks dispatched",
                 alive=lambda: f"master exited:\n{procs.log(master)[-2000:]}" if master.poll() is not None else None)
        failed = read_topic(cf.settings, cf.settings.topic_failed, 1, timeout=30)
        assert failed[0]["crawlid"] == "c1" and "a{b}.com" in failed[0]["reason"]
        assert "leading the dispatch with epoch 1" in procs.log(master)  # led once: never crashed and re-elected
        wait_for(lambda: redis.llen(keys.DEAD_LETTER_OUTBOX) == 0, 30, "the outbox to be trimmed")
    finally:
        stop.set()
    info = InfoPlugin().handle("info:u:c1:q", {"crawlid": "c1"}, Context(redis, cf.settings))
    assert info["dead_letters"] == 1 and "a{b}.com" in info["dead_letter_samples"][0]["task"]


# --- 2. a rolling restart -----------------------------------------------------------------------------------------
def test_replacing_every_worker_of_a_type_resumes_dispatch_within_one_round(cf) -> None:
    redis = cf.redis()
    push_seeds(redis, tasks(5000))
    for job in ("old-1", "old-2"):
        with_history(redis, job, 100)
    epoch = int(redis.incr(keys.MASTER_EPOCH))
    dispatcher = Dispatcher(redis, epoch, DispatchConfig(headroom=1.0, backlog_minutes=100))
    assert dispatcher.round(T0).total == 2000  # the window cap: 10 minutes of 2 x 100 tasks a minute
    assert dispatcher.round(T0 + 1).total == 0
    # every worker of the type is replaced: the old ones leave (their tasks go back to seeds), new ones start
    registry, requeuer = WorkerRegistry(redis), Requeuer(redis, epoch)
    for job in ("old-1", "old-2"):
        assert registry.leave(job, now=T0 + 30)
        requeuer.requeue(job)
        registry.forget(job, T0 + 30)
    for job in ("new-1", "new-2"):
        registry.register(WorkerInfo(job, "list", "ip", "h", 1), now=T0 + 40)
    result = dispatcher.round(T0 + 41)
    assert result.placed.get("new-1", 0) > 0 and result.placed.get("new-2", 0) > 0
    assert result.total == 2 * 60 * 10  # their own window (new workers start at the initial rate, 60/min)


def test_a_worker_that_leaves_cleanly_has_its_tasks_back_in_seeds_at_the_next_check(cf) -> None:
    """SIGTERM (a pod scaled down): the worker retires itself; the leading master hands back what it still held
    within a check, not at the next election."""
    redis = cf.redis()
    push_seeds(redis, tasks(50))
    for job in ("leaving", "staying"):
        with_history(redis, job, 600)
    epoch = int(redis.incr(keys.MASTER_EPOCH))
    Dispatcher(redis, epoch).round(T0)
    held, kept = len(queued(redis, "leaving")), len(queued(redis, "staying"))
    assert held > 0 and kept > 0 and redis.zcard(keys.SEEDS) == 50 - held - kept
    assert WorkerRegistry(redis).leave("leaving", now=T0 + 1)
    service = MasterService(cf.settings)
    try:
        service._leaves(Requeuer(redis, epoch), T0 + 2)
    finally:
        service.close()
    assert queued(redis, "leaving") == [] and len(queued(redis, "staying")) == kept
    assert redis.zcard(keys.SEEDS) == 50 - kept


# --- 3. the finisher ----------------------------------------------------------------------------------------------
def zscan_calls(redis: Any) -> int:
    return int(redis.info("commandstats").get("cmdstat_zscan", {}).get("calls", 0))


def ready_to_finish(redis: Any, crawlids: list[str]) -> None:
    for crawlid in crawlids:
        redis.hset(keys.crawl(crawlid), mapping={CrawlFields.STATE: CrawlState.RUNNING, CrawlFields.USERID: "u",
                                                 CrawlFields.CREATED: T0, CrawlFields.SPIDER_TYPE: "list"})
    redis.sadd(keys.FINISH_CANDIDATES, *crawlids)


def test_finishing_many_crawls_with_a_large_seeds_reads_a_bounded_part_of_it_per_check(cf) -> None:
    redis = cf.redis()
    big = tasks(60_000, crawlid="big")
    for start in range(0, len(big), 5000):
        push_seeds(redis, big[start:start + 5000])
    done = [f"done-{i}" for i in range(40)]
    ready_to_finish(redis, done)
    redis.zadd(keys.SEEDS, {Task("http://x.test/stray", "done-7", "list").encode(): 1})  # uncounted
    events: list[dict[str, Any]] = []
    finisher = Finisher(redis, events.append)
    for check in range(10):
        before = zscan_calls(redis)
        finisher.check(T0 + check)
        # a bounded slice of seeds per check (20,000 entries, 5,000 per call), not one scan of all of it per crawl
        # (40 crawls x 12 calls)
        assert zscan_calls(redis) - before <= 6
        if len(events) == 39:
            break
    assert sorted(e["crawlid"] for e in events) == sorted(set(done) - {"done-7"})
    assert int(redis.hget(keys.PENDING_SEEDS, "done-7")) == 1  # the shared sweep still found the stray task


def test_the_finisher_runs_off_the_dispatch_path(cf) -> None:
    redis = cf.redis()
    registry = WorkerRegistry(redis)
    registry.register(WorkerInfo("w", "list", "127.0.0.1", "test", 1))
    ready_to_finish(redis, ["finished-crawl"])
    push_seeds(redis, tasks(50))
    service = MasterService(cf.settings, "hardening")
    kafka_answers = threading.Event()
    service._send = lambda event: kafka_answers.wait(60)  # a producer that does not get its acknowledgement
    leader = threading.Thread(target=service.run, daemon=True)
    leader.start()
    try:
        wait_for(lambda: redis.zcard(keys.SEEDS) == 0, 20, "dispatch while the crawl_finished event waits for Kafka")
        assert len(queued(redis, "w")) == 50
    finally:
        kafka_answers.set()
        service.stop()
        leader.join(timeout=30)
        service.close()
