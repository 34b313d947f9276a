"""What a page says to robots about itself: ``<meta name="robots">``, the ``X-Robots-Tag`` header, ``rel="nofollow"``.

Directives (Google's and Bing's robots meta tag specification; StormCrawler's ``RobotsTags`` is the crawler-side
reference): ``noindex`` (the page is not stored), ``nofollow`` (its links are not followed), ``none`` (both),
``noarchive`` (stored, recorded in the item's ``robots_meta``), ``all`` (nothing). Where they come from:

- ``<meta name="robots" content="...">`` and ``<meta name="<token>" content="...">`` for crawlfleet's product token
  (CRAWLFLEET_ROBOTSTXT_USER_AGENT), names matched case-insensitively; another crawler's meta tag is not ours;
- every ``X-Robots-Tag`` header: ``noindex, nofollow`` for every crawler, ``<token>: noindex`` for one crawler only
  (a user-agent prefix applies to the directives after it, up to the next prefix: ``otherbot: noindex, nofollow``
  concerns otherbot twice). Directives with a value of their own (``unavailable_after: <date>``,
  ``max-snippet: 20``) are not taken for prefixes.

Directives of every source add up (the most restrictive wins). A link with ``rel="nofollow"`` is dropped by the rules'
link extraction (:mod:`spiders.rules`). A crawl's rule may set ``"ignore_robots_meta": true`` to ignore all three.

Pure functions of a Scrapy response (no Redis), used by :class:`spiders.spiders.base.FleetSpider` on the output path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lxml import etree

from spiders.xpaths import ReusedXPath

NOINDEX, NOFOLLOW, NOARCHIVE = "noindex", "nofollow", "noarchive"
NOINDEX_META = "fleet_noindex"  # set in a response's meta when noindex left its items out (counted per crawl)
KNOWN = frozenset({NOINDEX, NOFOLLOW, NOARCHIVE})
# Directives whose own syntax has a colon: never a user-agent prefix.
VALUED = frozenset({"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"})
_META = ReusedXPath("//meta[@name and @content]")  # evaluated on every page: its error log bounded


@dataclass(frozen=True)
class RobotsMeta:
    directives: frozenset[str] = frozenset()

    @property
    def noindex(self) -> bool:
        return NOINDEX in self.directives

    @property
    def nofollow(self) -> bool:
        return NOFOLLOW in self.directives

    @property
    def recorded(self) -> list[str]:
        """What an item that is stored keeps of them (``noarchive``)."""
        return sorted(self.directives - {NOINDEX, NOFOLLOW})


def _directives(values: str) -> set[str]:
    found = set()
    for raw in values.split(","):
        value = raw.strip().lower()
        if value == "none":
            found |= {NOINDEX, NOFOLLOW}
        elif value in KNOWN:
            found.add(value)
    return found


def header_directives(values: list[str], token: str) -> set[str]:
    """The directives of ``X-Robots-Tag`` header values that concern ``token`` (unscoped, or prefixed with it)."""
    token = token.lower()
    found: set[str] = set()
    for header in values:
        scope: str | None = None  # None: every crawler
        for part in header.split(","):
            name, colon, rest = part.partition(":")
            name = name.strip().lower()
            if colon and name and name not in VALUED and " " not in name:
                scope, part = name, rest
            if scope is None or scope == token:
                found |= _directives(part)
    return found


def meta_directives(root: Any, token: str) -> set[str]:
    """The directives of a page's ``<meta name="robots|<token>" content>`` tags (an lxml tree)."""
    found: set[str] = set()
    names = {"robots", token.lower()}
    try:
        metas = _META(root)
    except Exception:  # a tree lxml cannot search: no meta tags to obey
        return found
    for meta in metas:
        if (meta.get("name") or "").strip().lower() in names:
            found |= _directives(meta.get("content") or "")
    return found


def robots_meta(response: Any, token: str) -> RobotsMeta:
    """Every directive of the response that concerns ``token``: its X-Robots-Tag headers, and its meta tags when it
    is an HTML page."""
    headers = [value.decode("latin-1") for value in response.headers.getlist(b"X-Robots-Tag")]
    found = header_directives(headers, token)
    selector = getattr(response, "selector", None) if hasattr(response, "text") else None
    if selector is not None:
        try:
            root = selector.root
        except Exception:  # unparsable: the rule reports it
            root = None
        if isinstance(root, etree._Element):
            found |= meta_directives(root, token)
    return RobotsMeta(frozenset(found))
