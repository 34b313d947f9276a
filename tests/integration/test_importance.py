"""Importance ordering (issue 30, item 7) on real Redis through the worker's committer: every link counts, also one
the Bloom filter drops; new URLs enter seeds by their count; a URL waiting in seeds rises when more pages link to
it; a crawl without the rule field is pushed as before."""

from __future__ import annotations

import json
from typing import Any

import pytest

from frontier.client import FrontierClient, Lease
from frontier.config_watch import StaticSiteConfig
from frontier.politeness import Politeness
from messaging import keys
from messaging.siteconfig import Rate
from messaging.tasks import CrawlFields, CrawlState, Task
from spiders.dupefilter import BloomDupeFilter
from spiders.worker.commit import Committer, Finished
from spiders.worker.crawls import CrawlCatalog

pytestmark = pytest.mark.integration

RULE = {"rules": [{"allow": ".*", "follow": True}]}


def committer_for(cf: Any, crawls: dict[str, dict[str, Any]]) -> Committer:
    redis = cf.redis()
    for crawlid, rule in crawls.items():
        redis.hset(keys.crawl(crawlid), mapping={
            CrawlFields.STATE: CrawlState.RUNNING, CrawlFields.RULE: json.dumps(rule),
            CrawlFields.SPIDER_TYPE: "universal", CrawlFields.URL: "http://a.test/"})
    catalog = CrawlCatalog(redis, refresh_seconds=60)
    catalog.load(list(crawls))
    frontier = FrontierClient(redis, "imp-job", "universal", "10.0.0.1", Politeness(StaticSiteConfig(Rate(100, 60))))
    return Committer(redis, frontier, BloomDupeFilter(redis, cf.settings), catalog)


def page(crawlid: str, url: str, links: list[str]) -> Finished:
    task = Task(url=url, crawlid=crawlid, spider_type="universal")
    return Finished(Lease("a.test", task.encode(), 0.0), [task.child(link) for link in links])


def seeds_order(redis: Any) -> list[str]:
    return [Task.decode(member).url for member in redis.zrange(keys.SEEDS, 0, -1)]


def test_urls_linked_from_more_pages_come_first_and_rise_while_waiting(cf: Any) -> None:
    redis = cf.redis()
    committer = committer_for(cf, {"imp": {**RULE, "importance": True}})
    result = committer.commit([page("imp", "http://a.test/1", ["http://b.test/y", "http://b.test/x"]),
                               page("imp", "http://a.test/2", ["http://b.test/x", "http://b.test/x"])])
    assert result.pushed == 2
    assert seeds_order(redis) == ["http://b.test/x", "http://b.test/y"]  # x: 2 pages link it, y: 1
    x = Task.decode(redis.zrange(keys.SEEDS, 0, 0)[0])
    assert x.priority == 100  # the task is unchanged; only its place in seeds reflects its importance

    # y is linked again by two more pages: the Bloom filter drops the links, but they count, and y rises past x
    committer.commit([page("imp", "http://a.test/3", ["http://b.test/y", "http://c.test/z"]),
                      page("imp", "http://a.test/4", ["http://b.test/y"])])
    assert seeds_order(redis) == ["http://b.test/y", "http://b.test/x", "http://c.test/z"]
    assert redis.zcard(keys.SEEDS) == 3 and int(redis.hget(keys.PENDING_SEEDS, "imp")) == 3  # counted once each
    assert int(redis.hget(keys.importance_inlinks("imp"), _fp("http://b.test/y"))) == 3
    assert redis.pttl(keys.importance_inlinks("imp")) > 0 and redis.pttl(keys.importance_members("imp")) > 0


def test_a_crawl_without_the_rule_field_keeps_arrival_order(cf: Any) -> None:
    redis = cf.redis()
    committer = committer_for(cf, {"plain": RULE})
    committer.commit([page("plain", "http://a.test/1", ["http://b.test/y", "http://b.test/x"]),
                      page("plain", "http://a.test/2", ["http://b.test/x"])])
    assert seeds_order(redis) == ["http://b.test/y", "http://b.test/x"]
    assert not redis.exists(keys.importance_inlinks("plain"))


def _fp(url: str) -> str:
    from frontier.bloom import url_fingerprint

    return url_fingerprint(url).hex()



def test_a_push_sent_twice_pushes_once(cf: Any, monkeypatch: Any) -> None:
    """The children journal holds for importance crawls too (``tests/integration/test_children_journal.py``): the
    call that pushes deletes the pages' entries and pushes only for those still there, so a push that ran, lost its
    answer and was sent again pushes nothing twice, even once the first copies left seeds."""
    from spiders.worker import journal

    redis = cf.redis()
    committer = committer_for(cf, {"imp": {**RULE, "importance": True}})
    real = journal.push_by_importance

    def twice(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)
        assert sorted(seeds_order(redis)) == ["http://b.test/x", "http://b.test/y"]
        redis.delete(keys.SEEDS)  # dispatched meanwhile
        return real(*args, **kwargs)

    monkeypatch.setattr(journal, "push_by_importance", twice)
    assert committer.commit([page("imp", "http://a.test/1", ["http://b.test/y", "http://b.test/x"])]).pushed == 0
    assert seeds_order(redis) == [] and not list(redis.scan_iter(match=keys.children_journal("*")))
