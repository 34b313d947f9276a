"""A test hook, never in the project's settings: a Scrapy extension that wedges the worker's feed thread on SIGUSR2.

Enabled only by a test, with ``-s EXTENSIONS=…`` (:func:`extensions_with_wedge`). On SIGUSR2 the feed's next pass
blocks for good in its first step (as a call that never returns would), while the reactor and the heartbeat thread
go on: what the worker's liveness must tell apart (spiders/health.py).
"""

from __future__ import annotations

import json
import signal
import threading
from typing import Any

from scrapy import signals

from spiders import settings as project
from spiders.metrics import feed_of


class WedgeFeed:
    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler
        self.release = threading.Event()  # never set: the wedge lasts until the process ends

    @classmethod
    def from_crawler(cls, crawler: Any) -> WedgeFeed:
        extension = cls(crawler)
        crawler.signals.connect(extension.engine_started, signal=signals.engine_started)
        return extension

    def engine_started(self) -> None:
        signal.signal(signal.SIGUSR2, self.wedge)

    def wedge(self, signum: int, frame: Any) -> None:
        feed = feed_of(self.crawler)
        step = feed._reserve_some  # the first thing every pass does

        def wedged() -> None:
            self.release.wait()
            step()

        feed._reserve_some = wedged


def extensions_with_wedge() -> str:
    """``EXTENSIONS=…`` for ``-s``: the project's extensions and the wedge."""
    return "EXTENSIONS=" + json.dumps({**project.EXTENSIONS, f"{__name__}.WedgeFeed": 900})
