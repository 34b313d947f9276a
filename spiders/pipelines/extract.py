"""Main text, title and publication date of content pages (seed 4.3.1.4 ②):
``ITEM_PIPELINES = {"spiders.pipelines.extract.ExtractPipeline": 400}``.

An item that carries ``_html`` (the decoded page of a detail/content page) goes through
:func:`spiders.extraction.extract`; the item gets ``text``, ``markdown`` (the main text as CommonMark,
``spiders.extraction.markdown``), ``title`` and ``published``, and ``_html`` is popped (it is never stored). The
crawl's rule may choose its outputs (``"outputs": ["text", "markdown", "metadata"]``, all three by default; the
spider hands the choice over as ``_outputs``, popped here): ``text`` and ``markdown`` only when chosen. What the
crawl's rule extracted wins over the extraction's guess: a non-empty ``title`` (or ``published``, or ``text``) of
the item is kept.

Extraction is CPU work (about 5 ms a page), not a network wait: a thread would only add a hand-over and contend
for the GIL, so it runs either in a process pool (:mod:`spiders.pipelines.pagework`, at 340, on by default when
the host has more than one core per worker; the item then arrives here without ``_html``) or right here in the
reactor thread. It must never cost an item: when it raises, the item
goes on without text, the failure is logged on one line (the traceback only the first time in this process) and
counted (``extract/failed`` in Scrapy's stats, ``stats:crawler:extract:failed:…`` for the cluster). The page's
tree parsed by the metadata pipeline (``_document``) is reused, not parsed again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from spiders.extraction import extract
from spiders.pipelines import close_counters, cluster_counters

logger = logging.getLogger(__name__)

FAILED = "extract:failed"  # the cluster counter's plugin name
EXTRACTED = ("text", "markdown", "title", "published")
OUTPUTS = ("text", "markdown", "metadata")  # what a rule's "outputs" may choose (messaging/schemas/common.json)
CHOSEN = ("text", "markdown")  # the fields stored only when the crawl chose them


def chosen_outputs(item: dict[str, Any]) -> Any:
    """The crawl's outputs for this item: its rule's ``outputs``, else all of them."""
    outputs = item.get("_outputs")
    return OUTPUTS if outputs is None else outputs


class ExtractPipeline:
    def __init__(self, stats: Any = None, counters: Any = None,
                 extractor: Callable[..., Mapping[str, object]] = extract) -> None:
        self.stats = stats
        self.counters = counters
        self.extractor = extractor
        self._traceback_logged = False

    @classmethod
    def from_crawler(cls, crawler: Any) -> ExtractPipeline:
        return cls(stats=crawler.stats, counters=cluster_counters(crawler))

    def process_item(self, item: dict[str, Any]) -> dict[str, Any]:
        if "_html" not in item:
            return item
        html = item.pop("_html")
        outputs = chosen_outputs(item)
        item.pop("_outputs", None)
        url = item.get("url")
        # The page as the metadata pipeline parsed it (one parse a page), if it did.
        shared = {"document": document} if (document := item.pop("_document", None)) is not None else {}
        try:
            if "markdown" in outputs:
                extracted = self.extractor(html or "", url, markdown=True, **shared)
            else:
                extracted = self.extractor(html or "", url, **shared)
        except Exception as exc:  # a bug on one odd page must not lose the item: it is stored without text
            self._failed(url, exc)
            return item
        for field in EXTRACTED:
            if field in CHOSEN and field not in outputs:
                continue
            if not item.get(field):
                item[field] = extracted.get(field)
        if self.stats is not None:
            self.stats.inc_value("extract/pages")
        return item

    async def close_spider(self) -> None:
        await close_counters(self.counters)

    def _failed(self, url: Any, exc: Exception) -> None:
        logger.warning("main-text extraction failed on %s (%s: %s); the item is kept without text", url,
                       type(exc).__name__, exc, exc_info=None if self._traceback_logged else exc)
        self._traceback_logged = True
        if self.stats is not None:
            self.stats.inc_value("extract/failed")
        if self.counters is not None:
            self.counters.incr(FAILED)
