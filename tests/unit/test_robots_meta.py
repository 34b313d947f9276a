"""What pages tell robots: meta robots, X-Robots-Tag, rel="nofollow"; the rule switch; node-set XPaths at intake."""

from __future__ import annotations

from typing import Any

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse

from messaging.tasks import Task
from messaging.validation import Rejected, parse_request
from spiders.robots_meta import header_directives, robots_meta
from spiders.rules import ListRule, UniversalRule
from spiders.spiders.universal import UniversalSpider
from spiders.worker.crawls import CrawlInfo

pytestmark = pytest.mark.unit

TOKEN = "crawlfleet"
PAGE = """<html><head><title>t</title>{meta}</head><body><h1>Title</h1>
<a href="/a.html">a</a> <a href="/b.html" rel="nofollow">b</a> <a href="/c.html" rel="noopener NoFollow">c</a>
<ul class="l"><li><a href="/d.html" rel="nofollow">d</a></li><li><a href="/e.html">e</a></li></ul>
<a class="next" rel="nofollow" href="/page/2/">next</a></body></html>"""


def page(meta: str = "", headers: dict[str, Any] | None = None, url: str = "http://site.test/p.html") -> HtmlResponse:
    return HtmlResponse(url, body=PAGE.format(meta=meta).encode(), encoding="utf-8", headers=headers or {})


@pytest.mark.parametrize("meta, headers, expected", [
    ('<meta name="robots" content="noindex">', None, {"noindex"}),
    ('<meta name="ROBOTS" content="NoFollow, noarchive">', None, {"nofollow", "noarchive"}),
    ('<meta name="robots" content="none">', None, {"noindex", "nofollow"}),
    ('<meta name="CrawlFleet" content="noindex">', None, {"noindex"}),
    ('<meta name="googlebot" content="noindex, nofollow">', None, set()),  # another crawler's
    ('<meta name="robots" content="all">', None, set()),
    ("", {"X-Robots-Tag": "noindex"}, {"noindex"}),
    ("", {"X-Robots-Tag": ["googlebot: noindex", "crawlfleet: nofollow"]}, {"nofollow"}),
    ("", {"X-Robots-Tag": "otherbot: noindex, nofollow"}, set()),  # both for otherbot
    ("", {"X-Robots-Tag": "noarchive, otherbot: noindex"}, {"noarchive"}),
    ("", {"X-Robots-Tag": "unavailable_after: Friday, 25-Jun-2010 15:00:00 PST, noindex"}, {"noindex"}),
    ('<meta name="robots" content="nofollow">', {"X-Robots-Tag": "CRAWLFLEET: none"}, {"noindex", "nofollow"}),
])
def test_directives_for_our_token(meta: str, headers: dict[str, Any] | None, expected: set[str]) -> None:
    assert set(robots_meta(page(meta, headers), TOKEN).directives) == expected


def test_header_directives_without_a_page() -> None:
    assert header_directives(["max-snippet: 20, nofollow"], TOKEN) == {"nofollow"}
    assert header_directives([], TOKEN) == set()


def test_rel_nofollow_links_are_not_followed_unless_the_rule_ignores_them() -> None:
    rule = {"rules": [{"follow": True}]}
    result = UniversalRule.from_json(rule, "http://site.test/").parse_page(page(), "")
    assert sorted(link.url for link in result.links) == ["http://site.test/a.html", "http://site.test/e.html"]
    assert result.nofollow == 4
    ignoring = UniversalRule.from_json({**rule, "ignore_robots_meta": True}, "http://site.test/")
    assert len(ignoring.parse_page(page(), "").links) == 6


def test_list_rule_leaves_out_nofollow_detail_and_next_links() -> None:
    spec = {"first_page_xpath": {"list_from": "//ul[@class='l']/li", "second_page_url": "a/@href",
                                 "next_page": "//a[@class='next']", "title": "a"}}
    result = ListRule.from_json(spec).parse_list(page())
    assert [link.url for link in result.links] == ["http://site.test/e.html"]
    assert result.items == [{"title": "d"}] and result.nofollow == 2  # d's entry still gives its list item
    ignoring = ListRule.from_json({**spec, "ignore_robots_meta": True}).parse_list(page())
    assert len(ignoring.links) == 3


class Catalog:
    """The worker's answer to ``FleetSpider.crawl_for``: one crawl."""

    def __init__(self, crawl: CrawlInfo) -> None:
        self.crawl = crawl

    def crawl_for(self, task: Task) -> CrawlInfo:
        return self.crawl


def crawl_output(response: HtmlResponse, rule: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    spider = UniversalSpider()
    spider.crawl_for = Catalog(CrawlInfo(crawlid="c", url="http://site.test/", rule=rule)).crawl_for
    task = Task(url=response.url, crawlid="c", spider_type="universal", callback="rule:0")
    response.request = Request(response.url, meta={"task": task})
    out = list(spider.parse_task(response))
    return [o for o in out if isinstance(o, dict)], [o.url for o in out if isinstance(o, Request)]


EXTRACT = {"rules": [{"extract": {"title": "//h1"}, "follow": True}]}


@pytest.mark.parametrize("meta, headers, items, links", [
    ("", None, 1, 2),
    ('<meta name="robots" content="noindex">', None, 0, 2),
    ('<meta name="robots" content="nofollow">', None, 1, 0),
    ("", {"X-Robots-Tag": "none"}, 0, 0),
])
def test_the_spider_obeys_the_page(meta: str, headers: Any, items: int, links: int) -> None:
    found, followed = crawl_output(page(meta, headers), EXTRACT)
    assert (len(found), len(followed)) == (items, links)
    found, followed = crawl_output(page(meta, headers), {**EXTRACT, "ignore_robots_meta": True})
    assert (len(found), len(followed)) == (1, 6)  # the switch: everything, as before


def test_noarchive_is_recorded_in_the_item() -> None:
    found, _ = crawl_output(page('<meta name="robots" content="noarchive">'), EXTRACT)
    assert found[0]["robots_meta"] == ["noarchive"] and found[0]["title"] == "Title"
    found, _ = crawl_output(page(), EXTRACT)
    assert "robots_meta" not in found[0]


BASE = {"userid": "u", "crawlid": "c", "url": "http://site.test/"}


@pytest.mark.parametrize("xpath, words", [
    ("count(//a)", "gives a number, not a node-set"),
    ("string(//h1)", "gives a string"),
    ("//a/@href", "text or attribute values"),
    ("//li/text()", "text or attribute values"),
    ("//ul[", "is not a valid XPath"),
])
def test_xpaths_that_must_select_elements_are_checked_at_intake(xpath: str, words: str) -> None:
    with pytest.raises(Rejected) as list_error:
        parse_request({**BASE, "spider_type": "list", "rule": {"first_page_xpath": {"list_from": xpath}}})
    assert str(list_error.value).startswith("$.rule.first_page_xpath.list_from: ") and words in str(list_error.value)
    with pytest.raises(Rejected) as universal_error:
        parse_request({**BASE, "spider_type": "universal", "rule": {"rules": [{"restrict_xpaths": ["//main", xpath]}]}})
    assert str(universal_error.value).startswith("$.rule.rules[0].restrict_xpaths[1]: ")


def test_element_xpaths_and_the_switch_pass() -> None:
    list_rule = {"first_page_xpath": {"list_from": "//li | //tr", "n": "count(a)"}, "ignore_robots_meta": True}
    parse_request({**BASE, "spider_type": "list", "rule": list_rule})  # a field may be a number
    parse_request({**BASE, "spider_type": "universal", "rule": {"rules": [{"restrict_xpaths": "//div[@id='x']"}],
                                                                "ignore_robots_meta": False}})
    with pytest.raises(Rejected, match=r"\$.rule.ignore_robots_meta: 'yes' is not of type boolean"):
        parse_request({**BASE, "spider_type": "universal", "rule": {"rules": [{}], "ignore_robots_meta": "yes"}})


@pytest.mark.parametrize("xpath, ok", [
    ("count(//a)", False), ("boolean(//a[@class='next'])", False), ("//a[@class='next']", True),
    ("//a[@class='next']/@href", True), ("string(//a[@class='next']/@href)", True),
])
def test_link_xpaths_must_give_links(xpath: str, ok: bool) -> None:
    rule = {"first_page_xpath": {"list_from": "//li", "next_page": xpath, "second_page_url": xpath}}
    if ok:
        parse_request({**BASE, "spider_type": "list", "rule": rule})
        return
    with pytest.raises(Rejected, match=r"is not an XPath that selects links: it gives a (number|boolean), not links"):
        parse_request({**BASE, "spider_type": "list", "rule": rule})


class _Catalog:
    def get(self, crawlid: str) -> Any:
        return None


class _RequestMaker:
    def request_for(self, task: Task, crawl: Any) -> Request:
        return Request(task.url)


@pytest.mark.parametrize("meta, reason", [('<meta name="robots" content="noindex">', "noindex"), ("", "")])
def test_a_noindex_page_is_counted_with_its_reason(meta: str, reason: str) -> None:
    """The spider marks the response whose items noindex left out; the task tracker finishes that task with the
    reason ``noindex`` (the crawl's exact counts count it so: messaging.counts)."""
    from frontier.client import Lease
    from spiders.robots_meta import NOINDEX_META
    from spiders.worker.tracker import TaskTracker

    task = Task(url="http://site.test/p.html", crawlid="c", spider_type="universal", callback="rule:0")
    finished: list[Any] = []
    tracker = TaskTracker(_RequestMaker(), _Catalog(), lambda url: True, finished.append)
    request = tracker.start(Lease("site.test", task.encode(), 0.0))
    response = page(meta)
    response.request = request
    spider = UniversalSpider()
    spider.crawl_for = Catalog(CrawlInfo(crawlid="c", url="http://site.test/", rule=EXTRACT)).crawl_for
    out = list(spider.parse_task(response))
    assert bool(response.meta.get(NOINDEX_META)) == bool(reason)
    items = [o for o in out if isinstance(o, dict)]
    for _ in items:
        tracker.item_produced(response)
        tracker.item_settled(response, stored=True)
    tracker.output_done(response, [])
    assert [(f.failure, f.items) for f in finished] == [(reason, len(items))]
