"""The revisit schedule on a real Redis: fill (frontier.revisit.Schedule), move (master.revisits), adapt, purge, and
the finisher keeping a revisiting crawl running."""

from __future__ import annotations

import json
from typing import Any

import pytest

from frontier.revisit import (
    CHANGED,
    FAILED,
    FETCHED,
    NOT_MODIFIED,
    UNCHANGED,
    Fetched,
    RevisitPolicy,
    Schedule,
    next_interval,
)
from master.finisher import Finisher
from master.revisits import RevisitMover
from master.staging import LeadershipLost
from messaging import keys, pause
from messaging.clients import as_text
from messaging.tasks import CrawlFields, CrawlState, Task

pytestmark = pytest.mark.integration

T0 = 1_700_000_000.0
POLICY = RevisitPolicy(pages="all", interval=100.0, min=10.0, max=1000.0)


def running(redis: Any, crawlid: str, **fields: Any) -> None:
    redis.hset(keys.crawl(crawlid), mapping={CrawlFields.STATE: CrawlState.RUNNING, CrawlFields.USERID: "u",
                                              CrawlFields.SPIDER_TYPE: "universal", **fields})


def seeds_tasks(redis: Any) -> list[Task]:
    return [Task.decode(member) for member in redis.zrange(keys.SEEDS, 0, -1)]


def state(redis: Any, crawlid: str, url: str) -> dict[str, Any]:
    return json.loads(redis.hget(keys.revisit_state(crawlid), url))


def test_fill_move_adapt_and_no_double_counting(cf) -> None:
    redis = cf.redis()
    running(redis, "c")
    epoch = int(redis.incr(keys.MASTER_EPOCH))
    schedule, mover = Schedule(redis), RevisitMover(redis, epoch)
    first = Task(url="http://a.test/", crawlid="c", spider_type="universal", depth=1, callback="rule:0")
    assert schedule.record([Fetched(first, FETCHED, etag='"v1"', digest="d1")], {"c": POLICY}, now=T0) == [
        "scheduled"]
    # the same first fetch committed again (a re-delivered task) changes nothing
    assert schedule.record([Fetched(first, FETCHED, etag='"v2"')], {"c": POLICY}, now=T0 + 1) == ["skipped"]
    assert redis.zscore(keys.revisit_due("c"), first.url) == T0 + 100
    assert mover.round(T0 + 99).moved == 0 and redis.zcard(keys.SEEDS) == 0
    assert mover.round(T0 + 100).moved == 1
    [revisit] = seeds_tasks(redis)
    assert revisit.revisit == {"gen": 1, "etag": '"v1"', "digest": "d1"}
    assert (revisit.url, revisit.depth, revisit.callback) == (first.url, 1, "rule:0")
    assert int(redis.hget(keys.PENDING_SEEDS, "c")) == 1
    assert redis.zcard(keys.revisit_due("c")) == 0 and redis.zscore(keys.revisit_out("c"), first.url) == T0 + 100
    assert mover.round(T0 + 200).moved == 0  # out: never pushed twice
    # 304: unchanged, the interval grows; counted once per generation
    assert schedule.record([Fetched(revisit, NOT_MODIFIED)], {"c": POLICY}, now=T0 + 101) == [NOT_MODIFIED]
    assert schedule.record([Fetched(revisit, NOT_MODIFIED)], {"c": POLICY}, now=T0 + 102) == ["skipped"]
    grown = next_interval(100, NOT_MODIFIED, 10, 1000)
    assert grown == pytest.approx(115) and state(redis, "c", first.url)["interval"] == pytest.approx(grown)
    assert state(redis, "c", first.url)["etag"] == '"v1"'  # kept from the full fetch
    assert redis.zscore(keys.revisit_due("c"), first.url) == pytest.approx(T0 + 101 + grown)
    assert redis.zcard(keys.revisit_out("c")) == 0
    # the next revisit finds a change: shrinks towards min, new validators and digest
    redis.delete(keys.SEEDS)
    assert mover.round(T0 + 101 + grown).moved == 1
    [second] = seeds_tasks(redis)
    assert second.revisit["gen"] == 2
    assert schedule.record([Fetched(second, CHANGED, etag='"v3"', digest="d3")], {"c": POLICY}, now=T0 + 300) == [
        CHANGED]
    shrunk = next_interval(grown, CHANGED, 10, 1000)
    assert shrunk == pytest.approx(62.5) and state(redis, "c", first.url)["interval"] == pytest.approx(shrunk)
    assert (state(redis, "c", first.url)["etag"], state(redis, "c", first.url)["digest"]) == ('"v3"', "d3")
    # a stale copy of the first revisit (generation 1) changes nothing
    assert schedule.record([Fetched(revisit, UNCHANGED)], {"c": POLICY}, now=T0 + 301) == ["skipped"]
    stats = {as_text(k): float(v) for k, v in redis.hgetall(keys.revisit_stats("c")).items()}
    assert stats == {"urls": 1, "interval_sum": pytest.approx(shrunk), "not_modified": 1, "unchanged": 1,
                     "changed": 1}


def test_adaptive_rule_is_bounded() -> None:
    interval = 100.0
    for _ in range(20):
        interval = next_interval(interval, UNCHANGED, 10, 1000)
    assert interval == 1000
    for _ in range(40):
        interval = next_interval(interval, CHANGED, 10, 1000)
    assert 10 <= interval < 10.001
    assert next_interval(55, FAILED, 10, 1000) == 55


def test_pages_choice() -> None:
    assert RevisitPolicy.from_rule({"revisit": {"pages": "list", "interval": 60}}).selects("http://a/x", True)
    assert not RevisitPolicy.from_rule({"revisit": {"pages": "list", "interval": 60}}).selects("http://a/x", False)
    regex = RevisitPolicy.from_rule({"revisit": {"pages": r"/news/$", "interval": 60}})
    assert regex.selects("http://a/news/", False) and not regex.selects("http://a/news/1.html", True)
    defaults = RevisitPolicy.from_rule({"revisit": {"pages": "all", "interval": 60}})
    assert (defaults.min, defaults.max) == (15, 960)
    assert RevisitPolicy.from_rule({"rules": []}) is None


def test_stop_until_purge_and_the_finisher(cf) -> None:
    redis = cf.redis()
    running(redis, "kept", **{CrawlFields.UNTIL: T0 + 50})
    running(redis, "stopped")
    epoch = int(redis.incr(keys.MASTER_EPOCH))
    schedule, mover = Schedule(redis), RevisitMover(redis, epoch)
    for crawlid in ("kept", "stopped"):
        task = Task(url=f"http://{crawlid}.test/", crawlid=crawlid, spider_type="universal")
        schedule.record([Fetched(task, FETCHED)], {crawlid: POLICY}, now=T0)
    redis.sadd(keys.FINISH_CANDIDATES, "kept")
    events: list[dict[str, Any]] = []
    finisher = Finisher(redis, events.append)
    finisher.check(T0 + 1)
    finisher.check(T0 + 1)
    assert events == [] and redis.sismember(keys.FINISH_CANDIDATES, "kept")  # revisiting: not finished
    redis.hset(keys.crawl("stopped"), CrawlFields.STATE, CrawlState.STOPPED)
    assert mover.round(T0 + 2).purged == 1
    for key in (keys.revisit_due("stopped"), keys.revisit_state("stopped"), keys.revisit_stats("stopped")):
        assert not redis.exists(key)
    assert redis.smembers(keys.REVISIT_CRAWLS) == {b"kept"}
    assert mover.round(T0 + 50).purged == 1  # its until passed
    assert not redis.exists(keys.revisit_due("kept"))
    for _ in range(3):
        finisher.check(T0 + 51)
    assert [event["crawlid"] for event in events] == ["kept"]


def test_a_newer_leader_fences_the_mover(cf) -> None:
    redis = cf.redis()
    running(redis, "c")
    mover = RevisitMover(redis, int(redis.incr(keys.MASTER_EPOCH)))
    Schedule(redis).record([Fetched(Task(url="http://a.test/", crawlid="c", spider_type="universal"), FETCHED)],
                           {"c": POLICY}, now=T0)
    redis.incr(keys.MASTER_EPOCH)
    with pytest.raises(LeadershipLost):
        mover.round(T0 + 100)
    assert redis.zcard(keys.SEEDS) == 0 and redis.zcard(keys.revisit_due("c")) == 1


def test_info_summary_and_cli(cf) -> None:
    import json as jsonlib

    from click.testing import CliRunner

    from deploy.cli import main
    from messaging.redis_monitor.plugins.info import revisit_summary

    redis = cf.redis()
    running(redis, "c", **{CrawlFields.RULE: jsonlib.dumps({"revisit": {"pages": "all", "interval": 100,
                                                                        "min": 10}})})
    assert revisit_summary(redis, "c", T0) is None
    epoch = int(redis.incr(keys.MASTER_EPOCH))
    schedule, mover = Schedule(redis), RevisitMover(redis, epoch)
    tasks = [Task(url=f"http://a.test/{i}", crawlid="c", spider_type="universal") for i in range(3)]
    schedule.record([Fetched(task, FETCHED) for task in tasks], {"c": POLICY}, now=T0)
    mover.round(T0 + 100)  # all three out
    [first, *_] = seeds_tasks(redis)
    schedule.record([Fetched(first, UNCHANGED)], {"c": POLICY}, now=T0 + 101)
    summary = revisit_summary(redis, "c", T0 + 111)
    assert summary == {"scheduled": 3, "due": 2, "overdue": 2, "waiting": 1,
                       "mean_interval": pytest.approx(105, abs=0.001), "changed": 0, "unchanged": 1,
                       "not_modified": 0, "failed": 0}
    result = CliRunner().invoke(main, ["revisits", "c", "--json"], env=cf.env)
    assert result.exit_code == 0, result.output
    assert jsonlib.loads(result.output)["scheduled"] == 3


def test_a_paused_crawls_revisits_wait_until_it_is_resumed(cf) -> None:
    redis = cf.redis()
    running(redis, "c")
    epoch = int(redis.incr(keys.MASTER_EPOCH))
    schedule, mover = Schedule(redis), RevisitMover(redis, epoch)
    task = Task(url="http://c.test/", crawlid="c", spider_type="universal")
    schedule.record([Fetched(task, FETCHED)], {"c": POLICY}, now=T0)
    pause.pause(redis, "c")
    result = mover.round(T0 + 500)  # due long ago: postponed, not purged
    assert (result.moved, result.purged) == (0, 0) and redis.zcard(keys.revisit_due("c")) == 1
    assert redis.sismember(keys.REVISIT_CRAWLS, "c") and not seeds_tasks(redis)
    pause.resume(redis, "c")
    assert mover.round(T0 + 501).moved == 1 and [t.url for t in seeds_tasks(redis)] == [task.url]
