"""A worker's Prometheus ``/metrics`` (a Scrapy extension): what this process fetched, stored and holds.

Served from the moment the engine starts, on CRAWLFLEET_CRAWLER_METRICS_PORT (-1: CRAWLFLEET_METRICS_PORT; 0: an
ephemeral port, so that many workers on one host never collide), logged and registered in Redis
(``metrics:crawler:<host>:<pid>``, refreshed every :data:`REGISTER_EVERY` seconds from a thread). Counters:
responses by spider type and HTTP status (``error``: none came), hits per site (at most :data:`SITES_TRACKED` sites
by name, later ones under ``other``), items stored; gauges: tasks ready (leased, waiting for the downloader) and
tasks held (every lease of this job), tasks completed, and ``crawlfleet_worker_info`` (labels ``worker``: its job id,
spider type, host, ip; never ``job`` or ``instance``, which Prometheus keeps for the target).
The process collector adds CPU and memory. With each registration the worker also writes its CPU (percent),
resident memory, pages and items into its registry description (``worker:<job>``) for the managers' fleet view,
adds the responses of each site by HTTP status to ``site:{<domain>}:statuses`` for the Sites page, each
crawl's reasons for pages without items (HTTP errors, dropped items, spider errors) to ``crawl:<id>:reasons``, and
the crawls it stored items for to ``worker:<job>:crawls`` (the manager's ``/items/`` of the job). A worker of one's
own spider, which serves one crawl, also writes its Scrapy stats (``crawler.stats``) into
``crawl:<id>:scrapystats`` with each registration and once more when its engine stops, so that the crawl's page
sums them over its workers.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import time
from collections import Counter as Tally
from collections.abc import Iterator
from typing import Any

from prometheus_client import REGISTRY, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from scrapy import signals
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import task, threads

from messaging import keys, modules
from messaging.clients import redis_client
from messaging.domains import domain_of
from messaging.metrics import MetricsEndpoint, serve_metrics
from spiders.fleet_settings import crawlfleet_settings
from spiders.worker.gate import site_of
from spiders.worker.output import meta_of

logger = logging.getLogger(__name__)
MODULE = modules.CRAWLER
REGISTER_EVERY = 5.0
SITES_TRACKED = 1000
OTHER = "other"

RESPONSES = Counter("crawlfleet_worker_responses", "Responses this worker received, by spider type and HTTP status.",
                    ["spider_type", "status"])
SITE_HITS = Counter("crawlfleet_worker_site_hits", "Responses this worker received per site (registered domain).",
                    ["site"])
ITEMS = Counter("crawlfleet_worker_items", "Items this worker scraped (handed to the pipelines).")


class _FeedCollector:
    """Who this worker is (``crawlfleet_worker_info``: worker, spider type, host) and what its feed holds, read when
    scraped. One per process, registered once; it follows the running extension."""

    extension: WorkerMetrics | None = None

    def collect(self) -> Iterator[Metric]:
        feed = self.extension._feed() if self.extension is not None else None
        if feed is None:
            return
        info = GaugeMetricFamily("crawlfleet_worker_info",
                                 "This worker's job id (worker), spider type and host (always 1).",
                                 labels=["worker", "spider_type", "host", "ip"])
        info.add_metric([feed.info.job, feed.info.spider_type, feed.info.host, feed.info.ip], 1)
        ready = GaugeMetricFamily("crawlfleet_worker_ready_tasks", "Leased tasks waiting for the downloader.")
        ready.add_metric([], len(feed.ready))
        held = GaugeMetricFamily("crawlfleet_worker_held_leases", "Leases held (ready, downloading, storing).")
        held.add_metric([], len(feed.held))
        completed = GaugeMetricFamily("crawlfleet_worker_completed_tasks", "Tasks this worker completed.")
        completed.add_metric([], feed.completed)
        yield from (info, ready, held, completed)


FEED = _FeedCollector()
REGISTRY.register(FEED)


class ProcessUsage:
    """CPU (percent of one core since the last sample) and resident memory of this process, from the kernel."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self.clock = clock
        self._last = (clock(), _cpu_seconds())

    def sample(self) -> dict[str, str]:
        now, cpu = self.clock(), _cpu_seconds()
        elapsed = now - self._last[0]
        percent = 100.0 * (cpu - self._last[1]) / elapsed if elapsed > 0 else 0.0
        self._last = (now, cpu)
        return {"cpu_percent": f"{percent:.1f}", "rss_bytes": str(_rss_bytes())}


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # not Linux: the peak instead (kilobytes on Linux, bytes on macOS)
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class WorkerMetrics:
    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler
        self.settings = crawlfleet_settings(crawler.settings)
        self.endpoint: MetricsEndpoint | None = None
        self.redis: Any = None
        self.sites: set[str] = set()
        self.pages = 0
        self.site_statuses: Tally[tuple[str, str]] = Tally()  # counted on the reactor, written with each registration
        self.crawl_reasons: Tally[tuple[str, str]] = Tally()  # (crawlid, reason), likewise
        self.items = 0
        self.item_crawls: set[str] = set()  # crawls this job stored items for since the last registration
        self.usage = ProcessUsage()
        self._loop: Any = None
        self._serves: tuple[str, str] | None = None  # (crawl, job) of a worker of one crawl, once its feed ran

    @classmethod
    def from_crawler(cls, crawler: Any) -> WorkerMetrics:
        extension = cls(crawler)
        crawler.signals.connect(extension.engine_started, signal=signals.engine_started)
        crawler.signals.connect(extension.engine_stopped, signal=signals.engine_stopped)
        crawler.signals.connect(extension.response_received, signal=signals.response_received)
        crawler.signals.connect(extension.item_scraped, signal=signals.item_scraped)
        crawler.signals.connect(extension.item_dropped, signal=signals.item_dropped)
        crawler.signals.connect(extension.spider_error, signal=signals.spider_error)
        return extension

    # --- lifecycle ------------------------------------------------------------------------------------------------
    def engine_started(self) -> None:
        self.endpoint = serve_metrics(self.settings, MODULE)
        logger.info("worker metrics on %s", self.endpoint.url)
        FEED.extension = self
        self._loop = task.LoopingCall(self._register)
        self._loop.start(REGISTER_EVERY, now=True)

    async def engine_stopped(self) -> None:
        if FEED.extension is self:
            FEED.extension = None
        final = self._scrapy_stats(self._feed())
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        endpoint, self.endpoint = self.endpoint, None
        if endpoint is not None:
            endpoint.close()

        def last_word() -> None:  # a thread; Scrapy waits for it before the process ends
            if final is not None:  # the worker's stats as Scrapy dumps them at the end (the crawl page sums them)
                try:
                    self._write_scrapy_stats(final)
                except Exception as exc:  # a Redis that is gone: the last periodic write stands
                    logger.warning("could not write the final stats: %s", exc)
            if endpoint is not None and self.redis is not None:
                try:
                    endpoint.unregister(self.redis)
                except Exception:  # its registration expires by itself
                    pass

        await maybe_deferred_to_future(threads.deferToThread(last_word))

    def _register(self) -> Any:
        endpoint = self.endpoint
        if endpoint is None:
            return None

        feed = self._feed()
        usage = self.usage.sample()
        statuses, self.site_statuses = self.site_statuses, Tally()
        reasons, self.crawl_reasons = self.crawl_reasons, Tally()
        item_crawls, self.item_crawls = self.item_crawls, set()
        scrapy_stats = self._scrapy_stats(feed)

        def register() -> None:  # a thread: the reactor never waits for Redis
            if self.redis is None:
                self.redis = redis_client(self.settings, socket_timeout=10)
            endpoint.register(self.redis, ttl=int(REGISTER_EVERY * 3))
            pipe = self.redis.pipeline(transaction=False)
            if feed is not None:  # the fleet view's CPU, memory, pages and items, beside the worker's description
                pipe.hset(keys.worker(feed.info.job), mapping={
                    **usage, "pages": int(self.pages), "items": int(self.items), "metrics": endpoint.url})
            for (site, status), count in statuses.items():  # the Sites page's status breakdown per site
                pipe.hincrby(keys.site_statuses(site), status, count)
            for (crawlid, reason), count in reasons.items():  # the crawl page's reasons
                pipe.hincrby(keys.crawl_reasons(crawlid), reason, count)
                pipe.expire(keys.crawl_reasons(crawlid), self.settings.crawl_ttl)
            if feed is not None and item_crawls:  # where the manager's /items/ of this job looks
                pipe.sadd(keys.worker_crawls(feed.info.job), *sorted(item_crawls))
                pipe.expire(keys.worker_crawls(feed.info.job), self.settings.crawl_ttl)
            if scrapy_stats is not None:
                self._write_scrapy_stats(scrapy_stats, pipe)
            pipe.execute()

        d = threads.deferToThread(register)
        d.addErrback(lambda f: logger.warning("could not register the metrics endpoint: %s", f.getErrorMessage()))
        return d

    def _scrapy_stats(self, feed: Any) -> tuple[str, str, str] | None:
        """(crawl, job, its Scrapy stats as JSON) of a worker that serves one crawl, else None. At the end the feed is
        gone with the engine's scheduler: the crawl and job it had are remembered."""
        crawlid = getattr(getattr(feed, "info", None), "crawlid", "")
        if crawlid:
            self._serves = (crawlid, feed.info.job)
        if self._serves is None or self.crawler.stats is None:
            return None
        stats = json.dumps(self.crawler.stats.get_stats(), default=str, sort_keys=True)
        return *self._serves, stats

    def _write_scrapy_stats(self, scrapy_stats: tuple[str, str, str], pipe: Any = None) -> None:
        crawlid, job, stats = scrapy_stats
        if self.redis is None:
            self.redis = redis_client(self.settings, socket_timeout=10)
        target = pipe if pipe is not None else self.redis.pipeline(transaction=False)
        target.hset(keys.crawl_scrapy_stats(crawlid), job, stats)
        target.expire(keys.crawl_scrapy_stats(crawlid), self.settings.crawl_ttl)
        if pipe is None:
            target.execute()

    # --- what happened --------------------------------------------------------------------------------------------
    def response_received(self, response: Any, request: Any, spider: Any) -> None:
        spider_type = str(request.meta.get("spider_type") or getattr(spider, "spider_type", spider.name))
        RESPONSES.labels(spider_type, str(response.status)).inc()
        self.pages += 1
        SITE_HITS.labels(self._site(response.url)).inc()
        try:  # per queue key (the Sites page's rows: a domain, a host or an address, as the crawl is partitioned)
            self.site_statuses[(site_of(request), str(response.status))] += 1
        except ValueError:
            pass
        if response.status >= 400:
            self._reason(request, f"HTTP {response.status}")

    def item_dropped(self, item: Any, response: Any, exception: BaseException, spider: Any) -> None:
        self._reason(getattr(response, "request", None), f"dropped: {type(exception).__name__}")

    def spider_error(self, failure: Any, response: Any, spider: Any) -> None:
        self._reason(getattr(response, "request", None), f"spider error: {failure.type.__name__}")

    def _reason(self, request: Any, reason: str) -> None:
        task = request.meta.get("task") if request is not None else None
        crawlid = getattr(task, "crawlid", None)
        if crawlid:
            self.crawl_reasons[(crawlid, reason)] += 1

    def item_scraped(self, item: Any, response: Any, spider: Any) -> None:
        ITEMS.inc()
        self.items += 1
        crawlid = item.get("crawlid") if hasattr(item, "get") else None
        crawlid = crawlid or meta_of(response).get("crawlid")  # one's own spider's items carry no crawl id
        if crawlid:
            self.item_crawls.add(str(crawlid))

    def _site(self, url: str) -> str:
        try:
            site = domain_of(url)
        except ValueError:
            return OTHER
        if site in self.sites:
            return site
        if len(self.sites) >= SITES_TRACKED:  # bounded: a broad crawl must not make a series per site forever
            return OTHER
        self.sites.add(site)
        return site

    def _feed(self) -> Any:
        return feed_of(self.crawler)


def feed_of(crawler: Any) -> Any:
    """The running worker's feed (:class:`spiders.worker.feed.TaskFeed`, ``FleetScheduler.worker``, through Scrapy's
    ``engine.scheduler``), or None before its scheduler opened."""
    scheduler = getattr(getattr(crawler, "engine", None), "scheduler", None)
    return getattr(getattr(scheduler, "worker", None), "feed", None)
