"""Marks where a redirect ended as seen, so that a later link to the final URL is not fetched again.

Scrapy's RedirectMiddleware (order 600) answers a 3xx with a new request for the target. That request normally
passes the scheduler, and so the dupefilter, but not when it keeps ``dont_filter`` (e.g. a start URL), and a
distributed scheduler may hand it straight to the downloader. This middleware sits below it
(``DOWNLOADER_MIDDLEWARES = {"spiders.middlewares.redirect_dedup.RedirectDedupMiddleware": 590}``: responses travel
from high to low orders, so it sees the final response after RedirectMiddleware is done with it) and marks the final
URL and every URL of ``request.meta["redirect_urls"]`` in the Bloom filter of the request's crawl, in one batch.
"""

from __future__ import annotations

from typing import Any

from scrapy import Request, signals
from scrapy.http import Response

from spiders.dupefilter import BloomDupeFilter


class RedirectDedupMiddleware:
    def __init__(self, dupefilter: BloomDupeFilter) -> None:
        self.dupefilter = dupefilter

    @classmethod
    def from_crawler(cls, crawler: Any) -> RedirectDedupMiddleware:
        middleware = cls(BloomDupeFilter.from_crawler(crawler))
        crawler.signals.connect(middleware.spider_closed, signal=signals.spider_closed)
        return middleware

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Response:
        redirected = request.meta.get("redirect_urls")
        if redirected:
            self.dupefilter.mark_urls([*redirected, response.url], request.meta)
        return response

    def spider_closed(self) -> None:
        self.dupefilter.close("spider closed")
