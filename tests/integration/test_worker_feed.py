"""The worker's own code, in process, on real Redis: dispatch -> take -> complete -> finisher, and re-delivery."""

from __future__ import annotations

import json
from typing import Any

import pytest

from deploy.procs import wait_for
from frontier.client import FrontierClient, add_to_index
from frontier.config_watch import StaticSiteConfig
from frontier.politeness import Politeness
from frontier.registry import WorkerInfo, WorkerRegistry
from master.dispatcher import DispatchConfig, Dispatcher
from master.finisher import Finisher
from messaging import keys
from messaging.clock import RedisClock
from messaging.siteconfig import Rate
from messaging.tasks import CrawlFields, CrawlState, Task, push_seeds
from spiders.dupefilter import BloomDupeFilter
from spiders.worker.commit import Committer, Finished
from spiders.worker.crawls import CrawlCatalog
from spiders.worker.feed import FeedConfig, TaskFeed

pytestmark = pytest.mark.integration

CRAWL = "feed-crawl"


def start_crawl(redis: Any, url: str, **limits: int) -> Task:
    redis.hset(keys.crawl(CRAWL), mapping={CrawlFields.STATE: CrawlState.RUNNING, CrawlFields.SPIDER_TYPE: "list",
                                            CrawlFields.USERID: "u", CrawlFields.URL: url, CrawlFields.CREATED: 1,
                                            CrawlFields.RULE: json.dumps({"first_page_xpath": {"list_from": "//li"}}),
                                            CrawlFields.ENQUEUED: 1, **limits})
    task = Task(url=url, crawlid=CRAWL, spider_type="list")
    push_seeds(redis, [task])
    return task


def worker_parts(cf: Any, job: str) -> tuple[Politeness, Committer, CrawlCatalog]:
    redis = cf.redis()
    frontier = FrontierClient(redis, job, "list", "10.0.0.1", Politeness(StaticSiteConfig(Rate(10_000, 60))))
    catalog = CrawlCatalog(redis, refresh_seconds=0.2)
    return frontier, Committer(redis, frontier, BloomDupeFilter(redis, cf.settings), catalog), catalog


def test_dispatch_take_complete_and_finish_through_the_worker_code(cf: Any) -> None:
    redis = cf.redis()
    start_crawl(redis, "http://site.test/")
    frontier, committer, catalog = worker_parts(cf, "feed-job")
    feed = TaskFeed(WorkerInfo("feed-job", "list", "10.0.0.1", "host", 1), frontier, WorkerRegistry(redis),
                    catalog, committer, FeedConfig(prefetch=8, commit_interval=0.05, idle_backoff_max=0.1))
    feed.register()
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), DispatchConfig(initial_rate=600))
    events: list[dict[str, Any]] = []
    finisher = Finisher(redis, events.append)
    clock = RedisClock(redis)
    feed.start()
    try:
        def dispatched_and_taken() -> Any:
            dispatcher.round(clock.now())
            return feed.pop()

        lease = wait_for(dispatched_and_taken, 10, "the start task dispatched and leased").lease
        assert lease.task.url == "http://site.test/"
        children = [lease.task.child(f"http://site.test/p{n}") for n in range(3)]
        children.append(lease.task.child("http://site.test/"))  # a link back to the start page: seen already
        feed.finish(Finished(lease, children, items=1))
        done: list[Any] = []

        def all_children_done() -> bool:
            dispatcher.round(clock.now())
            while (child := feed.pop()) is not None:
                done.append(child.lease.task.url)
                feed.finish(Finished(child.lease, [], items=1))
            return len(done) == 3 and feed.completed == 4

        wait_for(all_children_done, 15, "the three children dispatched, leased and completed")
        assert sorted(done) == [f"http://site.test/p{n}" for n in range(3)]
        wait_for(lambda: finisher.check(clock.now()) == [CRAWL], 10, "the crawl declared finished")
        assert events[0]["pages"] == 4 and events[0]["items"] == 4
        assert int(redis.hget(keys.crawl(CRAWL), CrawlFields.ENQUEUED)) == 4
    finally:
        feed.stop(timeout=5)
    assert redis.zscore(keys.RETIRED_WORKERS, "feed-job") is not None  # left the registry on stop


def lease_one(frontier: FrontierClient, task: Task) -> Any:
    frontier.redis.sadd(keys.job_domains(frontier.job), task.domain)
    frontier.redis.zadd(keys.queue(frontier.job, task.domain), {task.encode(): 0})
    frontier.redis.hincrby(keys.pending_domain(task.domain), task.crawlid, 1)
    return frontier.take(task.domain).lease


def test_max_pages_and_domain_max_pages_admit_only_what_fits(cf: Any) -> None:
    redis = cf.redis()
    start = start_crawl(redis, "http://site.test/", max_pages=6, domain_max_pages=4)
    redis.zrem(keys.SEEDS, start.encode())
    frontier, committer, catalog = worker_parts(cf, "job-l")
    catalog.load([CRAWL])
    lease = lease_one(frontier, start)
    children = [start.child(f"http://site.test/s{n}") for n in range(5)]
    children += [start.child(f"http://other.test/o{n}") for n in range(5)]
    result = committer.commit([Finished(lease, children)])
    # 1 start page + 3 more of site.test (4 per domain) + 2 of other.test (6 in all)
    assert result.pushed == 5 and result.over_limit == 5
    queued = sorted(Task.decode(m).url for m in redis.zrange(keys.SEEDS, 0, -1))
    assert queued == [f"http://other.test/o{n}" for n in range(2)] + [f"http://site.test/s{n}" for n in range(3)]


def test_popped_tasks_whose_request_has_not_gone_out_count_against_the_prefetch(cf: Any) -> None:
    """The scheduler pops a lease and may hold its request until its slot: the feed takes nothing in its place until
    the request is sent (or the task finishes), so a worker never holds more than its prefetch of unsent tasks."""
    redis = cf.redis()
    start = start_crawl(redis, "http://site.test/")
    redis.zrem(keys.SEEDS, start.encode())
    frontier, committer, catalog = worker_parts(cf, "job-p")
    tasks = [start.child(f"http://site.test/p{n}") for n in range(10)]
    redis.sadd(keys.job_domains("job-p"), start.domain)
    redis.zadd(keys.queue("job-p", start.domain), {task.encode(): n for n, task in enumerate(tasks)})
    redis.hincrby(keys.pending_domain(start.domain), CRAWL, len(tasks))
    add_to_index(redis, "job-p", "list", {start.domain: len(tasks)})  # landed: the domain is in the ready index
    feed = TaskFeed(WorkerInfo("job-p", "list", "10.0.0.1", "host", 1), frontier, WorkerRegistry(redis),
                    catalog, committer, FeedConfig(prefetch=4))  # not started: this test turns the feed's crank
    assert feed._fill() and len(feed.ready) == 4
    popped = [feed.pop() for _ in range(4)]  # waiting in the scheduler for their slots
    assert not feed.ready and feed.prefetched() == 4
    assert not feed._fill() and len(feed.held) == 4  # nothing more taken while they wait
    feed.sent(popped[0].member)
    feed.finish(Finished(popped[1].lease))  # finished unsent (no request could be made): its room is free too
    feed.sent(popped[0].member)  # a follow-up of a task already sent changes nothing
    assert feed._fill() and len(feed.ready) == 2 and feed.prefetched() == 4 and len(feed.held) == 6
