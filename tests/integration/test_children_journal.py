"""The children journal on real Redis (issue 37, item 3): a commit cut off anywhere and committed again — by the feed's
retry of the same batch, or by another worker once the lease expired — pushes exactly the children that no one
pushed, once; it never loses one, and never pushes again what another page, or its own earlier attempt, pushed.

(A Redis kill -9 once made every page of a 526-page documentation site, each linking the others, be fetched again
once per page in flight: a commit committed again pushed *every* link of its page, seen or not.)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from messaging import keys
from messaging.tasks import Task
from spiders.worker.commit import Finished
from spiders.worker.journal import JOURNAL_KEEP_SECONDS
from tests.integration.test_worker_feed import CRAWL, lease_one, start_crawl, worker_parts

pytestmark = pytest.mark.integration


class RedisAway(ConnectionError):
    pass


def queued(redis: Any) -> list[str]:
    return sorted(Task.decode(member).url for member in redis.zrange(keys.SEEDS, 0, -1))


def entries(redis: Any) -> list[bytes]:
    return list(redis.scan_iter(match=keys.children_journal("*")))


def dispatched(redis: Any) -> None:
    """What the master does with seeds meanwhile: the tasks leave it for the workers' queues."""
    redis.delete(keys.SEEDS)


def page_with_links(cf: Any, job: str = "job-a") -> tuple[Any, Any, Task, list[Task], list[Task]]:
    """A committer of ``job``; the crawl's start page, leased to it, linking five pages the crawl has seen (pushed by
    other pages) and three new ones."""
    redis = cf.redis()
    start = start_crawl(redis, "http://site.test/")
    dispatched(redis)
    frontier, committer, catalog = worker_parts(cf, job)
    catalog.load([CRAWL])
    seen = [start.child(f"http://site.test/seen{n}") for n in range(5)]
    committer.mark_seen(seen)
    fresh = [start.child(f"http://site.test/new{n}") for n in range(3)]
    return frontier, committer, start, seen, fresh


def fail_once(monkeypatch: Any, owner: Any, name: str, before: bool) -> None:
    """``owner.name`` raises ``RedisAway`` at its first call: before doing anything, or after doing it (the call ran,
    its answer was lost)."""
    real = getattr(owner, name)
    calls: list[int] = []

    def once(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) > 1:
            return real(*args, **kwargs)
        if not before:
            real(*args, **kwargs)
        raise RedisAway("Redis went away")

    monkeypatch.setattr(owner, name, once)


def test_a_commit_pushes_its_new_children_once_and_leaves_no_entry(cf: Any) -> None:
    frontier, committer, start, seen, fresh = page_with_links(cf)
    result = committer.commit([Finished(lease_one(frontier, start), seen + fresh, items=1)])
    assert (result.pushed, result.duplicates, result.repushed) == (3, 5, 0)
    assert queued(committer.redis) == sorted(t.url for t in fresh)
    assert entries(committer.redis) == []


@pytest.mark.parametrize("step, before", [("_write", False), ("bloom", True), ("bloom", False), ("_push_owed", True)])
def test_a_commit_retried_after_redis_cut_it_off_pushes_exactly_the_new_children(cf: Any, monkeypatch: Any,
                                                                                  step: str, before: bool) -> None:
    """Cut off after its journal entry was written, before or after the Bloom filter marked the children (the
    answer lost), or before its push: the feed's retry of the batch pushes the three new children, not the five
    seen ones, whatever the filter now says of the new ones."""
    frontier, committer, start, seen, fresh = page_with_links(cf)
    finished = Finished(lease_one(frontier, start), seen + fresh, items=1)
    if step == "bloom":
        bloom = committer.dupefilter.bloom(committer.dupefilter.namespace({"crawlid": CRAWL}))
        fail_once(monkeypatch, bloom, "add_fingerprints", before)
    else:
        fail_once(monkeypatch, committer.journal, step, before)
    with pytest.raises(RedisAway):
        committer.commit([finished])
    result = committer.commit([finished])  # the feed keeps a batch that raised and commits it again
    assert queued(committer.redis) == sorted(t.url for t in fresh)
    assert (result.pushed, result.repushed) == (3, 3) and len(result.completed) == 1
    assert entries(committer.redis) == []


def test_a_commit_retried_after_its_push_pushes_nothing_again(cf: Any, monkeypatch: Any) -> None:
    """Cut off after the push (the acknowledgement failed): the children may have left seeds already; the retry
    pushes none of them again."""
    frontier, committer, start, seen, fresh = page_with_links(cf)
    finished = Finished(lease_one(frontier, start), seen + fresh, items=1)
    fail_once(monkeypatch, frontier, "complete", before=True)
    with pytest.raises(RedisAway):
        committer.commit([finished])
    assert queued(committer.redis) == sorted(t.url for t in fresh)
    dispatched(committer.redis)
    result = committer.commit([finished])
    assert queued(committer.redis) == [] and result.pushed == 0 and len(result.completed) == 1


def test_a_push_the_client_sends_twice_pushes_once(cf: Any, monkeypatch: Any) -> None:
    """A push that ran, whose answer was lost and that was sent again (a client that re-sends failed calls) finds
    its entries gone: nothing is pushed twice, even once the first copies left seeds."""
    frontier, committer, start, seen, fresh = page_with_links(cf)
    real = committer.journal._push_owed

    def twice(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)
        dispatched(committer.redis)
        return real(*args, **kwargs)

    monkeypatch.setattr(committer.journal, "_push_owed", twice)
    result = committer.commit([Finished(lease_one(frontier, start), seen + fresh, items=1)])
    assert queued(committer.redis) == [] and result.pushed == 0


def test_a_task_processed_again_after_its_worker_died_mid_commit_pushes_its_entry(cf: Any, monkeypatch: Any) -> None:
    """job-a dies between the Bloom filter and seeds (the children marked, none pushed); the task's lease expires and
    job-b processes it again — this time its fetch fails, so it has no links at all: it still pushes exactly the
    three children job-a marked, and the crawl's seen pages stay out."""
    frontier, committer, start, seen, fresh = page_with_links(cf, "job-a")
    bloom = committer.dupefilter.bloom(committer.dupefilter.namespace({"crawlid": CRAWL}))
    fail_once(monkeypatch, bloom, "add_fingerprints", before=False)
    with pytest.raises(RedisAway):
        committer.commit([Finished(lease_one(frontier, start), seen + fresh, items=1)])
    assert queued(committer.redis) == [] and len(entries(committer.redis)) == 1
    (entry,) = entries(committer.redis)
    assert 0 < committer.redis.pttl(entry) <= JOURNAL_KEEP_SECONDS * 1000  # a forgotten entry expires

    frontier_b, committer_b, catalog_b = worker_parts(cf, "job-b")
    catalog_b.load([CRAWL])
    result = committer_b.commit([Finished(lease_one(frontier_b, start), [], failure="TimeoutError")])
    assert queued(committer.redis) == sorted(t.url for t in fresh) and result.repushed == 3
    assert entries(committer.redis) == []
    # the next page that links them finds them all seen
    other = start.child("http://site.test/other")
    again = committer_b.commit([Finished(lease_one(frontier_b, other), seen + fresh, items=1)])
    assert (again.pushed, again.duplicates) == (0, 8)


def test_a_new_child_linked_twice_in_a_batch_is_owed_by_one_page(cf: Any) -> None:
    frontier, committer, start, seen, fresh = page_with_links(cf)
    other = start.child("http://site.test/other")
    result = committer.commit([Finished(lease_one(frontier, start), seen + fresh, items=1),
                               Finished(lease_one(frontier, other), [*fresh, start], items=1)])
    assert queued(committer.redis) == sorted(t.url for t in fresh) and result.pushed == 3


def own(task: Task, fp: str, **request: Any) -> Task:
    """``task`` as a request of one's own spider (issue 35): keyed by its fingerprint ``fp`` (hex)."""
    return replace(task, request={"fp": fp, **request})


def test_ones_own_spiders_children_are_keyed_by_fingerprint_and_a_dont_filter_one_is_never_asked(
        cf: Any, monkeypatch: Any) -> None:
    """One's own spider's page: a GET and a POST of the same URL are two requests; a request whose fingerprint the
    crawl saw is a duplicate, unless it has ``dont_filter``, which is pushed unasked and never marked. Cut off after
    the filter marked them, the retry pushes each of them once."""
    frontier, committer, start, _, _ = page_with_links(cf)
    get, post = own(start.child("http://site.test/form"), "aa" * 16), own(start.child("http://site.test/form"),
                                                                          "bb" * 16, method="POST")
    seen = own(start.child("http://site.test/seen"), "cc" * 16)
    again = own(start.child("http://site.test/seen"), "cc" * 16, dont_filter=True, flags=["again"])
    committer.push_new("earlier", [seen])  # pushed by someone before: its fingerprint is in the filter
    dispatched(committer.redis)
    page = own(start, "dd" * 16)
    bloom = committer.dupefilter.bloom(committer.dupefilter.namespace({"crawlid": CRAWL}))
    fail_once(monkeypatch, bloom, "add_fingerprints", before=False)
    finished = Finished(lease_one(frontier, page), [get, post, seen, again], items=1)
    with pytest.raises(RedisAway):
        committer.commit([finished])
    result = committer.commit([finished])
    members = sorted(committer.redis.zrange(keys.SEEDS, 0, -1))
    assert members == sorted(t.encode().encode() for t in (get, post, again)) and result.pushed == 3
    assert entries(committer.redis) == []
    assert bloom.contains_fingerprints([bytes.fromhex("cc" * 16), bytes.fromhex("dd" * 16)]) == [True, True]
    dispatched(committer.redis)
    later = committer.commit([Finished(lease_one(frontier, own(start.child("http://site.test/x"), "ee" * 16)),
                                       [get, post, seen, again])])
    assert sorted(committer.redis.zrange(keys.SEEDS, 0, -1)) == [again.encode().encode()] and later.pushed == 1


def test_start_requests_a_dead_worker_marked_are_pushed_by_the_worker_that_takes_over(cf: Any,
                                                                                     monkeypatch: Any) -> None:
    """A crawl's start requests go through the journal under their batch's name: job-a marks its batch and dies
    before the push; job-b, which takes the start claim over, pushes its batch of the same name — which holds
    other requests (its start() is not the same) — and so pushes what job-a marked as well as its own, each once."""
    _, committer, start, _, _ = page_with_links(cf, "job-a")
    batch_a = [own(start.child(f"http://site.test/a{n}"), f"{n:02x}" * 16) for n in range(3)]
    fail_once(monkeypatch, committer.journal, "_push_owed", before=True)
    with pytest.raises(RedisAway):
        committer.push_new("start 0", batch_a)
    assert queued(committer.redis) == []

    _, committer_b, catalog_b = worker_parts(cf, "job-b")
    catalog_b.load([CRAWL])
    batch_b = [batch_a[0], own(start.child("http://site.test/b"), "ff" * 16)]
    assert committer_b.push_new("start 0", batch_b) == 4
    assert queued(committer.redis) == sorted(t.url for t in [*batch_a, batch_b[1]])
    assert entries(committer.redis) == []
    dispatched(committer.redis)
    assert committer_b.push_new("start 0", batch_b) == 0  # a push sent again finds them all seen
