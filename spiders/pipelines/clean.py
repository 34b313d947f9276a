"""Tidies an item's text and drops items missing required fields (seed 4.3.1.4 ①):
``ITEM_PIPELINES = {"spiders.pipelines.clean.CleanPipeline": 300}``.

XPath results keep what the page's source had around the text: indentation, line breaks, ``&nbsp;`` and other
entities that a page escaped twice. Every ``str`` field (and every ``str`` in a list field) is unescaped with
:func:`w3lib.html.replace_entities` (unknown entities are kept as written, "R&D;" stays "R&D;"), then trimmed, and
every run of whitespace, including non-breaking and ideographic spaces, becomes one space. Left alone: the
internal ``_``-keys (``_html`` is the page itself, for the extraction) and the fields that are not text but
identifiers (:data:`VERBATIM`: a URL's query may read like an entity, ``?a=1&copy=2``).

An item missing any field named in ``item["_required"]`` (absent, ``None``, or empty after cleaning) is dropped
with ``DropItem("missing required field(s) title, date")`` and counted: per crawl in Scrapy's stats
(``clean/dropped`` and ``clean/dropped/<crawlid>``), and for the cluster in ``stats:crawler:clean:dropped:…``.
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy.exceptions import DropItem
from w3lib.html import replace_entities

from spiders.pipelines import close_counters, cluster_counters

logger = logging.getLogger(__name__)

VERBATIM = frozenset({"url", "referer", "crawlid", "spider_type", "etag", "fetched_at", "encoding"})
DROPPED = "clean:dropped"  # the cluster counter's plugin name


def clean_text(text: str) -> str:
    """Entities unescaped, whitespace trimmed and collapsed to single spaces."""
    if "&" in text:
        text = replace_entities(text, remove_illegal=False)
    return " ".join(text.split())


def _cleaned(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [_cleaned(element) for element in value]
    return value


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, str | list | tuple | dict) and not value)


class CleanPipeline:
    def __init__(self, stats: Any = None, counters: Any = None) -> None:
        self.stats = stats
        self.counters = counters  # BufferedStats (or anything with incr(plugin, n)), None: Scrapy's stats only

    @classmethod
    def from_crawler(cls, crawler: Any) -> CleanPipeline:
        return cls(stats=crawler.stats, counters=cluster_counters(crawler))

    def process_item(self, item: dict[str, Any]) -> dict[str, Any]:
        for name, value in list(item.items()):
            if not name.startswith("_") and name not in VERBATIM:
                item[name] = _cleaned(value)
        required = item.get("_required") or ()
        missing = [name for name in required if _missing(item.get(name))]
        if missing:
            self._count_drop(item.get("crawlid"))
            raise DropItem(f"missing required field(s) {', '.join(missing)}")
        return item

    async def close_spider(self) -> None:
        await close_counters(self.counters)

    def _count_drop(self, crawlid: Any) -> None:
        if self.stats is not None:
            self.stats.inc_value("clean/dropped")
            self.stats.inc_value(f"clean/dropped/{crawlid or 'unknown'}")
        if self.counters is not None:
            self.counters.incr(DROPPED)
