"""The spider's output, task by task: ``SPIDER_MIDDLEWARES = {"spiders.worker.output.TaskOutputMiddleware": 20}``.

A spider callback yields items and requests, as in any Scrapy project. In the fleet a request yielded by a callback
is not downloaded here: it is a *child task* that goes to ``seeds`` (through the Bloom filter and the crawl's
limits) when its parent completes. This middleware, the last one the output passes (lowest order), takes every
request out of the stream as a child of the response's task (:func:`child_task`: the page kind in
``request.meta["fleet_callback"]``, small values for the child in ``request.meta["fleet_meta"]``), lets items through
and counts them, and tells the worker's tracker (``FleetScheduler.tracker``, through Scrapy's
``crawler.engine.scheduler``) when the output ends — also when the callback raised halfway (what it yielded until
then still counts; the error is logged by Scrapy and counted here).

For one's own spider (issue 35) a yielded request travels whole (:class:`spiders.worker.own.Traveller`: callback and
errback by name, ``cb_kwargs``, meta, method, headers, body …); one that cannot travel is refused here, logged and
counted in its crawl's failures. Its ``start()`` passes here too (:meth:`TaskOutputMiddleware.process_start`): its
requests become the crawl's first tasks, once per crawl (:class:`spiders.worker.start.StartOnce`), not once per
worker. Scrapy runs no spider middleware on what an errback returns after a download error, so the tracker passes
an errback's output through :meth:`TaskOutputMiddleware.errback_output` itself.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from scrapy import Request
from scrapy.http import Response

from messaging.tasks import Task
from spiders.travel import CannotTravel

logger = logging.getLogger(__name__)


class TaskOutputMiddleware:
    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Any) -> TaskOutputMiddleware:
        return cls(crawler)

    def process_spider_output(self, response: Response, result: Iterable[Any]) -> Iterator[Any]:
        yield from self._output(_Output(self, response), result)

    async def process_spider_output_async(self, response: Response, result: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for element in self._output_async(_Output(self, response), result):
            yield element

    @staticmethod
    def _output(output: _Output, result: Iterable[Any]) -> Iterator[Any]:
        try:
            for element in result:
                kept = output.take(element)
                if kept is not None:
                    yield kept
        except Exception:
            output.failed()
            raise
        finally:
            output.done()

    @staticmethod
    async def _output_async(output: _Output, result: AsyncIterator[Any]) -> AsyncIterator[Any]:
        try:
            async for element in result:
                kept = output.take(element)
                if kept is not None:
                    yield kept
        except Exception:
            output.failed()
            raise
        finally:
            output.done()

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """One's own spider's ``start()`` feeds its crawl once (the worker that holds the crawl's start claim), not
        once per worker; a rule spider's passes through (it yields nothing)."""
        scheduler = self._scheduler()
        if getattr(scheduler, "closing", False):  # it came after its crawl ended: start() is never run
            return
        starts = getattr(scheduler, "starts", None)
        if starts is None:
            async for element in start:
                yield element
            return
        async for item in starts.run(start):
            yield item

    def errback_output(self, failure: Any, result: Any, task: Task) -> Any:
        """An errback's output for ``task`` (``failure.request`` is its request), through the same steps as a
        callback's; if Scrapy then passes it through the spider middlewares too (an HTTP error status), they let it
        by untouched (the request's meta says ``fleet_errback_output``)."""
        meta_of(failure)["fleet_errback_output"] = True
        output = _Output(self, failure, task)
        if isinstance(result, AsyncIterator):
            return self._output_async(output, result)
        return self._output(output, result if result is not None else ())

    def tracker(self) -> Any:
        """The worker's task tracker (``None`` outside a fleet worker, or before it runs)."""
        return getattr(self._scheduler(), "tracker", None)

    def traveller(self) -> Any:
        """One's own spider's :class:`~spiders.worker.own.Traveller` (``None`` for a rule spider)."""
        return getattr(self._scheduler(), "traveller", None)

    def _scheduler(self) -> Any:
        return getattr(self.crawler.engine, "scheduler", None)


def child_task(parent: Task, request: Request, traveller: Any = None) -> Task:
    """**Where a Request a callback yields becomes a task**: a child of the response's task — for a rule spider with
    the page kind and the small values the spider put in the request's meta (``fleet_callback``, ``fleet_meta``);
    for one's own spider the whole request (``traveller``: :class:`spiders.travel.CannotTravel` when it cannot)."""
    if traveller is not None:
        task: Task = traveller.task(request, parent)
        return task
    return parent.child(request.url, callback=request.meta.get("fleet_callback", ""),
                        meta=request.meta.get("fleet_meta") or {})


def meta_of(response: Any) -> dict[str, Any]:
    """A response's meta, or for an errback's failure its request's ({} when there is none)."""
    try:
        meta = response.meta if not hasattr(response, "raiseException") else response.request.meta
    except AttributeError:  # a response without a request, a failure without one
        return {}
    return meta if isinstance(meta, dict) else {}


class _Output:
    """The output of one response."""

    def __init__(self, middleware: TaskOutputMiddleware, response: Any, task: Task | None = None) -> None:
        self.middleware = middleware
        self.response = response
        meta = meta_of(response)
        self.task: Task | None = task or meta.get("task")
        if task is None and meta.get("fleet_errback_output"):  # an errback's output that went through us already
            self.task = None
        self.children: list[Task] = []
        self.refused: list[tuple[str, str]] = []  # (fingerprint, reason) of requests that cannot travel
        self.traveller = middleware.traveller() if self.task is not None else None
        self._done = False

    def take(self, element: Any) -> Any:
        if self.task is None:
            return element  # not a fleet task (e.g. a plain Scrapy run of the spider): nothing to track
        if isinstance(element, Request):
            try:
                self.children.append(child_task(self.task, element, self.traveller))
            except CannotTravel as problem:  # only a traveller's task raises it
                assert self.traveller is not None
                self.refused.append(self.traveller.refuse(element, problem, f"on {self.task.url}"))
            return None
        tracker = self.middleware.tracker()
        if tracker is not None:
            tracker.item_produced(self.response, element)
        return element

    def failed(self) -> None:
        stats = self.middleware.crawler.stats
        if stats is not None:
            stats.inc_value("fleet/spider_error")

    def done(self) -> None:
        if self._done or self.task is None:
            return
        self._done = True
        tracker = self.middleware.tracker()
        if tracker is not None:
            tracker.output_done(self.response, self.children, self.refused)
