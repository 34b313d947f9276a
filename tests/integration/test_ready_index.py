"""The ready index on real Redis and on the 3-node cluster: landing fills it, the walk asks only due, non-empty
domains, a lost update is repaired by the reconcile, the gauges count the queued tasks."""

from __future__ import annotations

import time
from typing import Any

import pytest

from frontier.client import FrontierClient
from frontier.config_watch import StaticSiteConfig
from frontier.domain_walk import DomainWalk, ReadyWalk
from frontier.politeness import Politeness
from frontier.registry import WorkerRegistry
from master.dispatcher import DispatchConfig, Dispatcher
from master.requeue import Requeuer
from messaging import keys
from messaging.siteconfig import Rate
from messaging.tasks import Task, push_seeds
from tests.integration.test_dispatcher import T0, with_history

pytestmark = pytest.mark.integration

FAST = Rate(1_000_000, 60, burst=1_000_000)  # pacing never binds


@pytest.fixture(params=["single", pytest.param("cluster", marks=pytest.mark.cluster)])
def svc(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue("cf" if request.param == "single" else "cf_cluster")


def dispatch(redis: Any, job: str, domains: int, per_domain: int) -> list[Task]:
    tasks = [Task(url=f"http://d{d}.test/p{n}", crawlid="c1", spider_type="list")
             for d in range(domains) for n in range(per_domain)]
    push_seeds(redis, tasks)
    with_history(redis, job, 100_000)
    placed = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), DispatchConfig(batch=500)).round(T0).placed
    assert placed == {job: len(tasks)}
    return tasks


def walker(redis: Any, job: str, lease_seconds: float = 600.0, **options: float) -> tuple[ReadyWalk, FrontierClient]:
    engine = FrontierClient(redis, job, "list", "10.0.0.1", Politeness(StaticSiteConfig(FAST)),
                            lease_seconds=lease_seconds)
    return ReadyWalk(engine.take, engine.ready, **options), engine


def test_landing_fills_the_index_and_the_gauges(svc: Any) -> None:
    redis = svc.redis()
    dispatch(redis, "w", domains=20, per_domain=3)
    assert sorted(m.decode() for m in redis.zrange(keys.ready("w"), 0, -1)) == sorted(f"d{d}.test" for d in range(20))
    assert int(redis.get(keys.ready_tasks("w"))) == 60 == int(redis.get(keys.ready_tasks_type("list")))


def test_the_walk_takes_every_task_once_and_empties_the_index(svc: Any) -> None:
    redis = svc.redis()
    tasks = dispatch(redis, "w", domains=30, per_domain=4)
    walk, _ = walker(redis, "w", idle_poll=0.05)
    taken = []
    while (result := walk.next(timeout=2.0)) is not None:
        taken.append(result.task.url)
    assert sorted(taken) == sorted(t.url for t in tasks)
    assert redis.zcard(keys.ready("w")) == 0  # every drained domain left the index
    assert int(redis.get(keys.ready_tasks("w"))) == 0 == int(redis.get(keys.ready_tasks_type("list")))


def test_a_lost_index_update_is_repaired_by_the_reconcile(svc: Any) -> None:
    redis = svc.redis()
    dispatch(redis, "w", domains=5, per_domain=1)
    redis.zrem(keys.ready("w"), "d3.test")  # as if the master died between the queue write and the index write
    walk, _ = walker(redis, "w", idle_poll=0.05, reconcile_seconds=0.5, reconcile_tick=0.1)
    taken = set()
    deadline = time.monotonic() + 20.0
    while len(taken) < 5 and time.monotonic() < deadline:
        result = walk.next(timeout=1.0)
        if result is not None:
            taken.add(result.domain)
    assert taken == {f"d{d}.test" for d in range(5)}
    assert walk.skips["reconciled"] == 1 and walk.index.reconciled == 1


def test_expired_leases_back_in_their_queue_reenter_the_index(svc: Any) -> None:
    redis = svc.redis()
    dispatch(redis, "w", domains=1, per_domain=1)
    walk, engine = walker(redis, "w", lease_seconds=5.0, idle_poll=0.05)
    assert walk.next(timeout=2.0) is not None
    assert walk.next(timeout=0.3) is None and redis.zcard(keys.ready("w")) == 0
    returned = engine.requeue_expired("d0.test", now=time.time() + 60)
    assert len(returned) == 1
    walk.index.requeued({"d0.test": 1})
    assert redis.zrange(keys.ready("w"), 0, -1) == [b"d0.test"]
    assert int(redis.get(keys.ready_tasks("w"))) == 1 == engine.ready_count()
    assert walk.next(timeout=2.0).task.url == "http://d0.test/p0"


def test_a_retired_jobs_index_and_gauge_go_with_its_tasks(svc: Any) -> None:
    redis = svc.redis()
    dispatch(redis, "w", domains=4, per_domain=2)
    WorkerRegistry(redis).retire("w", now=T0 + 1)
    assert Requeuer(redis, int(redis.get(keys.MASTER_EPOCH))).requeue("w") == 8
    assert not redis.exists(keys.ready("w")) and not redis.exists(keys.ready_tasks("w"))
    assert int(redis.get(keys.ready_tasks_type("list"))) == 0


def commands(redis: Any) -> int:
    return sum(int(stats["calls"]) for name, stats in redis.info("commandstats").items()
               if name.startswith("cmdstat_") and "info" not in name)


def drain_counting(redis: Any, walk: Any) -> tuple[int, int]:
    before = commands(redis)
    taken = 0
    while walk.next(timeout=0.5) is not None:
        taken += 1
    return taken, commands(redis) - before - 1  # minus the INFO that read "before"


def test_empty_domains_are_not_probed(cf: Any) -> None:
    """Redis commands per task (INFO commandstats, calls inside scripts included) do not grow with the number of
    empty domains of the job, where the round-robin walk's do."""
    redis = cf.redis()
    dispatch(redis, "w", domains=10, per_domain=20)
    walk, _ = walker(redis, "w", idle_poll=0.2, reconcile_seconds=3600.0)
    few_taken, few = drain_counting(redis, walk)
    redis.flushdb()
    dispatch(redis, "w", domains=10, per_domain=20)
    redis.sadd(keys.job_domains("w"), *[f"empty{n}.test" for n in range(2000)])  # domains drained long ago
    walk, engine = walker(redis, "w", idle_poll=0.2, reconcile_seconds=3600.0)
    many_taken, many = drain_counting(redis, walk)
    assert few_taken == many_taken == 200
    assert many <= few * 1.2, (few, many)
    # the old walk asks every domain: the same work costs it many times more
    redis.flushdb()
    dispatch(redis, "w", domains=10, per_domain=20)
    redis.sadd(keys.job_domains("w"), *[f"empty{n}.test" for n in range(2000)])
    old = DomainWalk(engine.take, engine.domains, max_empty_backoff=5.0)
    old_taken, old_cost = drain_counting(redis, old)
    assert old_taken == 200 and old_cost > 3 * many, (old_cost, many)


def test_steps_for_a_group_of_domains_keep_the_queue_order_and_robots(svc: Any) -> None:
    """FrontierClient.take_domains: several domains' steps in two round trips; disallowed heads dropped, order kept, an
    empty queue reported without a step, a throttled domain reported with its wait."""
    from frontier.robots_cache import RobotsCache
    from messaging.tasks import queue_score

    redis = svc.redis()
    robots = RobotsCache(redis, lambda url: "User-agent: *\nDisallow: /private/\n")
    rates = StaticSiteConfig(Rate(100, 60, burst=8))
    engine = FrontierClient(redis, "w", "list", "10.0.0.1", Politeness(rates, robots=robots))
    for domain, paths in {"a.test": ["/1", "/private/x", "/2"], "b.test": ["/1"]}.items():
        redis.zadd(keys.queue("w", domain), {Task(url=f"http://{domain}{p}", crawlid="c", spider_type="list").encode():
                                             queue_score(100, n) for n, p in enumerate(paths)})
    for domain in ("a.test", "b.test"):  # robots.txt known for both before the batch
        robots.allowed(f"http://{domain}/", "crawlfleet")
    a, b, empty = engine.take_domains(["a.test", "b.test", "none.test"], 8)
    assert [r.task.url for r in a] == ["http://a.test/1", "http://a.test/2"]
    assert [t.url for t in a[0].removed] == ["http://a.test/private/x"]
    assert [r.task.url for r in b] == ["http://b.test/1"] and b[0].drained
    assert [r.outcome for r in empty] == ["empty"]
    assert not redis.exists(keys.queue("w", "a.test")) and redis.zcard(keys.inflight("w", "a.test")) == 2
    redis.zadd(keys.queue("w", "b.test"), {Task(url="http://b.test/9", crawlid="c", spider_type="list").encode(): 1})
    slow = FrontierClient(redis, "w", "list", "10.0.0.1", Politeness(StaticSiteConfig(Rate(1, 60)), robots=robots))
    [refused] = slow.take_domains(["b.test"], 8)
    assert [r.outcome for r in refused] == ["throttled"] and refused[0].wait > 50


def test_a_group_step_asks_a_pending_robots_txt_once(svc: Any) -> None:
    """A domain whose robots.txt another process is fetching: the group step reports it pending with the wait the
    cache gives, after one look at the cache (not a second claim through the single step), and takes nothing."""
    from frontier.robots_cache import PENDING_WAIT, RobotsCache

    redis = svc.redis()
    fetcher = RobotsCache(redis, None)
    assert fetcher.claim("http://a.test/")  # another process holds the fetch
    robots = RobotsCache(redis, None)
    looks: list[str] = []
    state = robots.state
    robots.state = lambda url: looks.append(url) or state(url)  # type: ignore[method-assign]
    engine = FrontierClient(redis, "w", "list", "10.0.0.1", Politeness(StaticSiteConfig(FAST), robots=robots))
    redis.zadd(keys.queue("w", "a.test"), {Task(url="http://a.test/1", crawlid="c", spider_type="list").encode(): 1})
    [pending] = engine.take_domains(["a.test"], 8)
    assert [(r.outcome, r.wait) for r in pending] == [("robots_pending", PENDING_WAIT)]
    assert looks == ["http://a.test/1"]
    assert redis.zcard(keys.queue("w", "a.test")) == 1 and not redis.exists(keys.inflight("w", "a.test"))
