"""The ``http``/``https`` download handler of a worker that may render:
``DOWNLOAD_HANDLERS = {"http": "spiders.render.handler.RenderDownloadHandler", "https": ...}``.

A request whose ``meta["fleet_render"]`` is true (set by :class:`spiders.render.middleware.RenderMiddleware`) is
rendered in the worker's browser (:mod:`spiders.render.browser`, :mod:`spiders.render.page`); every other request
goes to Scrapy's own HTTP/1.1 handler, unchanged. Both are the download of the same request, after the same
downloader middlewares (User-Agent, proxy, Retry-After, status counters): a render needs nothing else from the
fleet.

Why not scrapy-playwright: the worker runs Scrapy's default asyncio reactor, which scrapy-playwright needs and the
fleet's scheduler does not mind (its Redis calls are in threads), so the reactor is no obstacle. What does not fit
is the rest: scrapy-playwright takes a proxy per *context* from ``playwright_context_kwargs`` and ignores the
``meta["proxy"]`` the feed chose for the task (whose address the per-IP throttle counted); it does not recycle
contexts after N pages; its timeout covers the navigation only, not the scripts, page methods and reading the DOM
(a hung page would hold the task's lease until the worker's heartbeat stopped); and a per-page cap on same-host
sub-requests needs per-page state its abort predicate does not have. This handler is those ~300 lines on Playwright
itself, on the reactor's asyncio loop (nothing blocks the reactor).
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy import Request
from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.http import Response
from scrapy.utils.misc import build_from_crawler

from messaging.hostmap import load_hostmap
from spiders.fleet_settings import crawlfleet_settings
from spiders.render.browser import BrowserPool, PoolConfig, find_browser
from spiders.render.page import RenderConfig, RenderFailed, render

logger = logging.getLogger(__name__)

RENDER_META = "fleet_render"


def render_config(settings: Any) -> RenderConfig:
    block = tuple(kind.strip() for kind in settings.render_block.split(",") if kind.strip())
    return RenderConfig(timeout=settings.render_timeout, settle=settings.render_settle, block=block,
                        subrequests=settings.render_subrequests)


class RenderDownloadHandler:
    lazy = False

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler
        self.settings = crawlfleet_settings(crawler.settings)
        self.static = build_from_crawler(HTTP11DownloadHandler, crawler)
        self.config = render_config(self.settings)
        self._pool: BrowserPool | None = None

    @classmethod
    def from_crawler(cls, crawler: Any) -> RenderDownloadHandler:
        return cls(crawler)

    @property
    def pool(self) -> BrowserPool:
        """The worker's browser pool, made on the first render (the browser itself starts with its first page)."""
        if self._pool is None:
            s = self.settings
            self._pool = BrowserPool(PoolConfig(find_browser(s.render_browser), pages=s.render_pages,
                                                context_pages=s.render_context_pages, hosts=load_hostmap(s)))
        return self._pool

    async def download_request(self, request: Request) -> Response:
        if not request.meta.get(RENDER_META):
            return await self.static.download_request(request)
        stats = self.crawler.stats
        try:
            response = await render(self.pool, request, self.config)
        except RenderFailed as exc:
            if "Download is starting" not in str(exc):
                stats.inc_value(f"render/failed/{type(exc).__name__}")
                raise
            stats.inc_value("render/not_a_page")  # a file the browser would download (a PDF, an archive): as is
            return await self.static.download_request(request)
        except Exception as exc:
            stats.inc_value(f"render/failed/{type(exc).__name__}")
            raise
        log = request.meta.get("render_log")
        if log is not None:
            stats.inc_value("render/subrequests", log.same_host)
            stats.inc_value("render/subrequests_capped", log.capped)
            stats.inc_value("render/blocked", log.blocked)
        stats.set_value("render/browsers_launched", self.pool.launched)
        stats.set_value("render/contexts_opened", self.pool.contexts_opened)
        return response

    async def close(self) -> None:
        await self.static.close()
        if self._pool is not None:
            await self._pool.close()
