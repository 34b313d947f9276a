"""Conditional requests and change detection of revisits (spiders.middlewares.conditional), and how a revisited
page's item is written (spiders.pipelines.mongo), without services."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from pymongo import ReplaceOne, UpdateOne
from scrapy import Request
from scrapy.http import HtmlResponse, Response

from deploy.demoweb.changing import ChangingSite
from messaging.tasks import Task
from spiders.middlewares.conditional import ConditionalMiddleware, page_digest, unchanged
from spiders.pipelines.mongo import _operation

pytestmark = pytest.mark.unit

RULE = {"rules": [{"allow": "/a/"}], "revisit": {"pages": "all", "interval": 60}}


def middleware(rule: dict[str, Any] = RULE) -> ConditionalMiddleware:
    crawl = SimpleNamespace(rule=rule)
    crawler = SimpleNamespace(spider=SimpleNamespace(crawl_for=lambda task: crawl), stats=None)
    return ConditionalMiddleware(crawler)


def request_for(task: Task) -> Request:
    return Request(task.url, meta={"task": task})


def page(site: ChangingSite, path: str) -> tuple[int, dict[str, str], str]:
    status, headers, body = site.answer(path, {})
    return status, dict(headers), body.decode()


def test_digest_ignores_ads_and_timestamps_but_not_the_text() -> None:
    clock = [0.0]
    site = ChangingSite(clock=lambda: clock[0])
    _, _, first = page(site, "/a/3.html")  # never changes
    clock[0] = 5.0
    _, _, again = page(site, "/a/3.html")
    assert first != again and page_digest(first, "http://x/a/3.html") == page_digest(again, "http://x/a/3.html")
    list_before = page(site, "/")[2]
    clock[0] = 5.5
    assert page_digest(list_before, "http://x/") == page_digest(page(site, "/")[2], "http://x/")
    clock[0] = 20.0  # a new article is listed
    assert page_digest(list_before, "http://x/") != page_digest(page(site, "/")[2], "http://x/")


def test_validators_go_out_and_a_304_is_not_modified() -> None:
    task = Task(url="http://x/a/0.html", crawlid="c", spider_type="universal",
                revisit={"gen": 2, "etag": '"0-1"', "last_modified": "Thu, 01 Jan 2026 00:00:00 GMT", "digest": "d"})
    request = request_for(task)
    mw = middleware()
    mw.process_request(request)
    assert request.headers[b"If-None-Match"] == b'"0-1"'
    assert request.headers[b"If-Modified-Since"] == b"Thu, 01 Jan 2026 00:00:00 GMT"
    assert 304 in request.meta["handle_httpstatus_list"]
    response = Response(task.url, status=304, request=request)
    mw.process_response(request, response)
    assert request.meta["revisit"]["outcome"] == "not_modified" and unchanged(response)
    assert request.meta["revisit"]["etag"] == '"0-1"'  # kept from the full fetch


def test_full_answers_compare_digests() -> None:
    site = ChangingSite(clock=lambda: 0.0)
    _, headers, body = page(site, "/a/1.html")
    digest = page_digest(body, "http://x/a/1.html")
    mw = middleware()
    outcomes = []
    for stored in ({}, {"gen": 1, "digest": digest}, {"gen": 1, "digest": "other"}):
        task = Task(url="http://x/a/1.html", crawlid="c", spider_type="universal", revisit=stored)
        request = request_for(task)
        response = HtmlResponse(task.url, body=body.encode(), encoding="utf-8", headers=headers, request=request)
        mw.process_response(request, response)
        outcomes.append(request.meta["revisit"]["outcome"])
        assert request.meta["revisit"]["last_modified"] == headers["Last-Modified"]
    assert outcomes == ["fetched", "unchanged", "changed"]
    failed = request_for(Task(url="http://x/gone", crawlid="c", spider_type="universal", revisit={"gen": 3}))
    mw.process_response(failed, Response("http://x/gone", status=404, request=failed))
    assert failed.meta["revisit"]["outcome"] == "failed"


def test_crawls_without_revisit_are_untouched() -> None:
    task = Task(url="http://x/", crawlid="c", spider_type="universal", revisit={"gen": 1, "etag": '"e"'})
    request = request_for(task)
    mw = middleware({"rules": [{"allow": "/"}]})
    mw.process_request(request)
    mw.process_response(request, Response(task.url, status=200, request=request))
    assert b"If-None-Match" not in request.headers and "revisit" not in request.meta


def test_a_revisited_item_updates_its_document() -> None:
    assert isinstance(_operation("k", {"url": "u"}, None), ReplaceOne)
    changed = _operation("k", {"url": "u", "fetched_at": "T"}, {"digest": "d2", "previous_digest": "d1",
                                                                 "changed": True})
    assert isinstance(changed, UpdateOne)
    assert changed._doc == {"$set": {"url": "u", "fetched_at": "T", "digest": "d2", "changed_at": "T",
                                     "previous_digest": "d1"}, "$inc": {"versions": 1}}
