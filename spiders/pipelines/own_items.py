"""The fleet's store of one's own spider's items (issue 35): ``EXTENSIONS = {"spiders.pipelines.own_items.OwnItemStore":
0}``, set by the fleet's add-on for any spider that is not a rule spider, unless CRAWLFLEET_ITEM_STORE is off.

The project's own item pipelines run first, as in plain Scrapy; what comes out of the last of them (Scrapy's
``item_scraped``, which carries the page it came from) is stored in MongoDB, so that ``crawlfleet export``, the
crawl's page, the manager's ``/items/`` of a job and ``crawl_finished``'s counts work for these crawls too. It is
an extension rather than a pipeline because a pipeline is not told which page an item came from, and the store
keys every item by it: a document's ``url_key`` is its page's request fingerprint and the item's place in that
page's output (``TaskTracker.item_key``), so a page processed again after a crash (a killed worker's leases)
replaces the same documents instead of adding new ones.

A document is the item's fields (``itemadapter``: dicts, ``scrapy.Item``, dataclasses, attrs), made storable
(``Decimal`` as Decimal128, tuples and sets as lists, dates as ISO text), plus ``crawlid``, ``job`` (the worker
that stored it), ``url_key``, ``page`` (its page's URL) and ``fetched_at``; an item field of one of those names is
kept as ``item_<name>``. Writes are the MongoDB pipeline's (:class:`spiders.pipelines.mongo.MongoPipeline`:
batched, acknowledged, retried while MongoDB is away, with its back-pressure); Scrapy waits for the write before it
counts the item as processed, and the task tracker settles the item when it is written
(:data:`spiders.signals.item_stored`), so a task completes only once its items are in MongoDB.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from decimal import Decimal
from typing import Any

from bson.decimal128 import Decimal128
from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future

from spiders.fleet_settings import crawlfleet_settings
from spiders.pipelines.mongo import MongoPipeline
from spiders.signals import item_stored
from spiders.worker.output import meta_of
from spiders.worker.own import runs_rules

logger = logging.getLogger(__name__)
FLEET_FIELDS = ("crawlid", "job", "url_key", "page", "fetched_at")


def storable(value: Any) -> Any:
    """A value MongoDB can hold, as close to the item's as it gets."""
    if isinstance(value, dict):
        return {str(k): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [storable(v) for v in value]
    if isinstance(value, Decimal):
        return Decimal128(value)
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value.isoformat()
    return value


def document(item: Any, key: str, crawlid: str, job: str | None, page: str) -> dict[str, Any]:
    fields = storable(ItemAdapter(item).asdict())
    for name in FLEET_FIELDS:
        if name in fields:
            fields[f"item_{name}"] = fields.pop(name)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {**fields, "crawlid": crawlid, "job": job, "url_key": key, "page": page, "fetched_at": now}


class OwnItemStore:
    """Stores what the project's pipelines passed on (see the module docstring)."""

    def __init__(self, crawler: Any, store: MongoPipeline) -> None:
        self.crawler = crawler
        self.store = store

    @classmethod
    def from_crawler(cls, crawler: Any) -> OwnItemStore:
        settings = crawlfleet_settings(crawler.settings)
        if runs_rules(crawler.spider) or not settings.item_store:
            raise NotConfigured
        extension = cls(crawler, MongoPipeline(settings, stats=crawler.stats, signals=crawler.signals))
        crawler.signals.connect(extension.opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.closed, signal=signals.spider_closed)
        crawler.signals.connect(extension.item_scraped, signal=signals.item_scraped)
        return extension

    def opened(self) -> None:
        self.store.open_spider()

    async def closed(self) -> None:
        await maybe_deferred_to_future(self.store.close())

    async def item_scraped(self, item: Any, response: Any, spider: Any = None) -> None:
        """Store ``item`` (Scrapy waits for it); the tracker hears when it is stored."""
        scheduler = getattr(self.crawler.engine, "scheduler", None)
        tracker = getattr(scheduler, "tracker", None)
        meta = meta_of(response)
        key = tracker.item_key(response, item) if tracker is not None else None
        if key is None:  # not from a task (an item start() yielded): keyed by its content
            key = "item:" + hashlib.sha1(json.dumps(ItemAdapter(item).asdict(), sort_keys=True, default=str)
                                         .encode()).hexdigest()
        traveller = getattr(scheduler, "traveller", None)
        crawlid = str(meta.get("crawlid") or (traveller.crawl.crawlid if traveller is not None else "") or "")
        page = str(getattr(response, "url", "") or getattr(getattr(response, "request", None), "url", "") or "")
        stored = self.store.buffer.add(crawlid, key, document(item, key, crawlid, getattr(scheduler, "job", None),
                                                              page), item)
        stored.addCallbacks(lambda _: self._told(item, response, True), lambda _: self._told(item, response, False))
        await maybe_deferred_to_future(stored)

    def _told(self, item: Any, response: Any, stored: bool) -> None:
        self.crawler.signals.send_catch_log(signal=item_stored, item=item, response=response, stored=stored)
