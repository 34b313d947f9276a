"""The busy area of every content site: ``/busy/`` answers 429 with a Retry-After for a moment, then serves.

A real site under load answers ``429 Too Many Requests`` with ``Retry-After`` for a while and then recovers; a polite
crawler must hold *every* worker off the site until the Retry-After has run out (``block:{<domain>}``). The area:

| path | what |
|---|---|
| ``/busy/`` | the index: links to ``/busy/1.html`` … ``/busy/<BUSY_PAGES>.html``; always answers 200 |
| ``/busy/<n>.html`` | page *n*: links to the index and to pages *n*-1 and *n*+1 (same pages whatever the time) |

The pages themselves are pure functions of the request (:func:`busy_page`, rendered by the router). Only *when* a
page may be served is state, kept in :class:`BusyArea` next to the Twisted resource: the first request for a
numbered page of a site opens that site's busy window, and every request for a numbered page that arrives in the
next ``seconds`` (BUSY_SECONDS) is answered 429 with ``Retry-After: BUSY_RETRY_AFTER``; after it, 200 for good
(until the server restarts). The index is outside the window so that a crawl always learns the pages before the
site gets busy. Each site has its own window, so a test can take a site whose area nobody has touched yet
(``busy.first`` is null in the stats).

The area also records when it answered what (``[time, path, status]``, server clock ``time.time()`` seconds, at
most MAX_RECORDED per site), exposed in ``/_demoweb/stats.json`` under each site's ``busy``: the end-to-end test
checks from it that no worker came back before the Retry-After ran out.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from deploy.demoweb import templates
from deploy.demoweb.sites import Site, base_url

BUSY_PREFIX = "/busy/"
BUSY_PAGES = 40  # numbered pages: more than two workers' CONCURRENT_REQUESTS (16 each), so a block matters
BUSY_SECONDS = 1.0  # how long the area answers 429 after its first page request
BUSY_RETRY_AFTER = 3  # seconds, the Retry-After of its 429s
MAX_RECORDED = 10_000  # answers kept per site: a demo running for days does not grow without bound

_BUSY_PAGE = re.compile(r"^/busy/([1-9][0-9]*)\.html$")


def busy_page_number(path: str) -> int | None:
    """0 for the index, *n* for page *n* of the busy area, None for any other path (404 inside the area)."""
    if path == BUSY_PREFIX:
        return 0
    match = _BUSY_PAGE.match(path)
    if match and int(match.group(1)) <= BUSY_PAGES:
        return int(match.group(1))
    return None


def busy_path(number: int) -> str:
    return BUSY_PREFIX if number == 0 else f"{BUSY_PREFIX}{number}.html"


def busy_title(number: int) -> str:
    return "Busy area" if number == 0 else f"Busy page {number}"


def busy_page(site: Site, origin: str, number: int) -> str:
    """The HTML of the index (0) or of page ``number``: its ``<h1>`` is :func:`busy_title`."""
    linked: Sequence[int]
    if number == 0:
        linked = range(1, BUSY_PAGES + 1)
    else:
        linked = [n for n in (0, number - 1, number + 1) if 0 <= n <= BUSY_PAGES]
    links = "".join(f'<li><a href="{busy_path(n)}">{escape(busy_title(n))}</a></li>' for n in linked)
    main = (f'<h1 class="page-title">{escape(busy_title(number))}</h1>\n'
            f'<p class="message">This area answers 429 (Retry-After: {BUSY_RETRY_AFTER}) for '
            f'{BUSY_SECONDS:g} s after its first page is asked for.</p>\n<ul class="busy">{links}</ul>')
    return templates.layout(site, origin, f"{busy_title(number)} - {site.title}", main)


def describe_busy(site: Site, port: int) -> dict[str, Any]:
    """The busy area's entry in a content site's manifest."""
    url = base_url(site.name, port) + BUSY_PREFIX[1:]
    return {
        "url": url,
        "pages": [url] + [base_url(site.name, port) + busy_path(n)[1:] for n in range(1, BUSY_PAGES + 1)],
        "titles": [busy_title(n) for n in range(BUSY_PAGES + 1)],
        "busy_seconds": BUSY_SECONDS,
        "retry_after": BUSY_RETRY_AFTER,
        "expect": f"its numbered pages answer 429 (Retry-After: {BUSY_RETRY_AFTER}) for {BUSY_SECONDS:g} s after "
                  "the first of them is asked for, then 200: a polite crawl keeps every worker off the site until "
                  "the Retry-After runs out, and stores every page in the end",
    }


@dataclass
class _SiteWindow:
    first: float | None = None  # when the first numbered page was asked for (server clock, seconds)
    answers: deque[tuple[float, str, int]] = field(default_factory=lambda: deque(maxlen=MAX_RECORDED))


class BusyArea:
    """When each site's busy window opened, and what the area answered when; times are given by the caller."""

    def __init__(self, seconds: float = BUSY_SECONDS, retry_after: int = BUSY_RETRY_AFTER) -> None:
        self.seconds = seconds
        self.retry_after = retry_after
        self._sites: dict[str, _SiteWindow] = {}

    def too_busy(self, site: str, path: str, now: float) -> bool:
        """Whether a request for ``path`` (inside the area) arriving at ``now`` gets a 429; opens the window."""
        if not path.endswith(".html"):  # the index is always served
            return False
        window = self._sites.setdefault(site, _SiteWindow())
        if window.first is None:
            window.first = now
        return now < window.first + self.seconds

    def record(self, site: str, path: str, status: int, now: float) -> None:
        self._sites.setdefault(site, _SiteWindow()).answers.append((now, path, status))

    def stats(self, site: str) -> dict[str, Any]:
        """``{"first", "until", "retry_after", "answers": [[time, path, status], …]}`` of one site."""
        window = self._sites.get(site, _SiteWindow())
        return {"first": window.first,
                "until": None if window.first is None else window.first + self.seconds,
                "retry_after": self.retry_after,
                "answers": [list(answer) for answer in window.answers]}

    def sites(self) -> list[str]:
        return list(self._sites)
