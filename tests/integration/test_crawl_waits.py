"""Why a crawl waits (issue 37, item 1): the reasons the info answer and the crawl page give, read from what the
dispatcher published and from the crawl's domains in the workers' queues, each with its figure."""

from __future__ import annotations

import pytest

from frontier.config_watch import StaticSiteConfig
from frontier.registry import WorkerInfo, WorkerRegistry, record_completion
from master.dispatcher import Dispatcher
from messaging import keys
from messaging.clock import RedisClock
from messaging.siteconfig import Rate, SiteConfig
from messaging.tasks import CrawlFields, CrawlState, Task, push_seeds
from messaging.waits import crawl_waits, describe

pytestmark = pytest.mark.integration

SLOW, DOWN = "slow.test", "down.test"
DEFAULT = Rate(6000, 60)
SITES = StaticSiteConfig(DEFAULT, {SLOW: SiteConfig(rate=10, window=60)})


def rate_for(domain: str) -> Rate:
    return SITES.rate_for(domain)


def crawl(redis, crawlid: str, site: str, n: int, spider_type: str = "list") -> None:
    redis.hset(keys.crawl(crawlid), mapping={CrawlFields.STATE: CrawlState.RUNNING,
                                             CrawlFields.SPIDER_TYPE: spider_type})
    push_seeds(redis, [Task(url=f"http://{site}/p/{i}", crawlid=crawlid, spider_type=spider_type) for i in range(n)])


def worker(redis, rate: int, now: float) -> None:
    """A list worker that completed ``rate`` tasks in each of the last 10 minutes (its bound: 1.2 x rate x 2)."""
    registry = WorkerRegistry(redis)
    registry.register(WorkerInfo("w1", "list", "ip", "h", 1), now=now - 660)
    for minute in range(1, 11):
        record_completion(redis, "w1", rate, now - minute * 60)
    registry.heartbeat("w1")


def test_the_reasons_a_crawl_waits_with_their_figures(cf) -> None:
    redis = cf.redis()
    now = RedisClock(redis).now()
    worker(redis, 60, now)
    crawl(redis, "slow", SLOW, 100)
    crawl(redis, "down", DOWN, 3)
    crawl(redis, "orphan", "orphan.test", 2, spider_type="universal")
    Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), sites=SITES).round(now)

    # the slow site: its share (10 a minute x 2 minutes) is in the queue, the rest in seeds; its next slot is later
    redis.hset(keys.pace_type("list", SLOW), mapping={"at": int((now + 4) * 1_000_000), "tokens": "0.000000"})
    waits = crawl_waits(redis, "slow", rate_for)
    seeds = next(w for w in waits if w.get("where") == "seeds")
    assert seeds == {"reason": "paced", "domain": SLOW, "tasks": 80, "held": 20, "quota": 20, "where": "seeds",
                     "rate": 10, "window": 60.0, "spacing": 6.0, "next_slot_in": pytest.approx(10.0, abs=1.0)}
    queued = next(w for w in waits if w.get("where") == "queues")
    assert queued["reason"] == "paced" and queued["tasks"] == 20
    assert describe(seeds).startswith(f"paced: {SLOW} allows 10 per 60 s (one every 6 s); next slot in ")
    assert "80 wait in seeds (20 in the workers' queues, its share is 20)" in describe(seeds)

    # a host whose robots.txt answers 500: its tasks wait in the queue until the next try
    redis.hset(keys.robots_down(DOWN, DOWN), mapping={"since": now - 30, "retry_at": now + 15, "failures": 2,
                                                      "why": "HTTP 500"})
    [robots] = crawl_waits(redis, "down", rate_for)
    assert robots["reason"] == "robots" and robots["host"] == DOWN and robots["tasks"] == 3
    assert "unreachable for 30 s (HTTP 500, 2 tries), next try in 15 s" in describe(robots)

    # a spider type without a live worker
    assert crawl_waits(redis, "orphan", rate_for) == [{"reason": "no_worker", "spider_type": "universal",
                                                       "tasks": 2, "where": "seeds"}]
    # nothing holds back a crawl whose sites are due; a finished crawl does not wait
    redis.hset(keys.crawl("down"), CrawlFields.STATE, CrawlState.FINISHED)
    assert crawl_waits(redis, "down", rate_for) == []


def test_a_full_backlog_is_read_from_the_room_the_dispatcher_found(cf) -> None:
    redis = cf.redis()
    now = RedisClock(redis).now()
    worker(redis, 5, now)  # its bound: ceil(1.2 x 5 x 2) = 12
    crawl(redis, "big", "big.test", 40)
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), sites=SITES)
    dispatcher.round(now)
    dispatcher.round(now + 2)  # nothing has room: nothing is scanned, the room says why
    [wait] = [w for w in crawl_waits(redis, "big", rate_for) if w.get("where") == "seeds"]
    assert wait == {"reason": "backlog_full", "spider_type": "list", "tasks": 28, "where": "seeds", "workers": 1,
                    "idle": 0, "held": 12, "bound": 12}
    assert describe(wait) == ("backlog full: every list worker holds its bound (12 tasks held of 12); "
                              "28 tasks wait in seeds")
