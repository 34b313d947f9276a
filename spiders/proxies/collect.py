"""What the collector (:class:`spiders.spiders.proxy.ProxySpider`) needs: the list pages' rule and the pool pipeline.

**The rule** is a list rule's ``first_page_xpath`` (:class:`spiders.rules.ListRule`, the ``list`` spider's own
code): ``list_from`` selects one entry per proxy, the fields ``ip``, ``port``, ``location``, ``anonymity``,
``type``, ``speed``, ``alive_time`` (seed table 4-7; ``user`` and ``password`` when a list gives credentials) are
XPaths relative to the entry, ``next_page`` follows the list's pagination. A new proxy site is a new rule, no code::

    {"list_from": "//table[@id='ip_list']//tr[td]", "ip": "td[2]", "port": "td[3]", "location": "td[4]",
     "anonymity": "td[5]", "type": "td[6]", "speed": "td[7]/div/@title", "alive_time": "td[9]",
     "next_page": "//a[@class='next_page']/@href"}

**The pipeline** (:class:`ProxyStorePipeline`) turns each entry into a pool document (an entry without a valid IP
and port is dropped with its reason) and upserts them by ``ip:port`` in batches, in a thread.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from scrapy.exceptions import DropItem
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.threads import deferToThread

from spiders.proxies.store import ProxyStore, document_from_entry
from spiders.rules import ListRule

logger = logging.getLogger(__name__)

DEFAULT_RULE: dict[str, str] = {
    "list_from": "//table//tr[td]", "ip": "td[1]", "port": "td[2]", "location": "td[3]", "anonymity": "td[4]",
    "type": "td[5]", "speed": "td[6]", "alive_time": "td[7]",
}
BATCH = 200


def load_rule(value: str | dict[str, Any] | None) -> dict[str, Any]:
    """The rule from a setting or argument: a JSON object, ``@path`` of a JSON file, or empty (the default)."""
    if isinstance(value, dict):
        return value
    text = (value or "").strip()
    if not text:
        return dict(DEFAULT_RULE)
    if text.startswith("@"):
        text = Path(text[1:]).read_text(encoding="utf-8")
    rule = json.loads(text)
    if not isinstance(rule, dict) or "list_from" not in rule:
        raise ValueError("a proxy-list rule is a JSON object with list_from and the fields' XPaths")
    return rule


def build_rule(rule: dict[str, Any]) -> ListRule:
    """The list rule of proxy-list pages: entries become items (no detail pages)."""
    return ListRule.from_json({"first_page_xpath": {**rule, "continue": False}})


class ProxyStorePipeline:
    """``ITEM_PIPELINES`` of the collector: list entries into the pool, batched, off the reactor."""

    def __init__(self, store_factory: Any, stats: Any = None, batch: int = BATCH) -> None:
        self.store_factory = store_factory
        self.stats = stats
        self.batch = batch
        self.store: ProxyStore | None = None
        self.waiting: list[dict[str, Any]] = []

    @classmethod
    def from_crawler(cls, crawler: Any) -> ProxyStorePipeline:
        from spiders.fleet_settings import crawlfleet_settings

        settings = crawlfleet_settings(crawler.settings)
        return cls(lambda: ProxyStore.from_settings(settings), crawler.stats)

    def open_spider(self) -> None:
        self.store = self.store_factory()  # pymongo connects in its own threads: nothing waits here

    async def process_item(self, item: dict[str, Any]) -> dict[str, Any]:
        doc = document_from_entry(item)
        if doc is None:
            self._count("proxy/invalid")
            raise DropItem(f"no valid ip and port in list entry {item.get('ip')!r}:{item.get('port')!r}")
        self.waiting.append(doc)
        if len(self.waiting) >= self.batch:
            await self.flush()
        return item

    async def close_spider(self) -> None:
        await self.flush()

    async def flush(self) -> None:
        batch, self.waiting = self.waiting, []
        if not batch or self.store is None:
            return
        new = await maybe_deferred_to_future(deferToThread(self.store.upsert_collected, batch))
        self._count("proxy/collected", len(batch))
        self._count("proxy/new", new)
        logger.info("stored %d proxies in the pool (%d new)", len(batch), new)

    def _count(self, key: str, n: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(key, n)
