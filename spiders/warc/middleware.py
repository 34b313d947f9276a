"""Every fetch into the worker's WARC files: ``DOWNLOADER_MIDDLEWARES = {"spiders.warc.middleware.WarcMiddleware":
870}``, on when ``CRAWLFLEET_WARC_DIR`` is set (``NotConfigured`` otherwise: Scrapy leaves it out).

Order 870, next to the downloader: responses travel from high orders to low, so the response is recorded as it
came off the wire (before decompression at 590, redirects at 600, retries at 550: a 301 and a 503 are archived
too), and the request with every header the middlewares below it added (User-Agent at 500, cookies at 700).

On the reactor only an :class:`~spiders.warc.writer.Exchange` is built (headers copied as text, bodies by
reference); the writer thread does the rest. When the spider closes, the writer is closed in a thread (the last
file is finished and indexed) and its counts go to Scrapy's stats: ``warc/response``, ``warc/revisit``,
``warc/request``, ``warc/metadata``, ``warc/failed``, ``warc/files``, ``warc/writer_cpu_seconds`` and
``warc/writer_cpu_share`` (the writer thread's CPU time over the process's CPU time since the middleware started),
``warc/indexer_cpu_seconds`` (the CDXJ indexers, child processes) and ``warc/index_failures``.
"""

from __future__ import annotations

import os
import resource
import socket
import time
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

from scrapy import Request, signals
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.threads import deferToThread

from spiders.fleet_settings import crawlfleet_settings
from spiders.warc.writer import Exchange, WarcWriter

__all__ = ["WarcMiddleware", "exchange_of"]


def _text_headers(headers: Any) -> list[tuple[str, str]]:
    return [(name.decode("latin-1"), value.decode("latin-1"))
            for name, values in headers.items() for value in values]


def exchange_of(request: Request, response: Response, fields: dict[str, str]) -> Exchange:
    """What the WARC records of a fetch need, read from Scrapy's request and response."""
    try:
        reason = HTTPStatus(response.status).phrase
    except ValueError:
        reason = ""
    ip = getattr(response, "ip_address", None)
    return Exchange(url=response.url, method=request.method, request_headers=_text_headers(request.headers),
                    request_body=request.body or b"", status=response.status, reason=reason,
                    response_headers=_text_headers(response.headers), body=response.body,
                    fetched=datetime.now(UTC), ip=str(ip) if ip else None, fields=fields)


class WarcMiddleware:
    def __init__(self, writer: WarcWriter, job: str, crawler: Any = None) -> None:
        self.writer = writer
        self.job = job
        self.crawler = crawler
        self._cpu_started = time.process_time()

    @classmethod
    def from_crawler(cls, crawler: Any) -> WarcMiddleware:
        settings = crawlfleet_settings(crawler.settings)
        if not settings.warc_dir:
            raise NotConfigured("CRAWLFLEET_WARC_DIR is not set")
        spider = getattr(crawler, "spidercls", None)
        job = crawler.settings.get("CRAWLFLEET_JOB") or f"{getattr(spider, 'name', 'worker')}-{os.getpid()}"
        info = {"hostname": socket.gethostname(), "job": job, "operator": "crawlfleet",
                "robots": "obey" if settings.robotstxt_obey else "ignore"}
        writer = WarcWriter(settings.warc_dir, job, prefix=settings.warc_prefix, max_size=settings.warc_max_size,
                            dedup_entries=settings.warc_dedup_entries, info=info)
        middleware = cls(writer, job, crawler)
        crawler.signals.connect(middleware.spider_closed, signal=signals.spider_closed)
        return middleware

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Response:
        task = request.meta.get("task")
        fields = {"crawlid": getattr(task, "crawlid", "") or "", "job": self.job,
                  "depth": str(getattr(task, "depth", "") if task is not None else ""),
                  "via": getattr(task, "referer", "") or (request.headers.get(b"Referer") or b"").decode("latin-1")}
        self.writer.submit(exchange_of(request, response, fields))
        return response

    async def spider_closed(self) -> None:
        writer = self.writer
        await maybe_deferred_to_future(deferToThread(writer.close))
        stats = getattr(self.crawler, "stats", None)
        if stats is None:
            return
        for kind, count in writer.written.items():
            stats.set_value(f"warc/{kind}", count)
        stats.set_value("warc/failed", writer.failed)
        stats.set_value("warc/files", len(writer.files.closed_files))
        process_cpu = time.process_time() - self._cpu_started
        stats.set_value("warc/writer_cpu_seconds", round(writer.cpu_seconds, 3))
        stats.set_value("warc/writer_cpu_share", round(writer.cpu_seconds / process_cpu, 4) if process_cpu else 0.0)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        stats.set_value("warc/indexer_cpu_seconds", round(children.ru_utime + children.ru_stime, 3))
        stats.set_value("warc/index_failures", writer.files.index_failures)
