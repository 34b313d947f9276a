"""Structured metadata of content pages: ``ITEM_PIPELINES = {"spiders.pipelines.metadata.MetadataPipeline": 350}``.

An item carrying ``_html`` (a content page; the extraction pipeline at 400 pops it afterwards) gets ``metadata``:
JSON-LD, microdata, OpenGraph and Twitter cards normalised by :func:`spiders.extraction.metadata.page_metadata`
(title, author, published/modified, section, language, canonical, image; for products name, price, currency,
availability). Only when the crawl's rule chose ``metadata`` in its ``outputs`` (the default). A page without any
leaves the field out. A broken JSON-LD block is skipped and counted (``metadata/broken`` in Scrapy's stats,
``stats:crawler:metadata:broken:…`` for the cluster); if reading the metadata fails altogether, the item goes on
without it, logged on one line and counted as ``metadata/failed``. Never a lost item.

The page is parsed once for both pipelines: the tree parsed here is left on the item as ``_document`` (a private
field: never stored) for the extraction pipeline, which pops it and prunes it after the metadata was read.
"""

from __future__ import annotations

import logging
from typing import Any

from spiders.extraction import parse_html
from spiders.extraction.metadata import page_metadata
from spiders.pipelines import close_counters, cluster_counters
from spiders.pipelines.extract import chosen_outputs

logger = logging.getLogger(__name__)

BROKEN = "metadata:broken"  # the cluster counters' plugin names
FAILED = "metadata:failed"


class MetadataPipeline:
    def __init__(self, stats: Any = None, counters: Any = None) -> None:
        self.stats = stats
        self.counters = counters
        self._traceback_logged = False

    @classmethod
    def from_crawler(cls, crawler: Any) -> MetadataPipeline:
        return cls(stats=crawler.stats, counters=cluster_counters(crawler))

    def process_item(self, item: dict[str, Any]) -> dict[str, Any]:
        html = item.get("_html")
        if not html or "metadata" not in chosen_outputs(item):
            return item
        url = item.get("url")
        try:
            item["_document"] = document = parse_html(html)  # the extraction pipeline's too (one parse a page)
            metadata, broken = page_metadata(html, url, document)
        except Exception as exc:  # a bug on one odd page must not lose the item: it is stored without metadata
            logger.warning("metadata failed on %s (%s: %s); the item is kept without it", url, type(exc).__name__,
                           exc, exc_info=None if self._traceback_logged else exc)
            self._traceback_logged = True
            self._count("metadata/failed", FAILED)
            return item
        if broken:
            self._count("metadata/broken", BROKEN, broken)
        if metadata and not item.get("metadata"):
            item["metadata"] = metadata
        return item

    async def close_spider(self) -> None:
        await close_counters(self.counters)

    def _count(self, stat: str, plugin: str, n: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(stat, n)
        if self.counters is not None:
            self.counters.incr(plugin, n)
