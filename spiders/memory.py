"""A worker gives freed memory back to the system every CRAWLFLEET_MALLOC_TRIM_INTERVAL seconds (a Scrapy extension
around :class:`messaging.memory.TrimThread`; see there why a worker's memory would otherwise grow with its pages)."""

from __future__ import annotations

from typing import Any

from scrapy import signals

from messaging.memory import TrimThread
from spiders.fleet_settings import crawlfleet_settings


class MemoryTrim:
    def __init__(self, interval: float) -> None:
        self.thread = TrimThread(interval)

    @classmethod
    def from_crawler(cls, crawler: Any) -> MemoryTrim:
        extension = cls(crawlfleet_settings(crawler.settings).malloc_trim_interval)
        crawler.signals.connect(extension.engine_started, signal=signals.engine_started)
        crawler.signals.connect(extension.engine_stopped, signal=signals.engine_stopped)
        return extension

    def engine_started(self) -> None:
        self.thread.start()

    def engine_stopped(self) -> None:
        self.thread.stop()
