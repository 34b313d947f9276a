"""Page work off the reactor: ``ITEM_PIPELINES = {"spiders.pipelines.pagework.PageWorkPipeline": 340}``.

Main-text extraction, its Markdown and the structured metadata cost a worker about 5 ms of CPU per content page,
all of it on the reactor thread. With ``CRAWLFLEET_PAGE_PROCESSES`` above 0 (``-1``: one process when this host
has more than one usable core per worker, ``CRAWLFLEET_HOST_WORKERS`` of them; default 0) this pipeline sends
each item's page to a pool of that many processes and waits for the fields without blocking the reactor: the item
gets ``text``, ``markdown``, ``title``, ``published`` and ``metadata`` exactly as
:class:`~spiders.pipelines.metadata.MetadataPipeline` and :class:`~spiders.pipelines.extract.ExtractPipeline`
would give them (the same functions, the same rules for the crawl's ``outputs`` and for fields the rule extracted),
``_html`` popped, so those two pipelines pass the item on untouched. With 0 it is left out (``NotConfigured``) and
they do the work in the reactor, as before.

Items still settle in any order and one at a time per response slot: Scrapy keeps a response in its scraper slot
while its items are processed, and stops downloading while the slot is full, so a slow pool holds back fetching
just as slow pipelines do (the MongoDB pipeline's back-pressure is unchanged). A page that fails in the pool (or a
pool that breaks) keeps its item, without the extracted fields, counted as ``extract/failed``.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from spiders.fleet_settings import crawlfleet_settings
from spiders.pipelines import close_counters, cluster_counters
from spiders.pipelines.extract import CHOSEN, EXTRACTED, FAILED, chosen_outputs

logger = logging.getLogger(__name__)


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def pool_size(setting: int, host_workers: int, cores: int | None = None) -> int:
    """Processes of the pool: the setting, or for ``-1`` one when there is more than one core per worker."""
    if setting >= 0:
        return setting
    cores = usable_cores() if cores is None else cores
    return 1 if cores > max(1, host_workers) else 0


def page_work(html: str, url: str | None, outputs: list[str]) -> dict[str, Any]:
    """In a pool process: what the metadata and extraction pipelines compute for one page."""
    from spiders.extraction import extract
    from spiders.extraction.metadata import page_metadata

    result: dict[str, Any] = {}
    if "metadata" in outputs:
        try:
            result["metadata"], result["broken"] = page_metadata(html, url)
        except Exception as exc:
            result["metadata_error"] = f"{type(exc).__name__}: {exc}"
    try:
        result["extracted"] = extract(html or "", url, markdown="markdown" in outputs)
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
    return result


class PageWorkPipeline:
    def __init__(self, processes: int, stats: Any = None, counters: Any = None) -> None:
        self.stats = stats
        self.counters = counters
        self.pool = ProcessPoolExecutor(max_workers=processes, mp_context=get_context("spawn"))

    @classmethod
    def from_crawler(cls, crawler: Any) -> PageWorkPipeline:
        settings = crawlfleet_settings(crawler.settings)
        processes = pool_size(settings.page_processes, settings.host_workers)
        if processes <= 0:
            raise NotConfigured("page work stays on the reactor (CRAWLFLEET_PAGE_PROCESSES)")
        logger.info("page work (extraction, Markdown, metadata) in %d process(es)", processes)
        return cls(processes, stats=crawler.stats, counters=cluster_counters(crawler))

    async def process_item(self, item: dict[str, Any]) -> dict[str, Any]:
        if "_html" not in item:
            return item
        html = item.pop("_html")
        outputs = list(chosen_outputs(item))
        item.pop("_outputs", None)
        try:
            result = await maybe_deferred_to_future(_deferred(self.pool.submit(page_work, html, item.get("url"),
                                                                               outputs)))
        except Exception as exc:  # a broken pool: the item goes on without the fields
            result = {"error": f"{type(exc).__name__}: {exc}"}
        self._apply(item, outputs, result)
        return item

    def _apply(self, item: dict[str, Any], outputs: list[str], result: dict[str, Any]) -> None:
        if result.get("broken"):
            self._count("metadata/broken", "metadata:broken", result["broken"])
        if result.get("metadata_error"):
            logger.warning("metadata failed on %s (%s); the item is kept without it", item.get("url"),
                           result["metadata_error"])
            self._count("metadata/failed", "metadata:failed")
        elif result.get("metadata") and not item.get("metadata"):
            item["metadata"] = result["metadata"]
        if "error" in result:
            logger.warning("main-text extraction failed on %s (%s); the item is kept without text",
                           item.get("url"), result["error"])
            self._count("extract/failed", FAILED)
            return
        extracted = result["extracted"]
        for name in EXTRACTED:
            if name in CHOSEN and name not in outputs:
                continue
            if not item.get(name):
                item[name] = extracted.get(name)
        if self.stats is not None:
            self.stats.inc_value("extract/pages")

    def _count(self, stat: str, plugin: str, n: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(stat, n)
        if self.counters is not None:
            self.counters.incr(plugin, n)

    async def close_spider(self) -> None:
        from twisted.internet.threads import deferToThread

        await maybe_deferred_to_future(deferToThread(self.pool.shutdown, wait=True, cancel_futures=True))
        await close_counters(self.counters)


def _deferred(future: Future) -> Deferred:
    """A Deferred that fires on the reactor thread when ``future`` (of the pool) is done."""
    from twisted.internet import reactor

    d: Deferred = Deferred()

    def done(finished: Future) -> None:
        error = finished.exception()
        if error is not None:
            reactor.callFromThread(d.errback, error)
        else:
            reactor.callFromThread(d.callback, finished.result())

    future.add_done_callback(done)
    return d
