"""The worker's factory: :func:`build_worker` makes every object a Scrapy worker runs, once.

Scrapy's own scheduler builds its parts in ``Scheduler.from_crawler`` (the dupefilter from ``DUPEFILTER_CLASS``);
the fleet's worker also connects to Redis and ZooKeeper and registers its job, which blocks, so
:class:`~spiders.worker.scheduler.FleetScheduler` calls :func:`build_worker` on a thread when the spider opens, and
starts the :class:`Worker` it returns on the reactor (:meth:`Worker.start`). What it makes, in order:

- the settings (:func:`spiders.fleet_settings.crawlfleet_settings`);
- the dupefilter, loaded from ``DUPEFILTER_CLASS`` as Scrapy loads it (``spiders.dupefilter.BloomDupeFilter``
  through the fleet's add-on), twice: for the commits, and on a connection of its own for the redirect checks. A
  class without the batch interface the commits need stops the worker here, before it connects anywhere else, with
  the reason (:func:`spiders.dupefilter.require_batch_interface`);
- the job id and the host identity;
- Redis clients: the feed's, and connections of their own for the heartbeats (never held up by a long walk) and
  the block listener (it waits on its channels: blocks, and the crawls' pauses and resumes);
- ZooKeeper and the site configuration it watches (:class:`frontier.config_watch.SiteConfigWatch`);
- robots.txt, when obeyed: the cluster's cache, fetched through Scrapy (:class:`spiders.worker.robots.RobotsFetcher`);
- the politeness rules and the frontier's client (:class:`frontier.client.FrontierClient`), the crawl catalog, the
  committer (with the crawls' failures lists in MongoDB, :class:`messaging.failures.FailureStore`);
- the feed (:class:`spiders.worker.feed.TaskFeed`: take, leases, heartbeat, commits), registered; the block
  listener; the task tracker.

A worker of one's own Scrapy spider (issue 35, :mod:`spiders.worker.own`) also joins its crawl before it registers
(its spider type ``<project>.<spider>``, the crawl id in its registration), and gets the
:class:`~spiders.worker.own.Traveller` of its requests and the start claim of its crawl
(:class:`~spiders.worker.start.StartOnce`); its tracker settles items when the fleet's store has them.

One clock (:class:`messaging.clock.Clock`) goes to the feed, the block listener and the scheduler's send gate: slots,
blocks and waits are all on it.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from scrapy import signals
from scrapy.utils.misc import build_from_crawler, load_object

from frontier.adaptive import AdaptiveDelay, AdaptiveRule
from frontier.blocks import BlockListener
from frontier.client import FrontierClient
from frontier.config_watch import SiteConfigWatch
from frontier.politeness import STATS_MODULE as POLITENESS_STATS
from frontier.politeness import Politeness
from frontier.registry import WorkerInfo, WorkerRegistry
from frontier.robots_rules import MAX_REDIRECTS, product_token
from messaging import clients
from messaging.clock import Clock
from messaging.failures import FailureStore
from messaging.identity import worker_ip
from messaging.outage import quiet_reconnects
from messaging.settings import Settings
from messaging.siteconfig import SitePaths
from messaging.stats import BufferedStats, Stats
from spiders.dupefilter import BatchDupeFilter, require_batch_interface
from spiders.fleet_settings import crawlfleet_settings
from spiders.signals import item_stored
from spiders.worker.commit import Committer
from spiders.worker.crawls import CrawlCatalog
from spiders.worker.feed import FeedConfig, FeedListener, TaskFeed
from spiders.worker.output import TaskOutputMiddleware
from spiders.worker.own import Traveller, join_crawl, project_of, runs_rules, spider_type_of
from spiders.worker.robots import RobotsFetcher
from spiders.worker.start import StartClaim, StartOnce
from spiders.worker.tracker import TaskTracker

logger = logging.getLogger(__name__)
PROXY_POOL_WAIT = 30.0  # seconds a worker that crawls through proxies waits for the pool's first read


def default_job_id(spider_type: str) -> str:
    """A job id never used before (a retired id stays fenced): host, spider type, pid and a random tail."""
    return f"{socket.gethostname()}-{spider_type}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class WorkerListener(FeedListener, Protocol):
    """What the worker's threads tell the scheduler: the feed's events, and every worker's blocks."""

    def domain_blocked(self, domain: str, until: float) -> None:
        """No request of ``domain`` may leave before ``until`` (the worker's clock); from the listener's thread."""


@dataclass
class Worker:
    """Everything a worker runs, made once by :func:`build_worker`."""

    settings: Settings
    frontier: FrontierClient  # this job's client of the frontier (its rules: frontier.politeness)
    catalog: CrawlCatalog  # the crawls' rules and states, read once per crawl
    dupefilter: BatchDupeFilter  # DUPEFILTER_CLASS: the commits' children
    redirects: BatchDupeFilter  # the same class on a connection of its own: where redirects end (thread pool)
    feed: TaskFeed
    tracker: TaskTracker
    blocks: BlockListener
    robots: RobotsFetcher | None  # None when robots.txt is not obeyed
    counters: BufferedStats  # the politeness outcomes, flushed by a thread
    zk: Any
    mongo: Any = None  # the commits' client of the failures lists
    traveller: Traveller | None = None  # one's own spider's: its requests as tasks of its crawl
    starts: StartOnce | None = None  # one's own spider's: its crawl's start requests, once per crawl

    @property
    def info(self) -> WorkerInfo:
        return self.feed.info

    def start(self, crawler: Any) -> None:
        """On the reactor: the tracker hears of stored items, robots.txt downloads run, the feed starts taking."""
        self.tracker.connect(crawler.signals)
        if self.robots is not None:
            self.robots.start(on_stored=self.feed.robots_stored)
        self.feed.start()

    def stop(self, reason: str = "") -> None:
        """Off the reactor: commit what is finished, leave the registry, close the connections."""
        self.feed.stop()
        self.blocks.stop()
        self.counters.close()
        starts = [self.starts.committer.dupefilter] if self.starts is not None else []
        for dupefilter in (self.dupefilter, self.redirects, *starts):
            close = getattr(dupefilter, "close", None)
            if close is not None:
                close(reason)
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:  # closing a client whose server may be gone
            pass
        if self.mongo is not None:
            self.mongo.close()


def build_worker(crawler: Any, listener: WorkerListener, clock: Clock) -> Worker:
    """Make the worker of ``crawler``'s spider (blocking: call it off the reactor); its threads tell ``listener``."""
    s = crawlfleet_settings(crawler.settings)
    dupefilter, redirects = _dupefilter(crawler), _dupefilter(crawler)  # a class that cannot serve stops us first
    quiet_reconnects()  # kazoo's and kafka's reconnection warnings: once per outage, not once per attempt
    redis = clients.redis_client(s)
    spider = crawler.spider
    spider_type = spider_type_of(spider, crawler.settings, s)
    catalog = CrawlCatalog(redis, s.crawl_refresh)
    crawl = None if runs_rules(spider) else join_crawl(redis, catalog, s, spider_type,
                                                       project_of(crawler.settings, s), spider.name)
    job = crawler.settings.get("CRAWLFLEET_JOB") or getattr(spider, "job", None) or default_job_id(spider_type)
    zk = clients.zk_client(s)
    rates = SiteConfigWatch(zk, SitePaths(s.zk_root)).start()
    token = product_token(s.robotstxt_user_agent)  # a bad value stops the worker here, with the reason
    robots = _robots(crawler, s, redis, clock)
    counters = BufferedStats(Stats(redis, POLITENESS_STATS))  # robots_disallowed and the other outcomes
    politeness = Politeness(rates, robots.cache if robots is not None else None, token, horizon=s.pace_horizon,
                            slack=s.pace_slack, slack_share=s.pace_slack_share, stats=counters)
    frontier = FrontierClient(redis, job, spider_type, worker_ip(s), politeness, lease_seconds=s.lease_seconds)
    info = WorkerInfo(job, spider_type, worker_ip(s), s.node_name or socket.gethostname(), os.getpid(),
                      crawlid=crawl.crawlid if crawl is not None else "")
    mongo = clients.mongo_client(s, serverSelectionTimeoutMS=5000)  # the failures lists (messaging.failures)
    committer = Committer(redis, frontier, dupefilter, catalog, FailureStore(mongo[s.mongo_db]), s.failures_max)
    feed = TaskFeed(info, frontier, WorkerRegistry(redis), catalog, committer, FeedConfig.from_settings(s), listener,
                    clock=clock, proxies=_proxies(crawler, s, spider_type),
                    adaptive=AdaptiveDelay(redis, AdaptiveRule(s.adaptive_target_concurrency, s.adaptive_max_delay)),
                    beats=WorkerRegistry(clients.redis_client(s)))  # heartbeats: a connection of their own
    feed.register()
    if robots is not None:  # a robots.txt download is a hit: reserved on the feed thread in the pass that claims it
        robots.reserve_now, robots.horizon = feed.reserve_now, s.pace_horizon
    blocks = BlockListener(clients.redis_client(s), listener.domain_blocked, clock=clock.now,  # its own connection:
                           name=f"blocks-{job}", on_crawl_state=feed.crawl_changed).start()  # it waits on channels
    traveller = starts = None
    if crawl is not None:
        traveller = Traveller(spider, crawler.request_fingerprinter, crawl, s.request_max_bytes, crawler.stats)
        # its pushes run in the reactor's thread pool: a dupefilter (and connection) of their own
        starts = StartOnce(StartClaim(redis, crawl.crawlid, job), traveller,
                           Committer(redis, frontier, _dupefilter(crawler), catalog))
        logger.info("serving crawl %s of %s", crawl.crawlid, spider_type)
    tracker = TaskTracker(spider, catalog, politeness.admits, feed.finish, crawler.stats, traveller=traveller,
                          settle_signal=item_stored if _stores_items(crawler) else signals.item_scraped,
                          outputs=lambda: _output_middleware(crawler))
    return Worker(s, frontier, catalog, dupefilter, redirects, feed, tracker, blocks, robots, counters, zk, mongo,
                  traveller, starts)


def _stores_items(crawler: Any) -> bool:
    """Whether the fleet's store of one's own spider's items runs (its tracker then settles items when stored)."""
    from spiders.pipelines.own_items import OwnItemStore

    extensions = getattr(getattr(crawler, "extensions", None), "middlewares", ())
    return any(isinstance(extension, OwnItemStore) for extension in extensions)


def _output_middleware(crawler: Any) -> Any:
    """The crawler's :class:`~spiders.worker.output.TaskOutputMiddleware` (an errback's output goes through it)."""
    spidermw = getattr(getattr(getattr(crawler, "engine", None), "scraper", None), "spidermw", None)
    return next((mw for mw in getattr(spidermw, "middlewares", ()) if isinstance(mw, TaskOutputMiddleware)), None)


def _robots(crawler: Any, s: Settings, redis: Any, clock: Clock) -> RobotsFetcher | None:
    """The cluster's robots.txt cache, fetched through Scrapy, when robots.txt is obeyed (CRAWLFLEET_ROBOTSTXT_OBEY);
    a claim lasts as long as a fetch may (a download timeout per redirect hop)."""
    if not s.robotstxt_obey:
        return None
    fetch_seconds = (MAX_REDIRECTS + 1) * crawler.settings.getfloat("DOWNLOAD_TIMEOUT") + s.robots_lock_seconds
    return RobotsFetcher(crawler, redis, clock, ttl=s.robots_ttl, error_ttl=s.robots_error_ttl,
                         lock_seconds=s.robots_lock_seconds, outage_limit=s.robots_outage_limit,
                         fetch_seconds=fetch_seconds)


def _dupefilter(crawler: Any) -> BatchDupeFilter:
    """The ``DUPEFILTER_CLASS`` dupefilter, built as Scrapy's ``Scheduler.from_crawler`` builds it, and opened."""
    path = crawler.settings["DUPEFILTER_CLASS"]
    dupefilter = require_batch_interface(build_from_crawler(load_object(path), crawler), str(path))
    opened = getattr(dupefilter, "open", None)
    if opened is not None:
        opened()
    return dupefilter


def _proxies(crawler: Any, s: Settings, spider_type: str) -> Any:
    """The proxy chooser when this spider type crawls through the pool (CRAWLFLEET_PROXY_SPIDER_TYPES)."""
    wanted = {name.strip() for name in s.proxy_spider_types.split(",") if name.strip()}
    if spider_type not in wanted:
        return None
    from spiders.proxies import shared_chooser

    chooser = shared_chooser(crawler)
    if not chooser.pool.wait_loaded(PROXY_POOL_WAIT):
        logger.warning("the proxy pool was not read within %.0f s: requests go direct until it is", PROXY_POOL_WAIT)
    return chooser
