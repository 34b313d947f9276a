"""The spider's output, task by task: ``SPIDER_MIDDLEWARES = {"spiders.worker.output.TaskOutputMiddleware": 20}``.

A spider callback yields items and requests, as in any Scrapy project. In the fleet a request yielded by a callback
is not downloaded here: it is a *child task* that goes to ``seeds`` (through the Bloom filter and the crawl's
limits) when its parent completes. This middleware, the last one the output passes (lowest order), takes every
request out of the stream as a child of the response's task (:func:`child_task`: the page kind in
``request.meta["fleet_callback"]``, small values for the child in ``request.meta["fleet_meta"]``), lets items through
and counts them, and tells the worker's tracker (``FleetScheduler.tracker``, through Scrapy's
``crawler.engine.scheduler``) when the output ends — also when the callback raised halfway (what it yielded until
then still counts; the error is logged by Scrapy and counted here).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from scrapy import Request
from scrapy.http import Response

from messaging.tasks import Task

logger = logging.getLogger(__name__)


class TaskOutputMiddleware:
    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Any) -> TaskOutputMiddleware:
        return cls(crawler)

    def process_spider_output(self, response: Response, result: Iterable[Any]) -> Iterator[Any]:
        output = _Output(self, response)
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

    async def process_spider_output_async(self, response: Response, result: AsyncIterator[Any]) -> AsyncIterator[Any]:
        output = _Output(self, response)
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

    def tracker(self) -> Any:
        """The worker's task tracker (``None`` outside a fleet worker, or before it runs)."""
        return getattr(getattr(self.crawler.engine, "scheduler", None), "tracker", None)


def child_task(parent: Task, request: Request) -> Task:
    """**Where a Request a callback yields becomes a task**: a child of the response's task, with the page kind and
    the small values the spider put in the request's meta (``fleet_callback``, ``fleet_meta``)."""
    return parent.child(request.url, callback=request.meta.get("fleet_callback", ""),
                        meta=request.meta.get("fleet_meta") or {})


class _Output:
    """The output of one response."""

    def __init__(self, middleware: TaskOutputMiddleware, response: Response) -> None:
        self.middleware = middleware
        self.response = response
        self.task: Task | None = response.meta.get("task") if response.request is not None else None
        self.children: list[Task] = []
        self._done = False

    def take(self, element: Any) -> Any:
        if self.task is None:
            return element  # not a fleet task (e.g. a plain Scrapy run of the spider): nothing to track
        if isinstance(element, Request):
            self.children.append(child_task(self.task, element))
            return None
        tracker = self.middleware.tracker()
        if tracker is not None:
            tracker.item_produced(self.response)
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
            tracker.output_done(self.response, self.children)
