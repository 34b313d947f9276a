"""Item pipelines (seed 4.3.1.4), in this order (the fleet's add-on, :mod:`spiders.addon`, plugs them in)::

    ITEM_PIPELINES = {
        "spiders.pipelines.clean.CleanPipeline": 300,      # tidy text fields, drop items missing required fields
        "spiders.pipelines.pagework.PageWorkPipeline": 340,  # the next two in a process pool, when on
        "spiders.pipelines.metadata.MetadataPipeline": 350,  # JSON-LD, microdata, OpenGraph, Twitter cards
        "spiders.pipelines.extract.ExtractPipeline": 400,  # main text, title, date from the page's HTML
        "spiders.pipelines.mongo.MongoPipeline": 900,      # batched, acknowledged writes, one collection per crawl
    }

Items are plain dicts (see the worker contracts): keys starting with ``_`` are internal (``_html``, ``_required``);
the pipelines consume them and the MongoDB pipeline never stores them. Every pipeline follows Scrapy 2.19's
signatures: no ``spider`` argument, and a coroutine (not a Deferred) where a pipeline has to wait.

Counts go to Scrapy's stats and, for the cluster, to ``Stats(redis, "crawler")`` through one
:class:`messaging.stats.BufferedStats` per crawler (:func:`cluster_counters`): counting never waits on Redis.
"""

from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from messaging import clients, modules
from messaging.stats import BufferedStats, Stats
from spiders.fleet_settings import crawlfleet_settings

_COUNTERS: WeakKeyDictionary[Any, BufferedStats] = WeakKeyDictionary()


def cluster_counters(crawler: Any) -> BufferedStats:
    """The crawler's buffered cluster counters (module ``crawler``), shared by its pipelines: one flush thread.

    ``close()`` may be called by each pipeline that used it (the second call finds nothing left to send).
    """
    counters = _COUNTERS.get(crawler)
    if counters is None:
        redis = clients.redis_client(crawlfleet_settings(crawler.settings))
        counters = _COUNTERS[crawler] = BufferedStats(Stats(redis, modules.CRAWLER))
    return counters


async def close_counters(counters: BufferedStats | None) -> None:
    """Flush and stop counters in a thread (the last flush is a Redis round trip: not on the reactor)."""
    if counters is None:
        return
    from scrapy.utils.defer import maybe_deferred_to_future
    from twisted.internet.threads import deferToThread

    await maybe_deferred_to_future(deferToThread(counters.close))
