"""A crawl's exact counts: pages and items once per canonical URL, re-processings apart, failures by reason.

Workers count a page when its task completes (``spiders.worker.commit``), with one script on the crawl's two
count hashes (:func:`messaging.keys.crawl_counted`, :func:`messaging.keys.crawl_totals`): the first processing of
a canonical URL counts the page and the items it stored; every later one (a re-fetch after a fault) counts as
``restored``. A task that failed (an HTTP error status, a download error) is a page with its reason: ``failures``
by reason, and ``start_failure`` when it was the crawl's start URL (a start URL answering 404 ends the crawl with 0
items; this says why). Pages left out on purpose count the same way, with reason ``robots`` (robots.txt disallows
the task: it is dropped unfetched), ``blacklisted`` (the domain's queue was dropped) or ``noindex`` (the page's
robots directives: its items are not stored). A request one's own Scrapy spider yielded that cannot travel to
another worker (``spiders.travel``: a lambda callback, non-JSON meta, too large) is a failed page too, never fetched,
with reason ``untravelable: <what>`` (``callback``, ``errback``, ``meta``, ``cb_kwargs``, ``cookies``, ``class``,
``size`` …); the items an errback of such a spider stored for a failed page count as its items. The
``crawl_finished`` event and the info answer read them here.

**Failed URLs and their retry.** A failure of a listed reason (every reason but those three and ``untravelable``,
which has no task to retry: an HTTP error after Scrapy's retries, a timeout, a DNS or connection error, a page no
request could be made for) is also kept in the crawl's failures list (:mod:`messaging.failures`, MongoDB), up to
CRAWLFLEET_FAILURES_MAX pages per crawl: ``listed`` counts the failing pages the list holds, ``unlisted`` those
beyond its bound, so ``listed + unlisted`` is the sum of the listed reasons' ``failures``. ``crawlfleet retry``
re-submits the listed pages as tasks of the same crawl with a retry number; the first processing of retry number n
of a page counts as ``retried`` (a re-delivery of it, after a fault, as ``restored``), never as a new page. A page
that works then leaves its reason's count and the list and counts its items; one that fails again stays, under its
newest reason. So ``pages`` stays the crawl's distinct pages, ``items`` the documents MongoDB holds, ``failures``
the pages failing now.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from messaging import keys
from messaging.clients import RedisClient, as_text

FAILED_PREFIX = "failed:"
START_FAILURE = "start"
# reasons of pages that were not fetched or not stored although nothing failed: robots.txt disallows the URL
# (dropped by the politeness step), the domain is blacklisted (its queue dropped), the page's robots directives
# say noindex (its items are not stored)
ROBOTS, BLACKLISTED, NOINDEX = "robots", "blacklisted", "noindex"
UNTRAVELABLE = "untravelable"  # the prefix of a refused request's reason: "untravelable: <what>" (spiders.travel)
UNLISTED_REASONS = frozenset({ROBOTS, BLACKLISTED, NOINDEX})  # left out on purpose: not failures to list or retry


@dataclass
class CrawlCounts:
    pages: int = 0  # canonical URLs processed (first processing)
    items: int = 0  # items stored by the first store of each page
    restored: int = 0  # processings of a page after its first, after a fault
    retried: int = 0  # processings of a page by `crawlfleet retry` (the first of each retry number)
    listed: int = 0  # failing pages kept in the crawl's failures list (messaging.failures)
    unlisted: int = 0  # failing pages beyond the list's bound (CRAWLFLEET_FAILURES_MAX)
    failures: dict[str, int] = field(default_factory=dict)  # reason ("HTTP 404", "TimeoutError") -> pages
    start_failure: str | None = None  # why the start URL failed, if it did
    exact: bool = True  # False: the crawl predates the counts hash (the crawl hash's counters were used)

    def as_dict(self) -> dict[str, Any]:
        return {"pages": self.pages, "items": self.items, "restored": self.restored, "retried": self.retried,
                "failures": dict(sorted(self.failures.items())), "start_failure": self.start_failure,
                "failed_urls": {"listed": self.listed, "unlisted": self.unlisted}}


def listed_reason(reason: str) -> bool:
    """Whether a failure of this reason goes to the failures list (and can be retried)."""
    return bool(reason) and reason not in UNLISTED_REASONS and not reason.startswith(UNTRAVELABLE)


def failure_reason(status: int | None = None, error: str = "") -> str:
    """A failed task's reason as counted: ``HTTP <status>`` or the error's type name (no URLs: few distinct)."""
    if status:
        return f"HTTP {int(status)}"
    return (error or "failed").replace("\n", " ")[:80]


def read_counts(redis: RedisClient, crawlid: str) -> CrawlCounts:
    """The crawl's counts (one ``HGETALL`` of its small totals hash)."""
    totals = {as_text(k): as_text(v) for k, v in (redis.hgetall(keys.crawl_totals(crawlid)) or {}).items()}
    if not totals:  # nothing counted yet, or a crawl counted before the totals existed
        legacy = redis.hmget(keys.crawl(crawlid), ["pages", "items"])
        counts = CrawlCounts()
        if any(value is not None for value in legacy):
            counts.pages, counts.items = (int(float(v or 0)) for v in legacy)
            counts.exact = False
        return counts
    failures = {name[len(FAILED_PREFIX):]: int(value) for name, value in totals.items()
                if name.startswith(FAILED_PREFIX) and int(value) > 0}
    return CrawlCounts(int(totals.get("pages", 0)), int(totals.get("items", 0)), int(totals.get("restored", 0)),
                       int(totals.get("retried", 0)), int(totals.get("listed", 0)), int(totals.get("unlisted", 0)),
                       failures, totals.get(START_FAILURE))
