"""Report every download's outcome for the adaptive delay (``frontier.adaptive``): latency, status, or the error.

``DOWNLOADER_MIDDLEWARES = {"spiders.middlewares.adaptive.DownloadSampleMiddleware": 870}``: next to the downloader,
so that it sees each response as it came off the wire (before retries and redirects turn it into another request)
and each download error. It only sends the ``download_sample`` signal; the scheduler decides whether the site is
adaptive and hands the sample to its feed thread (no Redis call here, on the reactor).
"""

from __future__ import annotations

from typing import Any

from spiders import signals as fleet_signals


class DownloadSampleMiddleware:
    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Any) -> DownloadSampleMiddleware:
        return cls(crawler)

    def process_response(self, request: Any, response: Any, spider: Any = None) -> Any:
        latency = float(request.meta.get("download_latency") or 0.0)
        self._send(request, latency, response.status, response.status >= 500)
        return response

    def process_exception(self, request: Any, exception: BaseException, spider: Any = None) -> None:
        self._send(request, float(request.meta.get("download_latency") or 0.0), 0, True)

    def _send(self, request: Any, latency: float, status: int, error: bool) -> None:
        self.crawler.signals.send_catch_log(fleet_signals.download_sample, request=request, latency=latency,
                                            status=status, error=error)
