"""The fleet's Scrapy components, declared once as a Scrapy add-on: ``ADDONS = {"spiders.addon.FleetAddon": 0}``.

``spiders/settings.py`` enables it, so every spider of the project runs as a fleet spider: tasks leased from Redis
through the politeness step (the scheduler), the cluster's Bloom filter, child tasks to the seeds queue, the
downloader middlewares that write to Redis or change what is fetched, and the item pipelines down to MongoDB. A
spider that needs none of the fleet's services (the proxy collector, :mod:`spiders.spiders.proxy`) switches it off
in its ``custom_settings`` (``"ADDONS": {"spiders.addon.FleetAddon": None}``), and so does a plain Scrapy run with
``-s ADDONS={}``.

Everything is set at the ``addon`` priority, one component at a time: a value set in the settings module, a
spider's ``custom_settings`` or ``-s`` wins, and a component set to ``None`` there stays off. Plain Scrapy projects
can leave the add-on out and list the components they want one by one, by the dotted paths below.
"""

from __future__ import annotations

from typing import Any

from scrapy.settings import BaseSettings

# What the fleet runs instead of Scrapy's own parts.
SETTINGS: dict[str, str] = {
    # The distributed scheduler: leases tasks through the politeness step (a background thread does every Redis
    # call), keeps redirects and retries local to their task, and completes a task once its items are stored.
    "SCHEDULER": "spiders.worker.scheduler.FleetScheduler",
    # Scrapy's own dupefilter interface on the cluster's Bloom filter (the worker itself checks links in batches).
    "DUPEFILTER_CLASS": "spiders.dupefilter.BloomDupeFilter",
}

SPIDER_MIDDLEWARES: dict[str, int | None] = {
    # last on the way out: requests a callback yields become child tasks of the response's task
    "spiders.worker.output.TaskOutputMiddleware": 20,
}

DOWNLOADER_MIDDLEWARES: dict[str, int | None] = {
    "scrapy.downloadermiddlewares.useragent.UserAgentMiddleware": None,
    "spiders.middlewares.useragent.RotatingUserAgentMiddleware": 500,
    "spiders.middlewares.status.HttpStatusCounterMiddleware": 860,  # every response as it came off the wire
    "spiders.middlewares.adaptive.DownloadSampleMiddleware": 870,  # latency and errors of adaptive sites
    "spiders.warc.middleware.WarcMiddleware": 880,  # WARC records when CRAWLFLEET_WARC_DIR is set (else left out)
    "spiders.middlewares.retry_after.RetryAfterMiddleware": 560,  # 429/503: block the domain cluster-wide
    "spiders.middlewares.decode.DecodeMiddleware": 585,  # decoded after decompression, before the spider
    "spiders.middlewares.conditional.ConditionalMiddleware": 575,  # revisits: If-None-Match, 304, main-text digest
    # through a live proxy of the pool when CRAWLFLEET_PROXY_SPIDER_TYPES names the spider type (chosen when the task
    # was taken, so the per-IP throttle counts the proxy's address); below HttpProxyMiddleware (750)
    "spiders.middlewares.proxy.FleetProxyMiddleware": 740,
    # the rule's render (never / always / auto): which downloads are renders in the worker's browser; after the
    # User-Agent and before the proxy on the way in, after the decoding and before Retry-After on the way out
    "spiders.render.middleware.RenderMiddleware": 580,
}

ITEM_PIPELINES: dict[str, int | None] = {
    "spiders.pipelines.clean.CleanPipeline": 300,  # tidy text fields, drop items missing required fields
    "spiders.pipelines.pagework.PageWorkPipeline": 340,  # in a process pool when CRAWLFLEET_PAGE_PROCESSES allows
    "spiders.pipelines.metadata.MetadataPipeline": 350,  # JSON-LD, microdata, OpenGraph, Twitter cards
    "spiders.pipelines.extract.ExtractPipeline": 400,  # main text, title, date from the page's HTML
    "spiders.pipelines.mongo.MongoPipeline": 900,  # batched, acknowledged writes, one collection per crawl
}

COMPONENTS: dict[str, dict[str, int | None]] = {
    "SPIDER_MIDDLEWARES": SPIDER_MIDDLEWARES,
    "DOWNLOADER_MIDDLEWARES": DOWNLOADER_MIDDLEWARES,
    "ITEM_PIPELINES": ITEM_PIPELINES,
}

PRIORITY = "addon"


class FleetAddon:
    """Plugs the fleet's components into a crawler's settings (Scrapy calls :meth:`update_settings` once)."""

    def update_settings(self, settings: BaseSettings) -> None:
        for name, value in SETTINGS.items():
            settings.set(name, value, PRIORITY)
        for name, components in COMPONENTS.items():
            _add_components(settings, name, components)


def _add_components(settings: BaseSettings, name: str, components: dict[str, int | None]) -> None:
    """Each component into the ``name`` dict at the add-on's priority: an entry set higher (None: off) is kept."""
    current: Any = settings[name]
    if not isinstance(current, BaseSettings):  # a Settings built without Scrapy's defaults
        current = BaseSettings(current or {}, priority=settings.getpriority(name) or 0)
        settings.set(name, current, settings.getpriority(name) or 0)
    for path, order in components.items():
        current.set(path, order, PRIORITY)
