"""Failed URLs on real Redis and MongoDB (issue 42, item 3; messaging.failures): kept per crawl as the exact counts
say, bounded, listed in agreement with the counts, exported, and retried — also after the crawl finished."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest

from frontier.bloom import url_fingerprint
from master.finisher import Finisher
from messaging import failures, keys
from messaging.clock import RedisClock
from messaging.counts import ROBOTS, read_counts
from messaging.failures import FailureStore
from messaging.tasks import CrawlFields, Task
from spiders.worker.commit import Committer, Finished
from tests.integration.test_worker_feed import CRAWL, lease_one, start_crawl, worker_parts

pytestmark = pytest.mark.integration


def committer(cf: Any, job: str, store: Any, bound: int = 100) -> tuple[Any, Committer]:
    frontier, plain, catalog = worker_parts(cf, job)
    catalog.load([CRAWL])
    return frontier, Committer(plain.redis, frontier, plain.dupefilter, catalog, store, bound)


def commit(cf: Any, job: str, store: Any, outcomes: list[tuple[Task, int, str, int | None, int]],
           bound: int = 100) -> None:
    """Lease each task to ``job`` and commit it processed: (task, items, failure reason, status, attempts)."""
    frontier, instance = committer(cf, job, store, bound)
    batch = [Finished(lease_one(frontier, task), items=items, failure=reason, status=status, attempts=attempts,
                      failed_at=1_700_000_000.0 if reason else 0.0)
             for task, items, reason, status, attempts in outcomes]
    instance.commit(batch)


def listed(cf: Any, redis: Any, *reasons: str) -> dict[str, dict[str, Any]]:
    return {doc["url"]: doc for doc in failures.failures(cf.mongo(), redis, CRAWL, reasons)}


def crawl_with_failures(cf: Any, bound: int = 100) -> tuple[Any, Task, dict[str, Task]]:
    redis = cf.redis()
    start = start_crawl(redis, "http://site.test/")
    redis.delete(keys.SEEDS)
    redis.hdel(keys.PENDING_SEEDS, CRAWL)
    pages = {name: start.child(f"http://site.test/{name}", callback="detail", meta={"section": name})
             for name in ("gone", "broken", "slow", "private")}
    commit(cf, "job-a", FailureStore(cf.mongo()), [
        (start, 1, "", None, 1), (pages["gone"], 0, "HTTP 404", 404, 1), (pages["broken"], 0, "HTTP 500", 500, 3),
        (pages["slow"], 0, "TimeoutError", None, 3)], bound)
    commit(cf, "job-a", FailureStore(cf.mongo()), [(pages["private"], 0, ROBOTS, None, 0)], bound)
    return redis, start, pages


def test_failed_pages_are_kept_as_the_counts_say_and_bounded(cf: Any) -> None:
    redis, _, pages = crawl_with_failures(cf, bound=2)
    counts = read_counts(redis, CRAWL)
    assert counts.failures == {"HTTP 404": 1, "HTTP 500": 1, "TimeoutError": 1, ROBOTS: 1}
    assert (counts.listed, counts.unlisted) == (2, 1)  # robots.txt is no failure to list; the third is beyond
    docs = listed(cf, redis)
    assert set(docs) == {pages["gone"].url, pages["broken"].url}  # the first two, in the order they were counted
    broken = docs[pages["broken"].url]
    assert (broken["reason"], broken["status"], broken["attempts"], broken["retry"]) == ("HTTP 500", 500, 3, 0)
    assert broken["time"] == broken["first"] and broken["job"] == "job-a"
    assert Task.decode(broken["task"]).callback == "detail"  # the task as submitted: retried the same way


def test_a_retry_reopens_a_finished_crawl_fetches_the_listed_failures_past_dedup_and_it_finishes_again(
        cf: Any) -> None:
    redis, _, pages = crawl_with_failures(cf)
    redis.sadd(keys.FINISH_CANDIDATES, CRAWL)
    events: list[dict[str, Any]] = []
    finisher = Finisher(redis, events.append, crawl_ttl=3600)
    now = RedisClock(redis).now()
    assert finisher.check(now) == [CRAWL]
    first = events[0]
    assert first["failed_urls"] == {"listed": 3, "unlisted": 0} and first["retries"] == 0
    result = failures.retry(redis, cf.mongo(), CRAWL, ["HTTP 500", "TimeoutError"])
    assert (result.retry, result.submitted, result.reopened, result.state) == (1, 2, True, "running")
    assert redis.ttl(keys.crawl(CRAWL)) == -1 and redis.ttl(keys.crawl_counted(CRAWL)) == -1  # lives again
    retried = sorted((Task.decode(m) for m in redis.zrange(keys.SEEDS, 0, -1)), key=lambda t: t.url)
    assert [t.url for t in retried] == sorted([pages["broken"].url, pages["slow"].url])
    assert all(t.retry == 1 and t.callback == "detail" for t in retried)  # the same tasks, numbered
    _, plain, _ = worker_parts(cf, "job-x")  # the dedup filter has seen them: a retry goes past it
    bloom = plain.dupefilter.bloom(plain.dupefilter.namespace({"crawlid": CRAWL}))
    assert bloom.add_fingerprints([url_fingerprint(t.url) for t in retried]) == [False, False]
    again = failures.retry(redis, cf.mongo(), CRAWL)  # at once: only the 404 is not on its way already
    assert (again.retry, again.submitted, again.skipped) == (2, 1, 2)
    redis.delete(keys.SEEDS)
    redis.hdel(keys.PENDING_SEEDS, CRAWL)
    broken, slow = (next(t for t in retried if t.url == pages[name].url) for name in ("broken", "slow"))
    # the site is fixed for /broken; /slow now answers 503
    commit(cf, "job-b", FailureStore(cf.mongo()), [(broken, 1, "", None, 1), (slow, 0, "HTTP 503", 503, 3)])
    counts = read_counts(redis, CRAWL)
    assert (counts.pages, counts.items, counts.restored, counts.retried) == (5, 2, 0, 2)
    assert counts.failures == {"HTTP 404": 1, "HTTP 503": 1, ROBOTS: 1} and counts.listed == 2
    docs = listed(cf, redis)
    assert set(docs) == {pages["gone"].url, pages["slow"].url}  # the page that works left the list
    assert (docs[pages["slow"].url]["reason"], docs[pages["slow"].url]["attempts"]) == ("HTTP 503", 6)
    assert docs[pages["slow"].url]["retry"] == 1
    redis.sadd(keys.FINISH_CANDIDATES, CRAWL)
    redis.hdel(keys.PENDING_SEEDS, CRAWL)
    assert finisher.check(now + 5) == [CRAWL]
    second = events[1]
    assert second["event_id"] != first["event_id"] and second["retries"] == 2
    assert (second["items"], second["retried"], second["failed_urls"]) == (2, 2, {"listed": 2, "unlisted": 0})


def test_the_list_agrees_with_the_counts_and_exports_as_jsonl_and_csv(cf: Any) -> None:
    redis, _, pages = crawl_with_failures(cf)
    # a page that works now whose document a crash left behind (counted as recovered, never deleted)
    redis.hset(keys.crawl_counted(CRAWL), url_fingerprint(pages["gone"].url).hex(), "1")
    docs = list(failures.failures(cf.mongo(), redis, CRAWL))
    assert sorted(d["url"] for d in docs) == sorted([pages["broken"].url, pages["slow"].url])
    assert [d["url"] for d in failures.failures(cf.mongo(), redis, CRAWL, ["HTTP 500"])] == [pages["broken"].url]
    lines = b"".join(failures.export((failures.row(d) for d in docs), "jsonl")).decode().splitlines()
    rows = [json.loads(line) for line in lines]
    assert {r["reason"] for r in rows} == {"HTTP 500", "TimeoutError"}
    assert set(rows[0]) == set(failures.COLUMNS) and rows[0]["time"].startswith("2023-11-14T22:13:20")
    text = b"".join(failures.export((failures.row(d) for d in docs), "csv")).decode("utf-8-sig")
    table = list(csv.reader(io.StringIO(text)))
    assert table[0] == failures.COLUMNS and len(table) == 3
    assert {row[1] for row in table[1:]} == {"HTTP 500", "TimeoutError"}


class FlakyStore(FailureStore):
    """MongoDB refuses the first write (as when it is away for a moment)."""

    def __init__(self, database: Any) -> None:
        super().__init__(database)
        self.calls = 0

    def apply(self, crawlid: str, keep: Any, drop: Any) -> None:
        self.calls += 1
        if self.calls == 1:
            raise ConnectionError("MongoDB away")
        super().apply(crawlid, keep, drop)


def test_a_commit_tried_again_after_mongodb_refused_the_list_counts_once(cf: Any) -> None:
    redis = cf.redis()
    start = start_crawl(redis, "http://site.test/")
    frontier, instance = committer(cf, "job-f", FlakyStore(cf.mongo()))
    batch = [Finished(lease_one(frontier, start), failure="HTTP 500", status=500, attempts=3, failed_at=1.0)]
    with pytest.raises(ConnectionError):
        instance.commit(batch)
    assert redis.zcard(keys.inflight("job-f", start.domain)) == 1  # not acknowledged: the feed keeps the batch
    result = instance.commit(batch)
    assert len(result.completed) == 1
    counts = read_counts(redis, CRAWL)
    assert (counts.pages, counts.restored, counts.listed) == (1, 0, 1)  # counted once, listed once
    assert [d["attempts"] for d in failures.failures(cf.mongo(), redis, CRAWL)] == [3]
    assert int(redis.hget(keys.crawl(CRAWL), CrawlFields.PAGES)) == 1


def test_a_stopped_or_unknown_crawl_is_not_retried(cf: Any) -> None:
    redis, _, _ = crawl_with_failures(cf)
    redis.hset(keys.crawl(CRAWL), CrawlFields.STATE, "stopped")
    with pytest.raises(failures.NotRetryable, match="stopped"):
        failures.retry(redis, cf.mongo(), CRAWL)
    with pytest.raises(failures.NotRetryable, match="no such crawl"):
        failures.retry(redis, cf.mongo(), "nothing-here")
