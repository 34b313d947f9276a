"""Page work off the reactor: ``ITEM_PIPELINES = {"spiders.pipelines.pagework.PageWorkPipeline": 340}``.

Main-text extraction, its Markdown and the structured metadata cost a worker about 5 ms of CPU per content page,
all of it on the reactor thread. With ``CRAWLFLEET_PAGE_PROCESSES`` above 0, or ``-1`` (the default: one process
when this host has more than one usable core per worker, ``CRAWLFLEET_HOST_WORKERS`` of them), this pipeline
sends each item's page to a pool of that many processes and waits for the fields without blocking the reactor:
the item gets ``text``, ``markdown``, ``title``, ``published`` and ``metadata`` exactly as
:class:`~spiders.pipelines.metadata.MetadataPipeline` and :class:`~spiders.pipelines.extract.ExtractPipeline`
would give them (the same functions, the same rules for the crawl's ``outputs`` and for fields the rule extracted),
``_html`` popped, so those two pipelines pass the item on untouched. With 0 it is left out (``NotConfigured``) and
they do the work in the reactor, as before.

What it costs the reactor is kept small, since the reactor is what limits a worker: pages that arrive in the same
turn of the reactor go to the pool as one job (:class:`PageBatcher`, up to :data:`BATCH_PAGES` pages: one
pickle, one pipe write, one future and one hand-back per batch instead of per page), and a page's answer holds
only the fields its item takes. The pool is started and its processes import the extraction when the spider
opens, not on the first page.

Items still settle in any order and one at a time per response slot: Scrapy keeps a response in its scraper slot
while its items are processed, and stops downloading while the slot is full, so a slow pool holds back fetching
just as slow pipelines do (the MongoDB pipeline's back-pressure is unchanged); what waits for the pool is bounded
by the pages Scrapy holds. An item is acknowledged only once stored, after this pipeline: a worker killed with
pages in the pool loses nothing, their tasks are leased again. A page that fails in the pool (or a pool that
breaks) keeps its item, without the extracted fields, counted as ``extract/failed``.
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

BATCH_PAGES = 16  # pages at most in one job of the pool
Page = tuple[str, "str | None", list[str]]  # (html, url, outputs): what the pool needs of an item


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
    """In a pool process: what the metadata and extraction pipelines compute for one page (only the fields the
    item takes: ``text``/``markdown`` only when chosen)."""
    from spiders.extraction import extract
    from spiders.extraction.metadata import page_metadata

    result: dict[str, Any] = {}
    if "metadata" in outputs:
        try:
            result["metadata"], result["broken"] = page_metadata(html, url)
        except Exception as exc:
            result["metadata_error"] = f"{type(exc).__name__}: {exc}"
    try:
        extracted = extract(html or "", url, markdown="markdown" in outputs)
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
    else:
        result["extracted"] = {name: extracted.get(name) for name in EXTRACTED
                               if name not in CHOSEN or name in outputs}
    return result


def page_work_batch(pages: list[Page]) -> list[dict[str, Any]]:
    """In a pool process: :func:`page_work` of each page, in order."""
    return [page_work(html, url, outputs) for html, url, outputs in pages]


def warm_up() -> int:
    """In a pool process: import what page work needs before the first page waits for it."""
    import spiders.extraction
    import spiders.extraction.metadata

    spiders.extraction.extract("<html><body><p>warm</p></body></html>", markdown=True)
    spiders.extraction.metadata.page_metadata("<html><head><title>w</title></head></html>", None)
    return os.getpid()


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
    def __init__(self, processes: int, stats: Any = None, counters: Any = None, call_later: Any = None) -> None:
        self.stats = stats
        self.counters = counters
        self.processes = processes
        self.pool = ProcessPoolExecutor(max_workers=processes, mp_context=get_context("spawn"))
        if call_later is None:
            from twisted.internet import reactor

            call_later = reactor.callLater
        self.batcher = PageBatcher(self._submit, call_later, BATCH_PAGES)

    @classmethod
    def from_crawler(cls, crawler: Any) -> PageWorkPipeline:
        settings = crawlfleet_settings(crawler.settings)
        processes = pool_size(settings.page_processes, settings.host_workers)
        if processes <= 0:
            raise NotConfigured("page work stays on the reactor (CRAWLFLEET_PAGE_PROCESSES)")
        logger.info("page work (extraction, Markdown, metadata) in %d process(es)", processes)
        return cls(processes, stats=crawler.stats, counters=cluster_counters(crawler))

    async def open_spider(self) -> None:
        # Start every process and have it import the extraction now (spawned interpreters take a second or two),
        # in a thread: waiting for them must not stop the reactor.
        from twisted.internet.threads import deferToThread

        jobs = [self.pool.submit(warm_up) for _ in range(self.processes)]
        try:
            await maybe_deferred_to_future(deferToThread(lambda: [job.result(timeout=120) for job in jobs]))
        except Exception as exc:  # not fatal: each page that fails in the pool keeps its item, counted
            logger.warning("the page-work pool did not start cleanly (%s: %s)", type(exc).__name__, exc)

    async def process_item(self, item: dict[str, Any]) -> dict[str, Any]:
        if "_html" not in item:
            return item
        html = item.pop("_html")
        outputs = list(chosen_outputs(item))
        item.pop("_outputs", None)
        try:
            result = await maybe_deferred_to_future(self.batcher.add((html, item.get("url"), outputs)))
        except Exception as exc:  # a broken pool: the item goes on without the fields
            result = {"error": f"{type(exc).__name__}: {exc}"}
        self._apply(item, outputs, result)
        return item

    def _submit(self, pages: list[Page]) -> Deferred:
        return _deferred(self.pool.submit(page_work_batch, pages))

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
