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

**One's own Scrapy project** (issue 35) adds the same line to its settings, ``ADDONS = {"spiders.addon.FleetAddon":
0}``, and its spiders run unchanged as fleet workers (``spiders.worker.own``): for a spider that is not one of the
fleet's rule spiders the add-on wraps the project's own settings, middlewares, extensions, pipelines and FEEDS with
the fleet's core only (:data:`OWN_COMPONENTS`): the scheduler and the Bloom dupefilter, the output middleware
(requests travel whole), the cookie jars shared by the crawl's workers in place of Scrapy's, the status counters,
Retry-After blocks, adaptive samples, WARC, the proxy pool and the render download handler (a request asks for a
render with ``meta["fleet_render"] = True``), the worker's metrics and health, and the fleet's item store after the
project's pipelines (:mod:`spiders.pipelines.own_items`; CRAWLFLEET_ITEM_STORE=0 leaves it out). None of the rule
spiders' page work (User-Agent rotation, decoding, cleaning, main text) touches its requests or items. robots.txt is
obeyed as the project's ROBOTSTXT_OBEY says, by the cluster's shared cache (for the product token of its
ROBOTSTXT_USER_AGENT or USER_AGENT) instead of Scrapy's per-process middleware; and the crawl's own ``settings`` and
arguments (a Kafka crawl request's, the manager's) are applied to a worker that joins it.
"""

from __future__ import annotations

import re
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

# What one's own spider gets instead of the rule spiders' components (see the module docstring).
OWN_COMPONENTS: dict[str, dict[str, Any]] = {
    "SPIDER_MIDDLEWARES": {"spiders.worker.output.TaskOutputMiddleware": 20},
    "DOWNLOADER_MIDDLEWARES": {
        "spiders.middlewares.status.HttpStatusCounterMiddleware": 860,
        "spiders.middlewares.adaptive.DownloadSampleMiddleware": 870,
        "spiders.warc.middleware.WarcMiddleware": 880,
        "spiders.middlewares.retry_after.RetryAfterMiddleware": 560,
        "spiders.middlewares.proxy.FleetProxyMiddleware": 740,
        # the crawl's jars in Redis, shared by its workers, in the place of Scrapy's own
        "scrapy.downloadermiddlewares.cookies.CookiesMiddleware": None,
        "spiders.middlewares.cookies.FleetCookiesMiddleware": 700,
        # robots.txt: the politeness step and the cluster's cache (CRAWLFLEET_ROBOTSTXT_OBEY, from ROBOTSTXT_OBEY)
        "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    },
    "EXTENSIONS": {"spiders.metrics.WorkerMetrics": 500, "spiders.health.WorkerHealth": 510,
                   "spiders.pipelines.own_items.OwnItemStore": 520},
    "DOWNLOAD_HANDLERS": {"http": "spiders.render.handler.RenderDownloadHandler",
                          "https": "spiders.render.handler.RenderDownloadHandler"},
}
ROBOTS_TOKEN = re.compile(r"[A-Za-z_-]+")


class FleetAddon:
    """Plugs the fleet's components into a crawler's settings (Scrapy calls :meth:`update_settings` once)."""

    def __init__(self, crawler: Any = None) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Any) -> FleetAddon:
        return cls(crawler)

    def update_settings(self, settings: BaseSettings) -> None:
        for name, value in SETTINGS.items():
            settings.set(name, value, PRIORITY)
        spidercls = getattr(self.crawler, "spidercls", None)
        if spidercls is not None and not getattr(spidercls, "fleet_rules", False):
            self._own(settings)
            return
        for name, components in COMPONENTS.items():
            _add_components(settings, name, components)

    def _own(self, settings: BaseSettings) -> None:
        """One's own spider: the fleet's core around the project's components, and its crawl's settings."""
        for name, components in OWN_COMPONENTS.items():
            _add_components(settings, name, components)
        settings.set("CRAWLFLEET_ROBOTSTXT_OBEY", settings.getbool("ROBOTSTXT_OBEY"), PRIORITY)
        token = ROBOTS_TOKEN.match(str(settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT") or ""))
        if token:
            settings.set("CRAWLFLEET_ROBOTSTXT_USER_AGENT", token.group(0), PRIORITY)
        from spiders.worker.own import apply_crawl  # the worker's modules load Scrapy's: not at import time

        apply_crawl(self.crawler, settings)


def _add_components(settings: BaseSettings, name: str, components: dict[str, Any]) -> None:
    """Each component into the ``name`` dict at the add-on's priority: an entry set higher (None: off) is kept."""
    current: Any = settings[name]
    if not isinstance(current, BaseSettings):  # a Settings built without Scrapy's defaults
        current = BaseSettings(current or {}, priority=settings.getpriority(name) or 0)
        settings.set(name, current, settings.getpriority(name) or 0)
    for path, order in components.items():
        current.set(path, order, PRIORITY)
