"""Politeness.take_many: up to N steps in two round trips, with exactly the windows of N calls of take()."""

from __future__ import annotations

from typing import Any

import pytest

from frontier.client import FrontierClient, Outcome
from frontier.config_watch import StaticSiteConfig
from frontier.politeness import Politeness
from frontier.robots_cache import RobotsCache
from messaging import keys
from messaging.siteconfig import Rate
from messaging.tasks import Task, queue_score

pytestmark = pytest.mark.integration

T0 = 1_700_000_000.0
DOMAIN = "site.test"


def queue(redis: Any, paths: list[str]) -> list[Task]:
    tasks = [Task(url=f"http://{DOMAIN}{path}", crawlid="c", spider_type="list") for path in paths]
    redis.zadd(keys.queue("j", DOMAIN), {t.encode(): queue_score(100, n) for n, t in enumerate(tasks)})
    return tasks


@pytest.fixture(params=["single", pytest.param("cluster", marks=pytest.mark.cluster)])
def svc(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue("cf" if request.param == "single" else "cf_cluster")


def test_a_batch_stops_where_the_window_is_full(svc: Any) -> None:
    redis = svc.redis()
    tasks = queue(redis, [f"/p{n}" for n in range(10)])
    engine = FrontierClient(redis, "j", "list", "10.0.0.1", Politeness(StaticSiteConfig(Rate(5, 60, burst=8))))
    results = engine.take_many(DOMAIN, 8, now=T0)
    assert [r.outcome for r in results] == [Outcome.TAKEN] * 5 + [Outcome.THROTTLED]
    assert [r.task.url for r in results[:5]] == [t.url for t in tasks[:5]]  # in queue order
    assert redis.zcard(keys.throttle_type("list", DOMAIN)) == 5 == redis.zcard(keys.throttle_ip("10.0.0.1", DOMAIN))
    assert redis.zcard(keys.queue("j", DOMAIN)) == 5 and redis.zcard(keys.inflight("j", DOMAIN)) == 5
    # the window (checked 60 + 12 / 5 s wide: the slack) opens 62.4 s after the first hit, reserved 1 s ahead
    assert results[-1].wait == pytest.approx(61.4)


def test_disallowed_heads_are_dropped_and_the_allowed_ones_taken(svc: Any) -> None:
    redis = svc.redis()
    robots = RobotsCache(redis, lambda url: "User-agent: *\nDisallow: /private/\n")
    queue(redis, ["/a", "/private/1", "/b", "/private/2", "/c"])
    rules = Politeness(StaticSiteConfig(Rate(100, 60, burst=8)), robots=robots)
    engine = FrontierClient(redis, "j", "list", "10.0.0.1", rules)
    results = engine.take_many(DOMAIN, 8, now=T0)
    assert [r.task.url.rsplit("/", 1)[1] for r in results] == ["a", "b", "c"]
    assert sorted(t.url for t in results[0].removed) == [f"http://{DOMAIN}/private/1", f"http://{DOMAIN}/private/2"]
    assert redis.zcard(keys.queue("j", DOMAIN)) == 0
    assert engine.take_many(DOMAIN, 8, now=T0)[0].outcome == Outcome.EMPTY


def test_a_host_whose_robots_txt_is_unreachable_holds_back_only_its_own_urls(svc: Any) -> None:
    """Issue 37, item 2: in a queue of several hosts (the partition by domain or address), the first tasks of a host
    whose robots.txt answers 500 are passed by — more of them than a batch reads — and the next host's are taken,
    by every way to take; the host is named so that its queue is asked again when its robots.txt is stored. Only
    when nothing else is left does the queue wait, and then briefly: another host's task may land."""
    from frontier.robots_cache import RobotsUnavailable

    def fetch(url: str) -> str:
        if url.startswith("http://broken.example.com"):
            raise RobotsUnavailable(f"{url}: HTTP 500")
        return ""

    redis = svc.redis()
    key = "example.com"
    broken = [Task(url=f"http://broken.example.com/{n}", crawlid="b", spider_type="list") for n in range(40)]
    ok = [Task(url=f"http://ok.example.com/{n}", crawlid="o", spider_type="list") for n in range(6)]
    redis.zadd(keys.queue("j", key), {t.encode(): n for n, t in enumerate(broken + ok)})  # broken's first
    rules = Politeness(StaticSiteConfig(Rate(6000, 60, burst=50)), robots=RobotsCache(redis, fetch))
    engine = FrontierClient(redis, "j", "list", "10.0.0.1", rules)
    first = engine.take(key, now=T0)
    assert first.task is not None and first.task.url == ok[0].url and first.waiting == {"broken.example.com"}
    batch = engine.take_many(key, 2, now=T0 + 1)
    assert [r.task.url for r in batch if r.task] == [t.url for t in ok[1:3]]
    [group] = engine.take_domains([key], 16)
    assert [r.task.url for r in group if r.task] == [t.url for t in ok[3:]]
    pending = engine.take(key, now=T0 + 3)
    assert pending.outcome == Outcome.ROBOTS_PENDING and 0 < pending.wait <= 1.0
    assert redis.zcard(keys.queue("j", key)) == len(broken)  # waiting, not dropped
