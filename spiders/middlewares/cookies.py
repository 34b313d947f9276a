"""Cookies kept per crawl for every worker of the crawl (issue 35):
``spiders.middlewares.cookies.FleetCookiesMiddleware`` in the place of Scrapy's ``CookiesMiddleware`` (700), set by
the fleet's add-on for one's own spiders.

Scrapy keeps a spider's cookies in its process (one jar per ``meta["cookiejar"]``); a fleet crawl's next request may
run on another worker, on another host, so a spider that logs in once must find its session there. This middleware is
Scrapy's own (the same cookie rules, ``request.cookies``, ``dont_merge_cookies``, ``COOKIES_ENABLED``,
``COOKIES_DEBUG``), with each jar of a crawl kept in Redis (``cookies:{<crawlid>}:<jar>``: one field per cookie,
``<domain> <path> <name>`` -> the cookie as JSON):

- before a request of the crawl goes out, its jar is read from Redis (off the reactor) and replaces the local copy,
  so it holds what every worker of the crawl has set, and removed, until then;
- the cookies the request carries itself and those its response sets are written back (what changed: set or
  removed) **before** the response reaches the spider — so a request the spider yields on that page, which becomes a
  task only once the page is processed, always finds them, whichever worker leases it.

Requests outside a crawl of one's own spider (the rule spiders' tasks, robots.txt) use Scrapy's local jars as
before. The jars expire CRAWLFLEET_CRAWL_TTL after their last change.
"""

from __future__ import annotations

import json
from http.cookiejar import Cookie
from typing import Any

from scrapy import Request
from scrapy.downloadermiddlewares.cookies import CookiesMiddleware
from scrapy.http import Response
from scrapy.http.cookies import CookieJar
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import threads

from messaging import clients, keys
from messaging.clients import as_text
from spiders.fleet_settings import crawlfleet_settings
from spiders.worker.own import runs_rules

FIELDS = ("version", "name", "value", "port", "port_specified", "domain", "domain_specified", "domain_initial_dot",
          "path", "path_specified", "secure", "expires", "discard", "comment", "comment_url", "rfc2109")


def cookie_field(cookie: Cookie) -> str:
    return f"{cookie.domain} {cookie.path} {cookie.name}"


def cookie_json(cookie: Cookie) -> str:
    data = {name: getattr(cookie, name) for name in FIELDS}
    data["rest"] = dict(getattr(cookie, "_rest", {}) or {})
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def cookie_from_json(raw: str) -> Cookie:
    data = json.loads(raw)
    return Cookie(**{name: data.get(name) for name in FIELDS}, rest=data.get("rest") or {})


def jar_snapshot(jar: CookieJar) -> dict[str, str]:
    return {cookie_field(cookie): cookie_json(cookie) for cookie in jar.jar}


class FleetCookiesMiddleware:
    """Scrapy's cookies middleware (``local``, which does the cookie work on its jars) with a crawl's jars shared by
    its workers (see the module docstring)."""

    def __init__(self, local: CookiesMiddleware, redis: Any = None, ttl: int = 0) -> None:
        self.local = local
        self.redis = redis  # None: Scrapy's local jars only (a rule spider)
        self.ttl = ttl

    @property
    def jars(self) -> Any:
        return self.local.jars

    @classmethod
    def from_crawler(cls, crawler: Any) -> FleetCookiesMiddleware:
        middleware = cls(CookiesMiddleware.from_crawler(crawler))  # NotConfigured when COOKIES_ENABLED is off
        if not runs_rules(crawler.spider):
            settings = crawlfleet_settings(crawler.settings)
            middleware.redis = clients.redis_client(settings)
            middleware.ttl = int(settings.crawl_ttl)
        return middleware

    async def process_request(self, request: Request, spider: Any = None) -> Any:
        key = self._shared_key(request)
        if key is None:
            return self.local.process_request(request)
        jar = self.jars[request.meta.get("cookiejar")]
        stored = await maybe_deferred_to_future(threads.deferToThread(self.redis.hgetall, key))
        jar.jar.clear()
        for raw in stored.values():
            jar.jar.set_cookie(cookie_from_json(as_text(raw)))
        before = {as_text(name): as_text(value) for name, value in stored.items()}
        result = self.local.process_request(request)
        await self._save(key, before, jar)  # the cookies the request carried itself join the crawl's jar
        return result

    async def process_response(self, request: Request, response: Response, spider: Any = None) -> Any:
        key = self._shared_key(request)
        if key is None:
            return self.local.process_response(request, response)
        jar = self.jars[request.meta.get("cookiejar")]
        before = jar_snapshot(jar)
        result = self.local.process_response(request, response)
        await self._save(key, before, jar)
        return result

    def _shared_key(self, request: Request) -> str | None:
        crawlid = request.meta.get("crawlid")
        if self.redis is None or not crawlid or request.meta.get("dont_merge_cookies", False):
            return None
        jar = request.meta.get("cookiejar")
        return keys.cookie_jar(str(crawlid), "" if jar is None else str(jar))

    async def _save(self, key: str, before: dict[str, str], jar: CookieJar) -> None:
        after = jar_snapshot(jar)
        changed = {name: value for name, value in after.items() if before.get(name) != value}
        removed = [name for name in before if name not in after]
        if not changed and not removed:
            return

        def write() -> None:
            pipe = self.redis.pipeline(transaction=False)
            if changed:
                pipe.hset(key, mapping=changed)
            if removed:
                pipe.hdel(key, *removed)
            pipe.expire(key, self.ttl)
            pipe.execute()

        await maybe_deferred_to_future(threads.deferToThread(write))
