"""Which finished pages the commit batch hands to the revisit schedule, and with what outcome
(spiders.worker.commit.Committer._revisits), with a fake schedule: the choice is pure logic."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from frontier.revisit import FAILED, FETCHED, NOT_MODIFIED
from messaging.tasks import Task
from spiders.worker.commit import Committer, Finished


class FakeSchedule:
    def __init__(self) -> None:
        self.recorded: list[Any] = []

    def record(self, fetched: Any, policies: Any) -> list[str]:
        self.recorded += list(fetched)
        return []


def committer(rules: dict[str, dict[str, Any]], states: dict[str, str] | None = None) -> Committer:
    crawls = {crawlid: SimpleNamespace(rule=rule, live=(states or {}).get(crawlid, "running") in ("running", "paused"))
              for crawlid, rule in rules.items()}
    instance = Committer.__new__(Committer)
    instance.catalog = SimpleNamespace(get=crawls.get)
    instance.schedule = FakeSchedule()
    return instance


def finished(task: Task, revisit: dict[str, Any] | None) -> Finished:
    return Finished(lease=SimpleNamespace(task=task, member=task.encode()), revisit=revisit)


pytestmark = pytest.mark.unit
LIST_RULE = {"first_page_xpath": {"list_from": "//li"}, "revisit": {"pages": "list", "interval": 60}}


def test_list_pages_of_a_list_rule_and_pages_with_links_of_a_universal_one() -> None:
    instance = committer({"l": LIST_RULE, "u": {"rules": [], "revisit": {"pages": "list", "interval": 60}},
                          "plain": {"rules": []}})
    batch = [
        finished(Task(url="http://a/list", crawlid="l", spider_type="list"), {"outcome": FETCHED, "links": 0}),
        finished(Task(url="http://a/d1", crawlid="l", spider_type="list", callback="detail"),
                 {"outcome": FETCHED, "links": 0}),
        finished(Task(url="http://b/", crawlid="u", spider_type="universal"),
                 {"outcome": FETCHED, "links": 3, "etag": '"e"', "digest": "d"}),
        finished(Task(url="http://b/leaf", crawlid="u", spider_type="universal"), {"outcome": FETCHED, "links": 0}),
        finished(Task(url="http://c/", crawlid="plain", spider_type="universal"), {"outcome": FETCHED, "links": 9}),
        finished(Task(url="http://b/gone", crawlid="u", spider_type="universal"), None),  # failed first fetch
    ]
    assert instance._revisits(batch) == 2
    recorded = {entry.task.url: entry for entry in instance.schedule.recorded}
    assert set(recorded) == {"http://a/list", "http://b/"}
    assert (recorded["http://b/"].etag, recorded["http://b/"].digest) == ('"e"', "d")


def test_revisits_always_count_and_stopped_crawls_never() -> None:
    instance = committer({"u": {"rules": [], "revisit": {"pages": r"/only$", "interval": 60}},
                          "s": {"rules": [], "revisit": {"pages": "all", "interval": 60}}}, {"s": "stopped"})
    revisit = Task(url="http://b/other", crawlid="u", spider_type="universal", revisit={"gen": 3})
    batch = [finished(revisit, {"outcome": NOT_MODIFIED}), finished(revisit, None),
             finished(Task(url="http://s/", crawlid="s", spider_type="universal"), {"outcome": FETCHED})]
    assert instance._revisits(batch) == 2
    assert [(entry.outcome, entry.generation) for entry in instance.schedule.recorded] == [
        (NOT_MODIFIED, "3"), (FAILED, "3")]
