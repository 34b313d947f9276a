"""Page work off the reactor: ``ITEM_PIPELINES = {"spiders.pipelines.pagework.PageWorkPipeline": 340}``.

Main-text extraction, its Markdown and the structured metadata cost a worker about 5 ms of CPU per content page,
all of it on the reactor thread. With ``CRAWLFLEET_PAGE_PROCESSES`` above 0, or ``-1`` (the default: when this
host has more than one usable core per worker, ``CRAWLFLEET_HOST_WORKERS`` of them, see :func:`pool_size`), this
pipeline sends each item's page to a pool of that many processes (:class:`~spiders.pipelines.pagepool.PagePool`,
programs of their own that never import the worker's ``__main__``) and waits for the fields without blocking the
reactor: the item gets ``text``, ``markdown``, ``title``, ``published`` and ``metadata`` exactly as
:class:`~spiders.pipelines.metadata.MetadataPipeline` and :class:`~spiders.pipelines.extract.ExtractPipeline`
would give them (the same functions, the same rules for the crawl's ``outputs`` and for fields the rule extracted),
``_html`` popped, so those two pipelines pass the item on untouched. With 0 it is left out (``NotConfigured``) and
they do the work in the reactor, as before.

What it costs the reactor is kept small, since the reactor is what limits a worker: pages that arrive in the same
turn of the reactor go to the pool as one job (:class:`PageBatcher`, up to :data:`BATCH_PAGES` pages: one
pickle, one pipe write and one read per batch instead of per page), and a page's answer holds
only the fields its item takes. The pool is started and its processes import the extraction when the spider
opens, not on the first page.

Items still settle in any order and one at a time per response slot: Scrapy keeps a response in its scraper slot
while its items are processed, and stops downloading while the slot is full, so a slow pool holds back fetching
just as slow pipelines do (the MongoDB pipeline's back-pressure is unchanged); what waits for the pool is bounded
by the pages Scrapy holds. An item is acknowledged only once stored, after this pipeline: a worker killed with
pages in the pool loses nothing, their tasks are leased again. A pool process that dies loses nothing either: the
pages it had in hand are processed in the reactor (one warning line) and another process takes its place. A page
whose extraction raises keeps its item, without the extracted fields, counted as ``extract/failed``.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from typing import Any

from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall

from messaging.reactor import running_reactor
from spiders.fleet_settings import crawlfleet_settings
from spiders.pipelines import close_counters, cluster_counters
from spiders.pipelines.extract import FAILED, chosen_outputs
from spiders.pipelines.pagepool import PagePool
from spiders.pipelines.pageproc import Page, page_work, page_work_batch

__all__ = ["BATCH_PAGES", "PageBatcher", "PageWorkPipeline", "page_work", "page_work_batch", "pool_size"]

logger = logging.getLogger(__name__)

BATCH_PAGES = 16  # pages at most in one job of the pool
AUTO_MAX = 4  # processes at most for -1: a worker's reactor (~1 ms a page) cannot keep more of them busy


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def pool_size(setting: int, host_workers: int, cores: int | None = None) -> int:
    """Processes of the pool: the setting, or for ``-1`` the cores of this worker's share of the host beyond the
    one its reactor uses: ``ceil(cores / host_workers) - 1`` (so one or more exactly when there is more than one
    usable core per worker), at most :data:`AUTO_MAX`."""
    if setting >= 0:
        return setting
    cores = usable_cores() if cores is None else cores
    return max(0, min(AUTO_MAX, math.ceil(cores / max(1, host_workers)) - 1))


class PageBatcher:
    """Gathers the pages of one reactor turn into jobs of up to ``batch`` pages for ``submit`` (reactor thread).

    ``submit(pages)`` returns a Deferred of the results, in order; ``call_later(0, f)`` runs ``f`` at the end of
    the turn. Each page's own Deferred fires with its result, or errbacks with the job's failure.
    """

    def __init__(self, submit: Any, call_later: Any, batch: int = BATCH_PAGES) -> None:
        self.submit = submit
        self.call_later = call_later
        self.batch = max(1, batch)
        self._pages: list[Page] = []
        self._waiting: list[Deferred] = []
        self._scheduled = False

    def add(self, page: Page) -> Deferred:
        done: Deferred = Deferred()
        self._pages.append(page)
        self._waiting.append(done)
        if len(self._pages) >= self.batch:
            self.flush()
        elif not self._scheduled:
            self._scheduled = True
            self.call_later(0, self._end_of_turn)
        return done

    def _end_of_turn(self) -> None:
        self._scheduled = False
        self.flush()

    def flush(self) -> None:
        if not self._pages:
            return
        pages, waiting = self._pages, self._waiting
        self._pages, self._waiting = [], []
        try:
            job = self.submit(pages)
        except Exception as exc:  # a broken pool refuses new work at once
            for done in waiting:
                done.errback(exc)
            return
        job.addCallbacks(self._answer, self._fail, callbackArgs=(waiting,), errbackArgs=(waiting,))

    @staticmethod
    def _answer(results: list[dict[str, Any]], waiting: list[Deferred]) -> None:
        for done, result in zip(waiting, results, strict=True):
            done.callback(result)

    @staticmethod
    def _fail(failure: Any, waiting: list[Deferred]) -> None:
        for done in waiting:
            done.errback(failure)


class PageWorkPipeline:
    def __init__(self, processes: int, stats: Any = None, counters: Any = None,
                 call_later: Callable[..., IDelayedCall] | None = None, pool: PagePool | None = None) -> None:
        self.stats = stats
        self.counters = counters
        self.processes = processes
        self.pool = pool or PagePool(processes)
        self.batcher = PageBatcher(self.pool.submit, call_later or running_reactor().callLater, BATCH_PAGES)

    @classmethod
    def from_crawler(cls, crawler: Any) -> PageWorkPipeline:
        settings = crawlfleet_settings(crawler.settings)
        processes = pool_size(settings.page_processes, settings.host_workers)
        if processes <= 0:
            why = "0" if settings.page_processes == 0 else (
                f"-1, {usable_cores()} usable core(s) for {settings.host_workers} worker(s), CRAWLFLEET_HOST_WORKERS")
            raise NotConfigured(f"page work stays on the reactor (CRAWLFLEET_PAGE_PROCESSES={why})")
        logger.info("page work (extraction, Markdown, metadata) in %d process(es)", processes)
        return cls(processes, stats=crawler.stats, counters=cluster_counters(crawler))

    async def open_spider(self) -> None:
        # Start every process and have it import the extraction now (a Python process takes a second or two to
        # import it), without stopping the reactor; pages that come earlier wait in the processes' pipes.
        pids = await maybe_deferred_to_future(self.pool.start())
        logger.info("page-work processes ready: %s", ", ".join(map(str, pids)) or "none")

    async def process_item(self, item: dict[str, Any]) -> dict[str, Any]:
        if "_html" not in item:
            return item
        html = item.pop("_html")
        outputs = list(chosen_outputs(item))
        item.pop("_outputs", None)
        try:
            result = await maybe_deferred_to_future(self.batcher.add((html, item.get("url"), outputs)))
        except Exception as exc:  # the job could not be sent (an unpicklable page): the item goes on without the fields
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
        for name, value in result["extracted"].items():
            if not item.get(name):
                item[name] = value
        if self.stats is not None:
            self.stats.inc_value("extract/pages")

    def _count(self, stat: str, plugin: str, n: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(stat, n)
        if self.counters is not None:
            self.counters.incr(plugin, n)

    async def close_spider(self) -> None:
        await maybe_deferred_to_future(self.pool.close())
        if self.pool.in_reactor and self.stats is not None:
            self.stats.set_value("pagework/in_reactor", self.pool.in_reactor)
        await close_counters(self.counters)
