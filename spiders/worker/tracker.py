"""Which tasks are in progress in this worker, and when each one is finished (reactor thread only).

A task starts when the scheduler turns its lease into a request. Its output is *done* when the spider's output for
the final response was consumed (:meth:`TaskTracker.output_done`, called by the spider middleware) or the download
failed for good (the errback this tracker puts on every task request). Each item it produced is *settled* when a
pipeline stored or dropped it (:meth:`TaskTracker.item_settled`, from Scrapy's ``item_scraped``, ``item_dropped`` and
``item_error`` signals, which carry the response: :meth:`TaskTracker.connect`). Output done and every item settled:
the task is finished and handed to the feed, which pushes its children and acknowledges it.

Children are checked here, before they cost a round trip: the crawl still running, ``maxdepth``, the blacklist
(the site configuration the worker watches in ZooKeeper). Scope is the rule's business (the universal spider's
``allow_domains``, the list spider's explicit links).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scrapy import Request, signals
from twisted.python.failure import Failure

from frontier.client import Lease
from messaging.counts import NOINDEX, failure_reason
from messaging.tasks import Task
from spiders.robots_meta import NOINDEX_META
from spiders.worker.commit import Finished
from spiders.worker.crawls import CrawlCatalog

logger = logging.getLogger(__name__)


@dataclass
class InProgress:
    lease: Lease
    task: Task
    output_done: bool = False
    items: int = 0  # items produced
    settled: int = 0  # items stored or dropped
    stored: int = 0
    children: list[Task] = field(default_factory=list)
    marks: list[str] = field(default_factory=list)
    revisit: dict[str, Any] | None = None  # a revisiting crawl's outcome (spiders.middlewares.conditional)
    failure: str = ""  # why it failed (an HTTP error status, a download error), counted by reason
    status: int | None = None  # the failure's HTTP status
    attempts: int = 1  # the failure's downloads, Scrapy's retries included
    failed_at: float = 0.0


class TaskTracker:
    def __init__(self, spider: Any, catalog: CrawlCatalog, admits: Callable[[str], bool],
                 finish: Callable[[Finished], None], stats: Any = None) -> None:
        self.spider = spider
        self.catalog = catalog
        self.admits = admits
        self.finish = finish
        self.stats = stats
        self.tasks: dict[str, InProgress] = {}

    def connect(self, crawler_signals: Any) -> None:
        """Hear of every item a pipeline stored, dropped or failed on (the crawler's signals; on the reactor)."""
        crawler_signals.connect(self._item_stored, signal=signals.item_scraped)
        crawler_signals.connect(self._item_lost, signal=signals.item_dropped)
        crawler_signals.connect(self._item_lost, signal=signals.item_error)

    def start(self, lease: Lease) -> Request | None:
        """The request for a leased task (``None``: it was finished at once, e.g. the spider could not make one)."""
        task = lease.task
        progress = InProgress(lease, task)
        self.tasks[lease.member] = progress
        crawl = self.catalog.get(task.crawlid)
        request: Request | None
        try:
            request = self.spider.request_for(task, crawl)
        except Exception:
            logger.exception("could not make a request for %s; the task is dropped", task.url)
            request = None
        if request is None:
            self._inc("fleet/task/unrequestable")
            progress.failure = failure_reason(error="unrequestable")
            progress.attempts, progress.failed_at = 0, time.time()
            progress.output_done = True
            self._maybe_finish(progress)
            return None
        request.meta["task"] = task
        request.meta["task_member"] = lease.member
        request.meta.setdefault("crawlid", task.crawlid)
        request.meta.setdefault("spider_type", task.spider_type)
        request.errback = self._wrap_errback(request.errback, lease.member)
        return request

    # --- output of a response -------------------------------------------------------------------------------------
    def item_produced(self, response: Any) -> None:
        progress = self._progress(response)
        if progress is not None:
            progress.items += 1

    def output_done(self, response: Any, children: list[Task]) -> None:
        progress = self._progress(response)
        if progress is None or progress.output_done:
            return
        progress.children = self._admitted(progress.task, children)
        if not progress.failure and _meta(response).get(NOINDEX_META):  # its items were left out: counted so
            progress.failure = NOINDEX
        revisit = response.meta.get("revisit") if getattr(response, "request", None) is not None else None
        if revisit is not None:
            progress.revisit = {**revisit, "links": len(children)}
        url = getattr(response, "url", "")
        if url and url != progress.task.url:
            progress.marks.append(url)  # where a redirect ended: seen too
        progress.output_done = True
        self._maybe_finish(progress)

    def _item_stored(self, item: Any = None, response: Any = None, **_: Any) -> None:
        if response is not None:
            self.item_settled(response, stored=True)

    def _item_lost(self, item: Any = None, response: Any = None, **_: Any) -> None:
        """Dropped by a pipeline (e.g. a required field missing) or a pipeline failed: processed all the same."""
        if response is not None:
            self.item_settled(response, stored=False)

    def item_settled(self, response: Any, stored: bool) -> None:
        progress = self._progress(response)
        if progress is not None:
            progress.settled += 1
            progress.stored += int(stored)
            self._maybe_finish(progress)

    def forget(self, member: str | None) -> Lease | None:
        """The task is handed back unfinished (its crawl was paused before its request went out): no longer
        followed; its lease, or None when it was not in progress here."""
        progress = self.tasks.pop(member, None) if member else None
        if progress is None:
            return None
        self._inc("fleet/task/handed_back")
        return progress.lease

    def drop(self, member: str | None, marked_url: str = "") -> None:
        """The task ends without a response to process (e.g. its redirect led to a page crawled already)."""
        progress = self.tasks.get(member) if member else None
        if progress is not None and not progress.output_done:
            if marked_url:
                progress.marks.append(marked_url)
            progress.output_done = True
            self._maybe_finish(progress)

    # --- internals ------------------------------------------------------------------------------------------------
    def _wrap_errback(self, errback: Any, member: str) -> Callable[[Failure], Any]:
        def failed(failure: Failure) -> Any:
            output = errback(failure) if errback is not None else None
            progress = self.tasks.get(member)
            if progress is not None and not progress.output_done:
                self._inc(f"fleet/task/failed/{_error_name(failure)}")
                logger.info("task %s failed: %s", progress.task.url, failure.getErrorMessage())
                progress.failure, progress.status, progress.attempts = _reason(failure)
                progress.failed_at = time.time()
                progress.output_done = True
                self._maybe_finish(progress)
            return output

        return failed

    def _progress(self, response: Any) -> InProgress | None:
        meta = getattr(response, "meta", None) if response is not None else None
        try:
            member = meta.get("task_member") if meta is not None else None
        except AttributeError:  # a response without a request
            return None
        return self.tasks.get(member) if member else None

    def _admitted(self, parent: Task, children: list[Task]) -> list[Task]:
        crawl = self.catalog.get(parent.crawlid)
        if crawl is not None and not crawl.live:  # stopped or finished (a paused crawl keeps what it found)
            self._inc("fleet/links/crawl_stopped", len(children))
            return []
        maxdepth = crawl.maxdepth if crawl is not None else None
        admitted = []
        for child in children:
            if maxdepth is not None and child.depth > maxdepth:
                self._inc("fleet/links/too_deep")
            elif not self.admits(child.url):
                self._inc("fleet/links/blacklisted")
            else:
                admitted.append(child)
        return admitted

    def _maybe_finish(self, progress: InProgress) -> None:
        if progress.output_done and progress.settled >= progress.items:
            self.tasks.pop(progress.lease.member, None)
            self.finish(Finished(progress.lease, progress.children, progress.stored, progress.marks,
                                 progress.revisit, progress.failure, progress.status, progress.attempts,
                                 progress.failed_at))
            self._inc("fleet/task/finished")

    def _inc(self, key: str, n: int = 1) -> None:
        if self.stats is not None and n:
            self.stats.inc_value(key, n)


def _reason(failure: Failure) -> tuple[str, int | None, int]:
    """A failed download or an HTTP error status (Scrapy's ``HttpError`` carries the response) as counted, its status,
    and how many downloads it took (Scrapy's ``retry_times`` of its last request, plus one)."""
    response = getattr(failure.value, "response", None)
    status = getattr(response, "status", None)
    status = status if isinstance(status, int) else None
    request = getattr(failure, "request", None) or getattr(response, "request", None)
    meta = getattr(request, "meta", None) or {}
    return failure_reason(status=status, error=_error_name(failure)), status, int(meta.get("retry_times") or 0) + 1


def _error_name(failure: Failure) -> str:
    return failure.type.__name__ if failure.type is not None else "Error"


def _meta(response: Any) -> dict[str, Any]:
    try:
        return response.meta or {}
    except AttributeError:  # a response without a request
        return {}
