"""Requests of the spider types that ask for it go out through the pool's live proxies (seed 4.3.1.2, fig. 4-19).

``DOWNLOADER_MIDDLEWARES = {"spiders.middlewares.proxy.FleetProxyMiddleware": 740}``, with
``CRAWLFLEET_PROXY_SPIDER_TYPES=universal,list`` (or ``meta["proxy_pool"] = True``/``False`` on one request).

- **Choose.** A request that already has ``meta["proxy"]`` keeps it: the worker's feed chooses the proxy in the
  politeness step, so that the per-IP throttle counts the proxy's exit address. Otherwise the middleware takes the
  next of :meth:`ProxyChooser.candidates` for the request's domain (round robin over the live proxies of the
  worker's memory copy, :mod:`spiders.proxies.chooser`). ``meta["proxy"]`` is the proxy's URL with its credentials;
  Scrapy's ``HttpProxyMiddleware`` (750, after this one) moves them into ``Proxy-Authorization``. Logs and counters
  name a proxy by ``ip:port`` only, never with its credentials. With no live proxy the request goes out directly
  (counted in ``proxy/direct``, logged every 30 s): the politeness step counted the worker's own address then.
- **Fail over.** A proxy that fails a request — a download error of ``RETRY_EXCEPTIONS`` (refused, reset,
  timeout...) or a status of CRAWLFLEET_PROXY_BAN_STATUSES (403, 407) — is reported to the pool (one failure more;
  at CRAWLFLEET_PROXY_MAX_FAILURES it leaves the pool; this worker leaves it out for CRAWLFLEET_PROXY_COOLDOWN
  seconds at once), and the request is retried through another proxy (``meta["proxy_tried"]`` lists the failed
  ones). After CRAWLFLEET_PROXY_RETRIES other proxies the failure goes on to Scrapy's RetryMiddleware as usual.
- **Order 740**: requests pass here before HttpProxyMiddleware (750) reads ``meta["proxy"]``; responses and
  exceptions come here before RetryMiddleware (550), RetryAfterMiddleware (560) and RedirectMiddleware (600), so a
  proxy's failure is retried through another proxy instead of through the same one.
- The first requests wait (in a thread, never the reactor) until the pool has been read once.
"""

from __future__ import annotations

import logging
import time
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request
from scrapy.http import Response
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.misc import load_object
from twisted.internet.threads import deferToThread

from spiders.proxies.chooser import ProxyChooser, shared_chooser
from spiders.proxies.model import proxy_id
from spiders.worker.gate import site_of

logger = logging.getLogger(__name__)
FIRST_LOAD_TIMEOUT = 15.0  # seconds the first requests wait for the pool's first read
DIRECT_LOG_INTERVAL = 30.0


def split_list(value: Any) -> list[str]:
    items = value.split(",") if isinstance(value, str) else list(value or ())
    return [str(item).strip() for item in items if str(item).strip()]


def meta_proxy_id(request: Request) -> str | None:
    """``ip:port`` of the request's proxy (``meta["proxy"]``, with or without credentials), or None."""
    url = request.meta.get("proxy")
    if not url:
        return None
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        return proxy_id(parts.hostname or "", parts.port or 80)
    except ValueError:
        return None


class FleetProxyMiddleware:
    def __init__(self, chooser: ProxyChooser, spider_types: list[str], *, retries: int = 5,
                 ban_statuses: list[int] | None = None, exceptions: tuple[type[BaseException], ...] = (),
                 stats: Any = None, clock: Any = time.monotonic) -> None:
        self.chooser = chooser
        self.spider_types = frozenset(spider_types)
        self.retries = retries
        self.ban_statuses = frozenset(ban_statuses if ban_statuses is not None else (403, 407))
        self.exceptions = exceptions
        self.stats = stats
        self.clock = clock
        self._direct_logged_at = float("-inf")

    @classmethod
    def from_crawler(cls, crawler: Any) -> FleetProxyMiddleware:
        from spiders.fleet_settings import crawlfleet_settings

        settings = crawlfleet_settings(crawler.settings)
        exceptions = tuple(load_object(path) if isinstance(path, str) else path
                           for path in crawler.settings.getlist("RETRY_EXCEPTIONS"))
        return cls(shared_chooser(crawler), split_list(settings["CRAWLFLEET_PROXY_SPIDER_TYPES"]),
                   retries=settings["CRAWLFLEET_PROXY_RETRIES"],
                   ban_statuses=[int(s) for s in split_list(settings["CRAWLFLEET_PROXY_BAN_STATUSES"])],
                   exceptions=exceptions, stats=crawler.stats)

    def wants_proxy(self, request: Request, spider: Any = None) -> bool:
        asked = request.meta.get("proxy_pool")
        if asked is not None:
            return bool(asked)
        spider_type = request.meta.get("spider_type") or getattr(spider, "name", None)
        return spider_type in self.spider_types

    # --- choose ---------------------------------------------------------------------------------------------------
    async def process_request(self, request: Request, spider: Any = None) -> None:
        if not self.wants_proxy(request, spider):
            return
        if request.meta.get("proxy"):  # chosen at take time (or by the spider): keep it, know it by its id
            request.meta.setdefault("proxy_id", meta_proxy_id(request))
            return
        pool = self.chooser.pool
        if not pool.loaded:
            await maybe_deferred_to_future(deferToThread(pool.wait_loaded, FIRST_LOAD_TIMEOUT))
        self._assign(request)

    def _assign(self, request: Request) -> None:
        tried = request.meta.get("proxy_tried") or ()
        domain = site_of(request)  # the queue the request's hits count on, as the take chose its proxies by
        proxy = self.chooser.choose(domain, exclude=tried) or self.chooser.choose(domain)
        if proxy is None:
            request.meta.pop("proxy", None)
            request.meta.pop("proxy_id", None)
            self._count("proxy/direct")
            now = self.clock()
            if now - self._direct_logged_at >= DIRECT_LOG_INTERVAL:
                self._direct_logged_at = now
                logger.warning("no live proxy in the pool: %s goes out directly", request.url)
            return
        request.meta["proxy"] = proxy.url
        request.meta["proxy_id"] = proxy.id
        self._count("proxy/requests")

    # --- fail over ------------------------------------------------------------------------------------------------
    def process_response(self, request: Request, response: Response, spider: Any = None) -> Request | Response:
        if response.status not in self.ban_statuses or not self.wants_proxy(request, spider):
            return response
        pid = request.meta.get("proxy_id") or meta_proxy_id(request)
        if pid is None:
            return response
        return self._retry(request, pid, f"HTTP {response.status}") or response

    def process_exception(self, request: Request, exception: BaseException, spider: Any = None) -> Request | None:
        if not isinstance(exception, self.exceptions) or not self.wants_proxy(request, spider):
            return None
        pid = request.meta.get("proxy_id") or meta_proxy_id(request)
        if pid is None:
            return None
        return self._retry(request, pid, type(exception).__name__)

    def _retry(self, request: Request, pid: str, reason: str) -> Request | None:
        self.chooser.report_failure(pid, reason)
        self._count("proxy/failures")
        tried = [*request.meta.get("proxy_tried", ()), pid]
        if len(tried) > self.retries:
            logger.info("%s failed through %d proxies (last %s: %s); Scrapy's retries take over", request.url,
                        len(tried), pid, reason)
            return None
        retry = request.replace(dont_filter=True)
        retry.meta["proxy_tried"] = tried
        retry.meta.pop("proxy", None)
        retry.meta.pop("proxy_id", None)
        self._assign(retry)
        logger.debug("proxy %s failed %s (%s): retrying through %s", pid, request.url, reason,
                     retry.meta.get("proxy_id") or "no proxy")
        self._count("proxy/retries")
        return retry

    def _count(self, key: str, n: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(key, n)
