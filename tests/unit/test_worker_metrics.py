"""The worker's metrics extension counts, per crawl, why pages gave no item, and per site its HTTP statuses."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from scrapy.exceptions import DropItem
from scrapy.http import HtmlResponse, Request

from messaging.tasks import Task
from spiders.metrics import ProcessUsage, WorkerMetrics

pytestmark = pytest.mark.unit


def extension() -> WorkerMetrics:
    crawler = SimpleNamespace(settings={}, signals=None, engine=None)
    metrics = WorkerMetrics.__new__(WorkerMetrics)
    WorkerMetrics.__init__(metrics, crawler)
    return metrics


def response(url: str, status: int, crawlid: str) -> HtmlResponse:
    request = Request(url, meta={"task": Task(url=url, crawlid=crawlid, spider_type="list")})
    return HtmlResponse(url, status=status, body=b"<html></html>", request=request)


def test_reasons_and_statuses_are_counted_per_crawl_and_site():
    metrics = extension()
    spider = SimpleNamespace(name="list")
    for status in (200, 404, 404, 503):
        page = response(f"http://news.example.com/{status}", status, "c1")
        metrics.response_received(page, page.request, spider)
    dropped = response("http://news.example.com/x", 200, "c2")
    metrics.item_dropped({}, dropped, DropItem("no title"), spider)
    assert metrics.crawl_reasons == {("c1", "HTTP 404"): 2, ("c1", "HTTP 503"): 1, ("c2", "dropped: DropItem"): 1}
    assert metrics.site_statuses == {("example.com", "200"): 1, ("example.com", "404"): 2, ("example.com", "503"): 1}
    assert metrics.pages == 4


def test_process_usage_reports_cpu_and_memory():
    ticks = iter([0.0, 2.0])
    usage = ProcessUsage(clock=lambda: next(ticks))
    sample = usage.sample()
    assert float(sample["cpu_percent"]) >= 0 and int(sample["rss_bytes"]) > 1024 * 1024
