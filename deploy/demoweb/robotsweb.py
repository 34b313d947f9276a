"""The robots hosts of the demo web: robots.txt files and pages that say what robots may do, each with what a polite
crawl does with them (RFC 9309, meta robots, X-Robots-Tag, ``rel="nofollow"``).

Every host has its own loopback address, so robots.txt (per host) and politeness (per domain) see distinct hosts.
Each serves ``/`` (links to ``/pages/0.html`` … ``/pages/<PLAIN_PAGES-1>.html``; every page's ``<h1>`` is its
title) besides what it is about:

- ``robots-moved``: robots.txt 301s to ``/policies/robots.txt`` on the same host, which says ``Disallow: /``. A
  crawl from ``/`` fetches no page at all.
- ``robots-away``: robots.txt 301s to ``/policies/moved``, which 302s to ``robots-files``' ``/hop``, which 301s to
  its ``/away.txt``: ``Disallow: /`` (three redirects, two across hosts). A crawl fetches no page.
- ``robots-files``: no robots.txt (404, allow all); it holds the files the others redirect to.
- ``robots-down``: robots.txt answers 503 (Retry-After: 1) for DOWN_SECONDS after its first request (once per server
  lifetime), then ``Disallow: /private/``. A crawl fetches nothing before the robots.txt answers 200, then every
  page but ``/private/``.
- ``robots-groups``: a ``*`` group disallowing everything, a ``crawl`` group (a prefix of our token, not ours)
  disallowing ``/pages/``, and a ``CrawlFleet`` group disallowing ``/members/``. A crawl fetches every page but
  ``/members/``.
- ``robots-meta``: allow all; its pages carry meta robots, X-Robots-Tag headers and a rel=nofollow link
  (:data:`META_PAGES`: what each says, and whether a crawl stores it; :data:`META_NEVER_FETCHED`).
- ``robots-slow``: robots.txt (``Disallow: /private/``) answers after SLOW_SECONDS. Every worker together fetches it
  once.
- ``robots-huge``: a robots.txt of HUGE_BYTES: ``Disallow: /private/`` first, comment lines, and ``Disallow: /``
  beyond 500 KiB, which RFC 9309 lets a crawler ignore (2.5). A crawl fetches every page but ``/private/``.
- ``robots-loop``: robots.txt redirects to ``/r/1``, ``/r/1`` to ``/r/2`` … ``/r/<LOOP_HOPS>`` to a ``Disallow: /``
  file: more than five redirects, so the robots.txt counts as unavailable (2.3.1.2) and a crawl fetches every page,
  having asked for ``/robots.txt`` and ``/r/1`` … ``/r/5`` only.

Each host records what it answered when (``[time, path, status]``, server clock ``time.time()``), exposed in
``/_demoweb/stats.json`` under the host's ``answers``: the end-to-end tests judge the crawl from it.
"""

from __future__ import annotations

import functools
import ipaddress
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from html import escape
from typing import Any
from urllib.parse import urlsplit

from deploy.demoweb.router import Reply
from deploy.demoweb.sites import DOMAIN, base_url

PLAIN_PAGES = 6
DOWN_SECONDS = 4.0
SLOW_SECONDS = 3.0
MAX_RECORDED = 5000
_HTML = "text/html; charset=utf-8"
_TEXT = "text/plain; charset=utf-8"
DISALLOW_ALL = "User-agent: *\nDisallow: /\n"
GROUPS = ("# our group wins over *; a group named by a prefix of our token is not ours\n"
          "User-agent: *\nDisallow: /\n\nUser-agent: crawl\nDisallow: /pages/\n\n"
          "User-agent: CrawlFleet\nDisallow: /members/\n")
MEMBERS = 3
HUGE_BYTES = 700 * 1024
LOOP_HOPS = 8

# robots-meta: path -> (meta tag, X-Robots-Tag header, links of the page, stored?)
META_PAGES: dict[str, tuple[str, str, tuple[str, ...], bool]] = {
    "/meta/noindex.html": ('<meta name="robots" content="noindex">', "", ("/meta/from-noindex.html",), False),
    "/meta/from-noindex.html": ("", "", (), True),  # noindex is no nofollow: its links are followed
    "/meta/nofollow.html": ('<meta name="ROBOTS" content="nofollow">', "", ("/meta/behind-nofollow.html",), True),
    "/meta/none.html": ('<meta name="robots" content="none">', "", ("/meta/behind-none.html",), False),
    "/meta/ours.html": ('<meta name="crawlfleet" content="noindex">', "", (), False),
    "/meta/theirs.html": ('<meta name="otherbot" content="noindex, nofollow">', "", ("/meta/from-theirs.html",),
                          True),
    "/meta/from-theirs.html": ("", "", (), True),
    "/meta/header-noindex.html": ("", "noindex", (), False),
    "/meta/header-ours.html": ("", "otherbot: noindex, crawlfleet: nofollow", ("/meta/behind-header.html",), True),
    "/meta/header-theirs.html": ("", "otherbot: noindex", (), True),
    "/meta/noarchive.html": ('<meta name="robots" content="noarchive">', "", (), True),
    "/meta/behind-nofollow.html": ("", "", (), False),  # never fetched: only a nofollow page links here
    "/meta/behind-none.html": ("", "", (), False),
    "/meta/behind-header.html": ("", "", (), False),
    "/meta/rel-target.html": ("", "", (), False),  # only linked with rel="nofollow"
}
META_LINKED = ("/meta/noindex.html", "/meta/nofollow.html", "/meta/none.html", "/meta/ours.html", "/meta/theirs.html",
               "/meta/header-noindex.html", "/meta/header-ours.html", "/meta/header-theirs.html",
               "/meta/noarchive.html")  # from the home page
META_NEVER_FETCHED = ("/meta/behind-nofollow.html", "/meta/behind-none.html", "/meta/behind-header.html",
                      "/meta/rel-target.html")


def _page(title: str, links: tuple[str, ...] | list[str] = (), head: str = "", extra: str = "") -> bytes:
    items = "".join(f'<li><a href="{escape(path)}">{escape(path)}</a></li>' for path in links)
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{escape(title)}</title>{head}</head>"
            f"<body><h1>{escape(title)}</h1><ul>{items}</ul>{extra}</body></html>\n").encode()


@dataclass(eq=False)
class RobotsHost:
    """One robots host (see the module docstring): ``route`` answers every path, and records the answer."""

    kind: str
    ip: str
    articles: int = PLAIN_PAGES  # plain pages (the demo web's start-up log counts every site's pages)
    clock: Any = time.time
    _first: float | None = field(default=None, repr=False)
    _answers: deque[tuple[float, str, int]] = field(default_factory=lambda: deque(maxlen=MAX_RECORDED), repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def name(self) -> str:
        return f"robots-{self.kind}.{DOMAIN}"

    def route(self, path: str, origin: str) -> Reply:
        reply = self._route(path, origin)
        with self._lock:
            self._answers.append((self.clock(), path, reply.status))
        return reply

    def _route(self, path: str, origin: str) -> Reply:
        if path == "/robots.txt":
            return self._robots(origin)
        if (reply := self._files(path, origin)) is not None:
            return reply
        if self.kind == "meta" and path in META_PAGES:
            meta, header, links, _ = META_PAGES[path]
            headers = (("X-Robots-Tag", header),) if header else ()
            return Reply(200, _page(path, links, head=meta), _HTML, headers=headers)
        if path == "/":
            return Reply(200, self._index(), _HTML)
        if path.startswith(("/pages/", "/members/", "/private/")) and path.endswith(".html"):
            number = path.rsplit("/", 1)[1].removesuffix(".html")
            if number.isdigit() and int(number) < PLAIN_PAGES:
                return Reply(200, _page(path, ["/"]), _HTML)
        return Reply(404, _page("Not found"), _HTML)

    def _robots(self, origin: str) -> Reply:
        if self.kind == "moved":
            return _redirect(301, origin + "/policies/robots.txt")
        if self.kind == "away":
            return _redirect(301, origin + "/policies/moved")
        if self.kind == "files":
            return Reply(404, b"no robots.txt here\n", _TEXT)
        if self.kind == "down":
            with self._lock:
                self._first = self.clock() if self._first is None else self._first
                down = self.clock() < self._first + DOWN_SECONDS
            if down:
                return Reply(503, b"down for maintenance\n", _TEXT, headers=(("Retry-After", "1"),))
            return Reply(200, b"User-agent: *\nDisallow: /private/\n", _TEXT)
        if self.kind == "groups":
            return Reply(200, GROUPS.encode(), _TEXT)
        if self.kind == "slow":
            return Reply(200, b"User-agent: *\nDisallow: /private/\n", _TEXT, delay=SLOW_SECONDS)
        if self.kind == "huge":
            return Reply(200, huge_robots(), _TEXT)
        if self.kind == "loop":
            return _redirect(302, origin + "/r/1")
        return Reply(200, b"User-agent: *\nAllow: /\n", _TEXT)

    def _files(self, path: str, origin: str) -> Reply | None:
        files = origin.replace(f"//{self.name}", f"//robots-files.{DOMAIN}")
        if self.kind == "moved" and path == "/policies/robots.txt":
            return Reply(200, DISALLOW_ALL.encode(), _TEXT)
        if self.kind == "away" and path == "/policies/moved":
            return _redirect(302, files + "/hop")
        if self.kind == "files" and path == "/hop":
            return _redirect(301, files + "/away.txt")
        if self.kind == "files" and path == "/away.txt":
            return Reply(200, DISALLOW_ALL.encode(), _TEXT)
        if self.kind == "loop" and path.startswith("/r/") and path[3:].isdigit():
            hop = int(path[3:])
            if hop < LOOP_HOPS:
                return _redirect(302, f"{origin}/r/{hop + 1}")
            return Reply(200, DISALLOW_ALL.encode(), _TEXT)
        return None

    def _index(self) -> bytes:
        links = [f"/pages/{n}.html" for n in range(PLAIN_PAGES)]
        if self.kind in ("groups", "down", "slow", "huge"):
            links += [f"/{'members' if self.kind == 'groups' else 'private'}/{n}.html" for n in range(MEMBERS)]
        extra = ""
        if self.kind == "meta":
            links += list(META_LINKED)
            extra = '<p><a rel="nofollow" href="/meta/rel-target.html">not to be followed</a></p>'
        return _page(f"{self.name} home", links, extra=extra)

    def answers(self) -> list[list[Any]]:
        with self._lock:
            return [list(answer) for answer in self._answers]

    def describe(self, port: int) -> dict[str, Any]:
        url = base_url(self.name, port)
        return {"ip": self.ip, "url": url, "kind": self.kind, "plain_pages": PLAIN_PAGES,
                "down_seconds": DOWN_SECONDS if self.kind == "down" else None,
                "slow_seconds": SLOW_SECONDS if self.kind == "slow" else None,
                "meta_pages": {path: {"stored": stored} for path, (_, _, _, stored) in META_PAGES.items()}
                if self.kind == "meta" else None}


def _redirect(status: int, target: str) -> Reply:
    urlsplit(target)  # a malformed target is a bug here, not a page
    return Reply(status, f'<a href="{escape(target)}">moved</a>\n'.encode(), _HTML, location=target)


@functools.cache
def huge_robots() -> bytes:
    """``Disallow: /private/``, then comment lines up to HUGE_BYTES with ``Disallow: /`` past 500 KiB."""
    head = b"User-agent: *\nDisallow: /private/\n"
    filler = b"# " + b"filler of a robots.txt that grew too big " * 2 + b"\n"
    body = bytearray(head)
    while len(body) < 600 * 1024:
        body += filler
    body += b"Disallow: /\n"
    while len(body) < HUGE_BYTES:
        body += filler
    return bytes(body)


def robots_hosts(first_ip: str = "127.0.0.16") -> tuple[RobotsHost, ...]:
    """The robots hosts, on consecutive addresses from ``first_ip``."""
    kinds = ("moved", "away", "files", "down", "groups", "meta", "slow", "huge", "loop")
    first = ipaddress.IPv4Address(first_ip)
    return tuple(RobotsHost(kind, str(first + n)) for n, kind in enumerate(kinds))
