"""Scrapy dupefilter on the cluster-wide Bloom filter (seed 4.2.3): ``DUPEFILTER_CLASS = "spiders.dupefilter.
BloomDupeFilter"``.

Every worker of the cluster shares the filter in Redis (:mod:`frontier.bloom`). Scope (CRAWLFLEET_BLOOM_NAMESPACE):

- ``crawl`` (default): one filter per crawl, chosen by the task's ``request.meta["crawlid"]``; it starts small
  (CRAWLFLEET_BLOOM_CRAWL_CAPACITY), grows by layers, and expires CRAWLFLEET_BLOOM_CRAWL_TTL after its last use.
  Requests without a crawl id use the global filter.
- ``global``: one filter (CRAWLFLEET_BLOOM_CAPACITY) for every crawl.

A request is identified by :func:`frontier.bloom.fingerprint.request_fingerprint` (its canonical URL for a body-less
GET), the fingerprint every worker and its committer (``spiders.worker.commit``) mark in the shared filter, whatever
the Scrapy settings: Scrapy's ``REQUEST_FINGERPRINTER_CLASS`` is not used here for the fleet's rule spiders (setting
it logs a warning at start). A worker of one's own spider (issue 35) keys its requests by the project's fingerprinter
instead (``spiders.travel``), carried in each task, and the commit marks those in the same filters.
Scrapy's scheduler calls :meth:`BloomDupeFilter.request_seen` per request; the project's scheduler calls
:meth:`BloomDupeFilter.seen_batch` (or :meth:`filter_new`) once per response with all the links it extracted: one
Redis round trip for the batch. Counted in the crawler's stats (``dupefilter/new``, ``dupefilter/duplicate``,
``dupefilter/filtered``) and in the project counters (``Stats(redis, "crawler")``: ``dupefilter:new``,
``dupefilter:duplicate``, ``dupefilter:redirect``). Final URLs of redirects are marked by
:class:`spiders.middlewares.redirect_dedup.RedirectDedupMiddleware` through :meth:`mark_urls`.

Calls to Redis are synchronous, as in scrapy-redis: one short round trip per batch.

**In the fleet's worker** the dupefilter is the one ``DUPEFILTER_CLASS`` names, loaded as Scrapy's own scheduler
loads it (``spiders.worker.build``; the fleet's add-on sets this class). Its commits mark a whole batch of children
per crawl at once in a filter the whole cluster shares, so the class must offer that batch interface
(:class:`BatchDupeFilter`: ``namespace(meta)``, ``bloom(namespace)`` with ``contains_fingerprints`` and
``add_fingerprints``), as this one and its subclasses do. A class without it — Scrapy's ``RFPDupeFilter``, which
remembers only what one process saw — stops the worker at start with the reason (:func:`require_batch_interface`):
adapting it would dedup each worker's links by themselves and crawl every page once per worker that finds it.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from scrapy import Request
from scrapy.dupefilters import BaseDupeFilter

from frontier.bloom import BloomFilter, BloomSpec, crawl_namespace, open_filter
from frontier.bloom.fingerprint import request_fingerprint, url_fingerprint
from frontier.bloom.sizing import shard_count
from messaging import clients, modules
from messaging.bounded import count_evictions, declare_memo
from messaging.settings import Settings
from messaging.stats import Stats
from spiders.fleet_settings import crawlfleet_settings

logger = logging.getLogger(__name__)
GLOBAL = "global"
OPEN_FILTERS = 256  # per-crawl filters kept open in one process (reopening one costs two round trips)
IGNORED_FINGERPRINTER = (
    "REQUEST_FINGERPRINTER_CLASS is set (%s) but the cluster's dupefilter ignores it: every worker identifies a "
    "request by frontier.bloom.fingerprint.request_fingerprint (its canonical URL), so that all agree on what was seen")


class FingerprintSet(Protocol):
    def add_fingerprints(self, fingerprints: Sequence[bytes]) -> list[bool]:
        """Mark the fingerprints; for each, whether it was new."""
        ...

    def contains_fingerprints(self, fingerprints: Sequence[bytes]) -> list[bool]:
        """For each fingerprint, whether the set holds it (nothing is marked)."""
        ...


@runtime_checkable
class BatchDupeFilter(Protocol):
    """What the fleet's worker asks of its dupefilter: a cluster-wide set per scope, marked in batches."""

    def namespace(self, meta: Mapping[str, Any]) -> str:
        """The scope of a request or task by its meta (``crawlid``)."""
        ...

    def bloom(self, namespace: str) -> FingerprintSet:
        """The shared set of a scope."""
        ...


def require_batch_interface(dupefilter: Any, path: str) -> BatchDupeFilter:
    """``dupefilter`` if it offers :class:`BatchDupeFilter`, else ``TypeError`` with what the worker needs."""
    if isinstance(dupefilter, BatchDupeFilter):
        return dupefilter
    raise TypeError(
        f"DUPEFILTER_CLASS {path!r} cannot serve the fleet's worker: its commits mark each batch of links per crawl "
        "in a set the whole cluster shares (namespace(meta), bloom(namespace).contains_fingerprints / "
        "add_fingerprints(fingerprints)), which "
        f"{type(dupefilter).__name__} does not offer. Keep spiders.dupefilter.BloomDupeFilter (the fleet add-on's "
        "default) or a subclass of it, or run the spider without the fleet (-s ADDONS={}) to use Scrapy's own "
        "scheduler and dupefilter.")


class BloomDupeFilter(BaseDupeFilter):
    """Drops requests whose fingerprint the cluster's Bloom filter has seen (a false positive drops a new URL
    with probability CRAWLFLEET_BLOOM_ERROR_RATE)."""

    def __init__(self, redis: Any, settings: Settings, *, stats: Any = None, counters: Stats | None = None,
                 debug: bool = False, now_ms: Any = None) -> None:
        self.redis = redis
        self.settings = settings
        self.stats = stats
        self.counters = counters
        self.debug = debug
        self.scope = settings.bloom_namespace
        if self.scope not in ("crawl", GLOBAL):
            raise ValueError(f"CRAWLFLEET_BLOOM_NAMESPACE must be 'crawl' or 'global', not {self.scope!r}")
        self._now_ms = now_ms
        self._filters: OrderedDict[str, BloomFilter] = OrderedDict()
        declare_memo("bloom_filters")
        self._logged_first = False

    @classmethod
    def from_crawler(cls, crawler: Any) -> BloomDupeFilter:
        rules = getattr(crawler.spidercls, "fleet_rules", False)  # one's own spider's worker uses the fingerprinter
        if rules and crawler.settings.getpriority("REQUEST_FINGERPRINTER_CLASS") not in (None, 0):
            logger.warning(IGNORED_FINGERPRINTER, crawler.settings.get("REQUEST_FINGERPRINTER_CLASS"))
        settings = crawlfleet_settings(crawler.settings)
        redis = clients.redis_client(settings)
        return cls(redis, settings, stats=crawler.stats, counters=Stats(redis, modules.CRAWLER),
                   debug=crawler.settings.getbool("DUPEFILTER_DEBUG"))

    @classmethod
    def from_settings(cls, settings: Any = None) -> BloomDupeFilter:
        """Without a crawler (no Scrapy stats): from Scrapy settings, a crawlfleet Settings, or the environment."""
        resolved = settings if isinstance(settings, Settings) else crawlfleet_settings(settings)
        redis = clients.redis_client(resolved)
        return cls(redis, resolved, counters=Stats(redis, modules.CRAWLER))

    # --- scopes --------------------------------------------------------------------------------------------------
    def namespace(self, meta: Mapping[str, Any]) -> str:
        crawlid = meta.get("crawlid")
        return crawl_namespace(crawlid) if self.scope == "crawl" and crawlid else GLOBAL

    def bloom(self, namespace: str) -> BloomFilter:
        """The (cached) filter of a namespace, created with this process's settings when it is new."""
        bloom = self._filters.get(namespace)
        if bloom is not None:
            self._filters.move_to_end(namespace)
            return bloom
        s = self.settings
        per_crawl = namespace != GLOBAL
        capacity = s.bloom_crawl_capacity if per_crawl else s.bloom_capacity
        spec = BloomSpec(capacity=capacity, error_rate=s.bloom_error_rate, groups=s.bloom_groups,
                         shards=shard_count(capacity, s.bloom_shards),
                         counting=s.bloom_counting, growth=s.bloom_growth, tightening=s.bloom_tightening,
                         memory_slack=s.bloom_memory_slack)
        bloom = open_filter(self.redis, namespace, spec, ttl=s.bloom_crawl_ttl if per_crawl else 0.0,
                            now_ms=self._now_ms, eager=False)
        self._filters[namespace] = bloom
        if len(self._filters) > OPEN_FILTERS:
            self._filters.popitem(last=False)
            count_evictions("bloom_filters")
        return bloom

    # --- Scrapy's interface --------------------------------------------------------------------------------------
    def request_seen(self, request: Request) -> bool:
        return self.seen_batch([request])[0]

    def seen_batch(self, requests: Sequence[Request]) -> list[bool]:
        """Check-and-add a batch (e.g. every link of one response): for each request, True when it was seen
        before (drop it), False when it is new (it is now marked). One Redis round trip per scope in the batch."""
        by_scope: dict[str, list[int]] = defaultdict(list)
        for index, request in enumerate(requests):
            by_scope[self.namespace(request.meta)].append(index)
        seen = [False] * len(requests)
        for namespace, indexes in by_scope.items():
            fingerprints = [request_fingerprint(requests[i].url, requests[i].method, requests[i].body or b"")
                            for i in indexes]
            for i, new in zip(indexes, self.bloom(namespace).add_fingerprints(fingerprints), strict=True):
                seen[i] = not new
        duplicates = sum(seen)
        self._count("new", len(requests) - duplicates)
        self._count("duplicate", duplicates)
        return seen

    def filter_new(self, requests: Sequence[Request]) -> list[Request]:
        """The requests of a batch that were not seen before (and are now marked)."""
        return [request for request, seen in zip(requests, self.seen_batch(requests), strict=True) if not seen]

    def mark_urls(self, urls: Sequence[str], meta: Mapping[str, Any] | None = None) -> int:
        """Mark URLs as seen (e.g. where a redirect ended) in the scope of ``meta``; returns how many were new."""
        if not urls:
            return 0
        marked = sum(self.bloom(self.namespace(meta or {})).add_fingerprints([url_fingerprint(u) for u in urls]))
        self._count("redirect", marked)
        return marked

    def open(self) -> None:
        self.redis.ping()  # fail at start rather than at the first response

    def close(self, reason: str = "") -> None:
        self._filters.clear()
        self.redis.close()

    def log(self, request: Request, spider: Any) -> None:
        if self.debug:
            logger.debug("Filtered duplicate request: %(request)s", {"request": request}, extra={"spider": spider})
        elif not self._logged_first:
            logger.debug("Filtered duplicate request: %(request)s - no more duplicates will be shown (see "
                         "DUPEFILTER_DEBUG to show all duplicates)", {"request": request}, extra={"spider": spider})
            self._logged_first = True
        if self.stats is not None:
            self.stats.inc_value("dupefilter/filtered")

    def _count(self, what: str, amount: int) -> None:
        if amount <= 0:
            return
        if self.stats is not None:
            self.stats.inc_value(f"dupefilter/{what}", amount)
        if self.counters is not None:
            self.counters.incr(f"dupefilter:{what}", amount)
