"""Report every download's outcome for the adaptive delay (``frontier.adaptive``): latency, status, or the error.

``DOWNLOADER_MIDDLEWARES = {"spiders.middlewares.adaptive.DownloadSampleMiddleware": 870}``: next to the downloader,
so that it sees each response as it came off the wire (before retries and redirects turn it into another request)
and each download error. It only sends the ``download_samples`` signal; the scheduler decides whether each site is
adaptive and hands the samples to its feed thread (no Redis call here, on the reactor).

One signal per batch, not per page: a Scrapy signal costs the reactor tens of microseconds (its dispatcher looks
its receivers up and inspects their arguments on every send), so the samples of :data:`FLUSH_SECONDS` go out in
one signal. The feed writes samples to the shared delay in batches of its own anyway; a quarter of a second more
is nothing to a delay that follows latencies over minutes. Samples still held when the spider closes are sent then.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scrapy import signals

from spiders import signals as fleet_signals
from spiders.worker.gate import site_of

FLUSH_SECONDS = 0.25  # samples gathered into one signal at most this long

DownloadSample = tuple[str, float, int, bool]  # (queue key, latency in seconds, status or 0, error)


class DownloadSampleMiddleware:
    def __init__(self, crawler: Any, call_later: Callable[..., Any] | None = None,
                 flush_seconds: float = FLUSH_SECONDS) -> None:
        self.crawler = crawler
        if call_later is None:
            from twisted.internet import reactor

            call_later = reactor.callLater
        self.call_later = call_later
        self.flush_seconds = flush_seconds
        self._samples: list[DownloadSample] = []
        self._pending: Any = None  # the scheduled flush, if any

    @classmethod
    def from_crawler(cls, crawler: Any) -> DownloadSampleMiddleware:
        middleware = cls(crawler)
        crawler.signals.connect(middleware.flush, signal=signals.spider_closed)
        return middleware

    def process_response(self, request: Any, response: Any, spider: Any = None) -> Any:
        latency = float(request.meta.get("download_latency") or 0.0)
        self._add(site_of(request), latency, response.status, response.status >= 500)
        return response

    def process_exception(self, request: Any, exception: BaseException, spider: Any = None) -> None:
        self._add(site_of(request), float(request.meta.get("download_latency") or 0.0), 0, True)

    def _add(self, site: str, latency: float, status: int, error: bool) -> None:
        self._samples.append((site, latency, status, error))
        if self._pending is None:
            self._pending = self.call_later(self.flush_seconds, self.flush)

    def flush(self, **_: Any) -> None:
        """Send the samples gathered so far in one ``download_samples`` signal."""
        if self._pending is not None and self._pending.active():
            self._pending.cancel()
        self._pending = None
        samples, self._samples = self._samples, []
        if samples:
            self.crawler.signals.send_catch_log(fleet_signals.download_samples, samples=samples)
