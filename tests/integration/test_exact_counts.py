"""Exact counts on real Redis: a page and its items counted once per canonical URL, re-processings as ``restored``,
failed tasks by reason, and ``crawl_finished`` carrying them (issue 29, item 2)."""

from __future__ import annotations

from typing import Any

import pytest

from frontier.client import FrontierClient, add_to_index
from frontier.config_watch import StaticSiteConfig
from frontier.politeness import Politeness
from frontier.registry import WorkerInfo, WorkerRegistry
from manager.console_data import reason_rows
from master.finisher import Finisher
from messaging import keys
from messaging.clock import RedisClock
from messaging.counts import BLACKLISTED, NOINDEX, ROBOTS, read_counts
from messaging.redis_monitor.plugins import Context
from messaging.redis_monitor.plugins.info import InfoPlugin
from messaging.siteconfig import Rate, SiteConfig
from messaging.tasks import CrawlFields, CrawlState, Task
from spiders.dupefilter import BloomDupeFilter
from spiders.worker.commit import Committer, Finished
from spiders.worker.crawls import CrawlCatalog
from spiders.worker.feed import FeedConfig, TaskFeed
from tests.integration.test_worker_feed import CRAWL, lease_one, start_crawl, worker_parts

pytestmark = pytest.mark.integration


def _commit(cf: Any, job: str, tasks: list[tuple[Task, int, str]]) -> Any:
    """Lease each task to ``job`` and commit it as processed with (items stored, failure reason)."""
    frontier, committer, catalog = worker_parts(cf, job)
    catalog.load([CRAWL])
    batch = [Finished(lease_one(frontier, task), items=items, failure=failure) for task, items, failure in tasks]
    return committer.commit(batch)


def _drain(redis: Any) -> None:
    redis.delete(keys.SEEDS)
    redis.hdel(keys.PENDING_SEEDS, CRAWL)


def test_a_page_processed_again_after_a_fault_is_restored_not_counted_again(cf: Any) -> None:
    redis = cf.redis()
    start = start_crawl(redis, "http://site.test/")
    _drain(redis)
    pages = [start.child(f"http://site.test/p{n}") for n in range(3)]
    _commit(cf, "job-a", [(start, 1, ""), *[(page, 1, "") for page in pages]])
    # a lease lost in a fault (Redis restarted, a worker retired): the same pages processed again by another job,
    # one of them under another spelling of its URL (the same canonical URL)
    again = [*pages[:2], start.child("http://site.test/p2#fragment")]
    _commit(cf, "job-b", [(page, 1, "") for page in again])
    counts = read_counts(redis, CRAWL)
    assert (counts.pages, counts.items, counts.restored) == (4, 4, 3)
    assert counts.exact and counts.failures == {} and counts.start_failure is None
    # the crawl hash mirrors the exact totals (what the manager's pages show)
    assert int(redis.hget(keys.crawl(CRAWL), CrawlFields.PAGES)) == 4
    assert int(redis.hget(keys.crawl(CRAWL), CrawlFields.ITEMS)) == 4


def test_failed_tasks_are_counted_by_reason_and_a_later_success_replaces_the_failure(cf: Any) -> None:
    redis = cf.redis()
    start = start_crawl(redis, "http://site.test/")
    _drain(redis)
    gone, slow, broken = (start.child(f"http://site.test/{name}") for name in ("gone", "slow", "broken"))
    _commit(cf, "job-a", [(start, 0, "HTTP 404"), (gone, 0, "HTTP 404"), (slow, 0, "TimeoutError"),
                          (broken, 0, "HTTP 500")])
    counts = read_counts(redis, CRAWL)
    assert counts.pages == 4 and counts.items == 0
    assert counts.failures == {"HTTP 404": 2, "HTTP 500": 1, "TimeoutError": 1}
    assert counts.start_failure == "HTTP 404"
    # the slow page answers when it is fetched again: it stops being a failure and its item counts now
    _commit(cf, "job-b", [(slow, 1, ""), (gone, 0, "HTTP 404")])
    counts = read_counts(redis, CRAWL)
    assert (counts.pages, counts.items, counts.restored) == (4, 1, 2)
    assert counts.failures == {"HTTP 404": 2, "HTTP 500": 1}


def test_a_page_stored_without_items_counts_the_items_of_its_first_store(cf: Any) -> None:
    redis = cf.redis()
    start = start_crawl(redis, "http://site.test/")
    _drain(redis)
    _commit(cf, "job-a", [(start, 0, "")])  # e.g. its item was dropped by a pipeline, or MongoDB refused it
    _commit(cf, "job-b", [(start, 2, "")])
    _commit(cf, "job-c", [(start, 2, "")])
    counts = read_counts(redis, CRAWL)
    assert (counts.pages, counts.items, counts.restored) == (1, 2, 2)


def test_crawl_finished_and_info_carry_the_exact_counts_and_why_the_start_url_failed(cf: Any) -> None:
    redis = cf.redis()
    start = start_crawl(redis, "http://site.test/")
    _drain(redis)
    _commit(cf, "job-a", [(start, 0, "HTTP 404")])
    _commit(cf, "job-b", [(start, 0, "HTTP 404")])  # fetched again after a fault
    info = InfoPlugin().handle("info:u:x:1", {"crawlid": CRAWL}, Context(redis, cf.settings))
    assert (info["pages"], info["items"], info["restored"]) == (1, 0, 1)
    assert info["failures"] == {"HTTP 404": 1} and info["start_failure"] == "HTTP 404"
    redis.sadd(keys.FINISH_CANDIDATES, CRAWL)
    events: list[dict[str, Any]] = []
    finisher = Finisher(redis, events.append)
    now = RedisClock(redis).now()
    assert finisher.check(now) == [CRAWL]
    event = events[0]
    assert (event["pages"], event["items"], event["restored"]) == (1, 0, 1)
    assert event["failures"] == {"HTTP 404": 1} and event["start_failure"] == "HTTP 404"
    assert event["event_id"] == f"{CRAWL}@{event['finished']!r}"
    assert redis.hget(keys.crawl(CRAWL), CrawlFields.STATE) == CrawlState.FINISHED.encode()


def test_a_failed_send_sends_the_event_again_with_the_same_id(cf: Any) -> None:
    redis = cf.redis()
    start = start_crawl(redis, "http://site.test/")
    _drain(redis)
    _commit(cf, "job-a", [(start, 1, "")])
    redis.sadd(keys.FINISH_CANDIDATES, CRAWL)
    sent: list[dict[str, Any]] = []

    def flaky(event: dict[str, Any]) -> None:
        sent.append(event)
        if len(sent) == 1:
            raise TimeoutError("Kafka away")

    finisher = Finisher(redis, flaky)
    now = RedisClock(redis).now()
    with pytest.raises(TimeoutError):
        finisher.check(now)
    assert finisher.check(now + 1) == [CRAWL]
    assert finisher.check(now + 2) == []
    assert len(sent) == 2 and sent[0] == sent[1]  # the same event, the same id: a consumer can tell


def test_the_counts_hashes_expire_with_the_crawl(cf: Any) -> None:
    redis = cf.redis()
    start = start_crawl(redis, "http://site.test/")
    _drain(redis)
    _commit(cf, "job-a", [(start, 1, "")])
    redis.sadd(keys.FINISH_CANDIDATES, CRAWL)
    assert Finisher(redis, lambda event: None, crawl_ttl=600).check(RedisClock(redis).now()) == [CRAWL]
    for key in (keys.crawl_counted(CRAWL), keys.crawl_totals(CRAWL)):
        assert 0 < redis.ttl(key) <= 600


def test_an_unknown_crawl_counts_nothing(cf: Any) -> None:
    counts = read_counts(cf.redis(), "nobody")
    assert (counts.pages, counts.items, counts.restored, counts.failures) == (0, 0, 0, {})


class _DisallowPrivate:
    """robots.txt's verdict as the robots cache gives it (``frontier.robots_cache.RobotsCache.allowed``): this site
    disallows ``/private/``. The cache itself is tested on a real site (test_robots_cache, e2e test_robots)."""

    def allowed(self, url: str, user_agent: str, domain: str | None = None) -> bool:
        return "/private/" not in url

    def pending_wait(self, url: str) -> float:
        return 1.0

    def crawl_delay(self, domain: str, user_agent: str) -> float | None:
        return None


def _queue(frontier: FrontierClient, task: Task) -> None:
    frontier.redis.sadd(keys.job_domains(frontier.job), task.domain)
    frontier.redis.zadd(keys.queue(frontier.job, task.domain), {task.encode(): 0})
    frontier.redis.hincrby(keys.pending_domain(task.domain), task.crawlid, 1)
    add_to_index(frontier.redis, frontier.job, frontier.spider_type, {task.domain: 1})  # as landing does


def test_pages_left_out_are_counted_by_reason_and_shown_on_the_crawl_page(cf: Any) -> None:
    """robots (dropped unfetched by the worker's frontier step), blacklisted (the domain's queue dropped),
    noindex (a page whose items were left out), errors, dropped items: in the exact counts, then on the page."""
    redis = cf.redis()
    start = start_crawl(redis, "http://site.test/")
    _drain(redis)
    rates = StaticSiteConfig(Rate(10_000, 60), {"bad.test": SiteConfig(blacklisted=True)})
    frontier = FrontierClient(redis, "job-r", "list", "10.0.0.1", Politeness(rates, robots=_DisallowPrivate()))
    catalog = CrawlCatalog(redis, refresh_seconds=0.2)
    committer = Committer(redis, frontier, BloomDupeFilter(redis, cf.settings), catalog)
    feed = TaskFeed(WorkerInfo("job-r", "list", "10.0.0.1", "host", 1), frontier, WorkerRegistry(redis), catalog,
                    committer, FeedConfig(prefetch=8))
    feed.register()
    private = [start.child(f"http://site.test/private/{n}") for n in range(2)]
    for task in [*private, start.child("http://site.test/open"), start.child("http://bad.test/x")]:
        _queue(frontier, task)
    taken = [feed.take.walk.poll(), feed.take.walk.poll()]
    assert [r.lease.task.url for r in taken if r is not None and r.lease] == ["http://site.test/open"]
    # the same disallowed URL dropped again (queued twice, e.g. by a re-delivered parent): counted once
    redis.hincrby(keys.pending_domain("site.test"), CRAWL, 1)
    feed._removed([private[0]], ROBOTS, "site.test")
    _commit(cf, "job-a", [(start, 0, NOINDEX), (start.child("http://site.test/gone"), 0, "HTTP 404")])
    redis.hset(keys.crawl_reasons(CRAWL), mapping={"dropped: DropItem": 3, "HTTP 404": 1})
    counts = read_counts(redis, CRAWL)
    assert counts.failures == {ROBOTS: 2, BLACKLISTED: 1, NOINDEX: 1, "HTTP 404": 1}, counts
    assert (counts.pages, counts.restored, counts.start_failure) == (5, 1, NOINDEX)  # /open is not done yet
    assert int(redis.hget(keys.crawl(CRAWL), CrawlFields.PAGES)) == 5  # mirrored
    # the tasks dropped unfetched left the crawl's pending counts (the crawl can finish); /open is still leased
    assert int(redis.hget(keys.pending_domain("site.test"), CRAWL)) == 1
    assert int(redis.hget(keys.pending_domain("bad.test"), CRAWL) or 0) == 0
    rows = {row["reason"]: row["count"] for row in reason_rows(redis, CRAWL)}
    assert rows[ROBOTS] == 2 and rows[NOINDEX] == 1 and rows[BLACKLISTED] == 1
    assert rows["dropped"] == 3 and rows["dropped: DropItem"] == 3
    assert rows["errors"] == 1 and rows["HTTP 404"] == 1  # from the exact counts, not the tally beside them
