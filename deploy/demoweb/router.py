"""Which reply a demo site gives to a path: pure functions of the request, no Twisted.

Besides the content (home, list pages, articles, calendar), every site answers like a real one does:
robots.txt and a sitemap index, permanent (301) and temporary (302) redirects, 404 for what does not exist,
500 from its search, a slow live page, a disallowed staff area, and a busy area (``/busy/``, :mod:`deploy.demoweb.busy`)
whose pages are rendered here and whose 429 moment is decided by the resource (:meth:`Router.too_busy_reply`).

In static mode every page of finite number (home, list pages, articles, robots.txt, sitemaps, assets) is
rendered once at start and served from memory; the rest (calendar, redirects, errors) is cheap anyway.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from deploy.demoweb import templates
from deploy.demoweb.busy import BUSY_PREFIX, BUSY_RETRY_AFTER, busy_page, busy_page_number
from deploy.demoweb.sites import DEFAULT_SLOW_SECONDS, DISALLOWED_PREFIX, Site, manifest

MANIFEST_PATH = "/_demoweb/manifest.json"
STATS_PATH = "/_demoweb/stats.json"

_CALENDAR = re.compile(r"^/calendar/([0-9]{1,6})/([0-9]{2})/([0-9]{2})/$")
_SITEMAP_CHUNK = re.compile(r"^/sitemaps/articles-([1-9][0-9]*)\.xml$")
_OLD_ARTICLE = re.compile(r"^/old/([0-9]+)\.html$")


Query = Mapping[str, list[str]]


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    content_type: str
    location: str | None = None  # redirects
    delay: float = 0.0  # seconds to wait before answering (the slow page)
    headers: tuple[tuple[str, str], ...] = ()  # any other header (Retry-After of the busy area's 429)


class Body(Protocol):
    """A streamed body, as Twisted's NoRangeStaticProducer reads it."""

    def read(self, size: int = -1, /) -> bytes: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class StreamReply:
    """A reply whose body is written in pieces as the client reads it: large bodies (the hostile site's) are never
    one bytes object per request. ``open_body`` gives each request its own file-like object (``read``, ``close``)."""

    status: int
    content_type: str
    length: int
    open_body: Callable[[], Body]
    headers: tuple[tuple[str, str], ...] = ()


class OwnHost(Protocol):
    """A host that answers every path itself (``route``): the hostile site, a robots host, the client-rendered site."""

    @property
    def name(self) -> str: ...

    @property
    def ip(self) -> str: ...

    @property
    def articles(self) -> int: ...

    def route(self, path: str, origin: str) -> Reply | StreamReply: ...

    def describe(self, port: int) -> dict[str, Any]: ...


Host = Site | OwnHost  # a content site (its replies made here) or a host that answers for itself


class Router:
    """Replies of the demo sites served on ``port``."""

    def __init__(self, sites: Iterable[Host], *, port: int, pages: int, seed: str, static: bool = False,
                 slow_seconds: float = DEFAULT_SLOW_SECONDS) -> None:
        self.sites = tuple(sites)
        self.port = port
        self.slow_seconds = slow_seconds
        self.static = static
        self.manifest = manifest(self.sites, port=port, pages=pages, seed=seed, static=static,
                                 slow_seconds=slow_seconds)
        self._by_name = {site.name: site for site in self.sites}
        self._by_ip = {site.ip: site for site in self.sites}
        self._manifest_json = json.dumps(self.manifest, indent=2, ensure_ascii=False).encode() + b"\n"
        self._manifest_reply = Reply(200, self._manifest_json, "application/json")
        # Paths every site answers the same way, whatever its URL style.
        self._fixed: dict[str, Callable[[Site, str, Query], Reply]] = {
            "/": lambda site, origin, _: self._html(site, templates.home_page(site, origin)),
            "/robots.txt": lambda site, origin, _: Reply(200, templates.robots_txt(site, origin).encode(),
                                                         "text/plain; charset=utf-8"),
            "/sitemap.xml": lambda site, origin, _: Reply(200, templates.sitemap_index(site, origin).encode(),
                                                          "application/xml"),
            "/static/site.css": lambda *_: Reply(200, templates.STYLESHEET.encode(), "text/css"),
            "/static/ad.gif": lambda *_: Reply(200, templates.AD_GIF, "image/gif"),
            MANIFEST_PATH: lambda *_: self._manifest_reply,
            "/index.html": lambda site, *_: self._redirect(site, 301, "/"),
            "/latest": lambda site, *_: self._redirect(site, 302, site.list_path(site.sections[0][0])),
            "/live/": lambda site, origin, _: self._html(site, self._slow_page(site, origin),
                                                         delay=self.slow_seconds),
            "/search": lambda site, origin, _: self._html(
                site, templates.error_page(site, origin, 500), status=500),
            "/ads/click": lambda site, _, query: self._ad_click(site, query),
            "/about/": lambda site, origin, _: self._html(
                site, templates.message_page(site, origin, site.title, site.name)),
            "/contact/": lambda site, origin, _: self._html(
                site, templates.message_page(site, origin, site.title, f"newsroom@{site.name}")),
        }
        self._cache: dict[tuple[str, str], Reply] = {}
        if static:
            self._cache = {(site.name, path): self._render(site, path, {})
                           for site in self.sites if isinstance(site, Site) for path in self.finite_paths(site)}

    @property
    def cached_pages(self) -> int:
        return len(self._cache)

    def site_for(self, host_header: str | None, local_ip: str) -> Host | None:
        """The site a request is for: its Host header when that names a site, else the address it came to."""
        if host_header:
            name = host_header.rsplit(":", 1)[0].rstrip(".").lower()
            if name in self._by_name:
                return self._by_name[name]
        return self._by_ip.get(local_ip)

    def origin(self, site: Host) -> str:
        return f"http://{site.name}:{self.port}"

    def route(self, site: Host, path: str, query: Query) -> Reply | StreamReply:
        if not isinstance(site, Site):  # the host answers for itself, but for the demo web's manifest
            return self._manifest_reply if path == MANIFEST_PATH else site.route(path, self.origin(site))
        cached = self._cache.get((site.name, path))
        if cached is not None:
            return cached
        return self._render(site, path, query)

    def finite_paths(self, site: Site) -> Iterator[str]:
        """Every path whose reply is a page of the site that a static server holds in memory."""
        yield from ("/", "/robots.txt", "/sitemap.xml", "/static/site.css", "/static/ad.gif", MANIFEST_PATH)
        yield from (f"/sitemaps/articles-{chunk}.xml" for chunk in range(1, site.sitemap_chunks + 1))
        yield from site.list_paths()
        yield from (site.article_path(article_id) for article_id in range(site.articles))

    # --- rendering -----------------------------------------------------------------------------------------
    def _render(self, site: Site, path: str, query: Query) -> Reply:
        origin = self.origin(site)
        fixed = self._fixed.get(path)
        if fixed is not None:
            return fixed(site, origin, query)
        if path.startswith(BUSY_PREFIX):
            number = busy_page_number(path)
            return self._not_found(site) if number is None else self._html(site, busy_page(site, origin, number))
        if path.startswith(DISALLOWED_PREFIX):
            staff_only = templates.message_page(site, origin, "Staff only", "Robots are not welcome.")
            return self._html(site, staff_only)
        if (article_id := site.parse_article_path(path)) is not None:
            if article_id < site.articles:
                return self._html(site, templates.article_page(site, origin, article_id))
            return self._not_found(site)  # a deleted story, still linked from related stories
        if (listed := site.parse_list_path(path)) is not None:
            return self._html(site, templates.list_page(site, origin, *listed))
        return self._other(site, path, origin)

    def _other(self, site: Site, path: str, origin: str) -> Reply:
        if match := _CALENDAR.match(path):
            day = (int(match.group(1)), int(match.group(2)), int(match.group(3)))
            if templates.valid_day(day):
                return self._html(site, templates.calendar_page(site, origin, day))
        elif match := _SITEMAP_CHUNK.match(path):
            chunk = int(match.group(1))
            if chunk <= site.sitemap_chunks:
                return Reply(200, templates.sitemap_chunk(site, origin, chunk).encode(), "application/xml")
        elif match := _OLD_ARTICLE.match(path):
            if int(match.group(1)) < site.articles:
                return self._redirect(site, 301, site.article_path(int(match.group(1))))
        else:
            # A section without its index page ("/world", "/guonei/"): moved permanently to it.
            section = path.strip("/")
            if any(section == slug for slug, _ in site.sections) and path != site.list_path(section):
                return self._redirect(site, 301, site.list_path(section))
        return self._not_found(site)

    def is_busy_page(self, site: Host, path: str) -> bool:
        """Whether ``path`` is a page of a content site's busy area (whose answer the resource may turn to 429)."""
        return isinstance(site, Site) and busy_page_number(path) is not None

    def too_busy_reply(self, site: Site, retry_after: int = BUSY_RETRY_AFTER) -> Reply:
        """The busy area's 429, with the Retry-After a polite crawler waits for."""
        page = templates.message_page(site, self.origin(site), "429", templates.LABELS[site.language.code]["error"])
        body = page.encode(site.encoding, "xmlcharrefreplace")
        return Reply(429, body, f"text/html; charset={site.encoding}", headers=(("Retry-After", str(retry_after)),))

    def _slow_page(self, site: Site, origin: str) -> str:
        label = templates.LABELS[site.language.code]["live_title"]
        return templates.message_page(site, origin, label, f"{self.slow_seconds:g} s")

    def _ad_click(self, site: Site, query: Query) -> Reply:
        try:
            ad_id = int(query.get("id", ["0"])[0])
        except ValueError:
            return self._not_found(site)
        return self._redirect(site, 302, site.article_path(ad_id % site.articles))

    def _html(self, site: Site, text: str, *, status: int = 200, delay: float = 0.0) -> Reply:
        # xmlcharrefreplace: a character outside the site's encoding still shows, as a browser would expect.
        body = text.encode(site.encoding, "xmlcharrefreplace")
        return Reply(status, body, f"text/html; charset={site.encoding}", delay=delay)

    def _redirect(self, site: Site, status: int, path: str) -> Reply:
        target = self.origin(site) + path
        body = f'<html><body><a href="{target}">Moved</a></body></html>\n'.encode()
        return Reply(status, body, "text/html; charset=utf-8", location=target)

    def _not_found(self, site: Site) -> Reply:
        return self._html(site, templates.error_page(site, self.origin(site), 404), status=404)
