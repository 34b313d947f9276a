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

One's own spider (issue 35, ``traveller``: :class:`spiders.worker.own.Traveller`): a leased task is its request
again, with its callback and errback by name; the errback the spider gave sees the failure, and what it returns
(items, requests) is output of the task like a callback's (:meth:`TaskOutputMiddleware.errback_output`); without
one, the failure is raised on for Scrapy to log as it always does. Items are settled when the fleet's store has
them (``settle_signal``: :data:`spiders.signals.item_stored`), and each item's place in its page's output is kept
(:meth:`TaskTracker.item_key`), which is what the store keys it by: a page processed again after a crash stores the
same documents again, never new ones.
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
from spiders.worker.output import meta_of

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
    refused: list[tuple[str, str]] = field(default_factory=list)  # requests that could not travel (fp, reason)
    places: dict[int, int] = field(default_factory=dict)  # id(item) -> its place in the page's output
    given: set[int] = field(default_factory=set)  # places of items keyed for the store already
    status: int | None = None  # the failure's HTTP status
    attempts: int = 1  # the failure's downloads, Scrapy's retries included
    failed_at: float = 0.0


class TaskTracker:
    def __init__(self, spider: Any, catalog: CrawlCatalog, admits: Callable[[str], bool],
                 finish: Callable[[Finished], None], stats: Any = None, *, traveller: Any = None,
                 settle_signal: Any = signals.item_scraped, outputs: Callable[[], Any] | None = None) -> None:
        """``traveller``: one's own spider's (its tasks are whole requests); ``settle_signal``: the signal that
        says an item is stored (Scrapy's ``item_scraped`` when the last pipeline stores it); ``outputs``: the
        output middleware, for an errback's output."""
        self.spider = spider
        self.catalog = catalog
        self.admits = admits
        self.finish = finish
        self.stats = stats
        self.traveller = traveller
        self.settle_signal = settle_signal
        self.outputs = outputs or (lambda: None)
        self.tasks: dict[str, InProgress] = {}

    def connect(self, crawler_signals: Any) -> None:
        """Hear of every item a pipeline stored, dropped or failed on (the crawler's signals; on the reactor)."""
        crawler_signals.connect(self._item_stored, signal=self.settle_signal)
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
            if self.traveller is not None:
                request = self.traveller.request(task)
            else:
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
        if self.traveller is not None:
            request.errback = self._own_errback(request.errback, lease.member)
        else:
            request.errback = self._wrap_errback(request.errback, lease.member)
        return request

    # --- output of a response -------------------------------------------------------------------------------------
    def item_produced(self, response: Any, item: Any = None) -> None:
        progress = self._progress(response)
        if progress is not None:
            progress.places.setdefault(id(item), progress.items)
            progress.items += 1

    def item_key(self, response: Any, item: Any) -> str | None:
        """What the fleet's store keys an item by: its task's request fingerprint and its place in the page's output
        (an item a pipeline replaced by another object takes the first place nobody has or will have). ``None``: no
        task."""
        progress = self._progress(response)
        if progress is None:
            return None
        place = progress.places.get(id(item))
        if place is None or place in progress.given:
            reserved = set(progress.places.values())
            place = next(n for n in range(progress.items + len(progress.given) + 1)
                         if n not in progress.given and n not in reserved)
        progress.given.add(place)
        fp = progress.task.request.get("fp") or progress.lease.member
        return f"{fp}:{place}"

    def output_done(self, response: Any, children: list[Task], refused: list[tuple[str, str]] | None = None) -> None:
        progress = self._progress(response)
        if progress is None or progress.output_done:
            return
        progress.refused = list(refused or [])
        progress.children = self._admitted(progress.task, children)
        meta = meta_of(response)
        if not progress.failure and meta.get(NOINDEX_META):  # its items were left out: counted so
            progress.failure = NOINDEX
        revisit = meta.get("revisit")
        if revisit is not None:
            progress.revisit = {**revisit, "links": len(children)}
        url = getattr(response, "url", "")
        if url and url != progress.task.url and self.traveller is None:
            progress.marks.append(url)  # where a redirect ended: seen too (one's own spider's: at its redirect)
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
    def _own_errback(self, errback: Any, member: str) -> Callable[[Failure], Any]:
        """One's own spider's errback: the failure is the task's (counted by reason); the errback's output is the
        task's output; without an errback the failure goes on to Scrapy, which logs it as usual."""
        def failed(failure: Failure) -> Any:
            progress = self.tasks.get(member)
            if progress is None or progress.output_done:
                return errback(failure) if errback is not None else failure
            self._inc(f"fleet/task/failed/{_error_name(failure)}")
            progress.failure, progress.status, progress.attempts = _reason(failure)
            progress.failed_at = time.time()
            outputs = self.outputs()
            if errback is None or outputs is None:
                output = errback(failure) if errback is not None else failure
                progress.output_done = True
                self._maybe_finish(progress)
                return output
            return outputs.errback_output(failure, errback(failure), progress.task)

        return failed

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
        member = meta_of(response).get("task_member") if response is not None else None
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
                                 progress.failed_at, refused=progress.refused))
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
