"""The cluster as Prometheus gauges, read from Redis when scraped: what the master and the managers expose.

:class:`ClusterCollector` reads, at most once per ``cache_seconds`` however often it is scraped: the depth of
``seeds``, the ready count of each spider type (``readytasks:<spider_type>``, the tasks queued for its workers: what
an autoscaler scales a worker type on, e.g. KEDA's Prometheus trigger in deploy/k8s), workers and managers alive,
each worker's queued and leased tasks and heartbeat age (labels: ``worker``, its job id; spider type; host), the
latest crawls' pages and items (bounded: :data:`CRAWLS_EXPORTED`), and the crawler's lifetime response counters by
spider type and HTTP status (``stats:crawler:<type>:<status>:lifetime``), and why crawls make no progress (issue 40):
each worker whose item store refuses writes (``crawlfleet_store_refusing_writes_seconds`` by kind,
``crawlfleet_store_items_waiting``: ``messaging.storage``) and each stalled crawl
(``crawlfleet_crawl_stalled_seconds`` by reason: ``messaging.stalls``). A Redis that does not answer makes a scrape
report ``crawlfleet_cluster_up 0`` instead of failing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from frontier.client import FrontierReader
from frontier.registry import WorkerInfo, WorkerRegistry
from messaging import keys, modules, storage
from messaging.clients import RedisClient, as_text
from messaging.clock import RedisClock
from messaging.settings import default
from messaging.spider_types import NAMES as SPIDER_TYPES
from messaging.stalls import stalled_crawls
from messaging.tasks import CrawlFields

logger = logging.getLogger(__name__)
CRAWLS_EXPORTED = 50  # the latest crawls get a time series each; older ones are in MongoDB and the pages
# never ``job`` or ``instance``: Prometheus gives those to every target (the scrape job, the endpoint) and renames a
# metric's own label of that name ``exported_job``, so that ``by (job)`` would group by scrape job
WORKER_LABELS = ["worker", "spider_type", "host"]


class ClusterCollector:
    def __init__(self, redis: RedisClient, heartbeat_ttl: float, cache_seconds: float = 5.0,
                 clock: Callable[[], float] = time.monotonic,
                 stall_show_after: float = default("CRAWLFLEET_STALL_SHOW_AFTER")) -> None:
        self.redis = redis
        self.heartbeat_ttl = heartbeat_ttl
        self.stall_show_after = stall_show_after
        self.cache_seconds = cache_seconds
        self.clock = clock
        self._lock = threading.Lock()
        self._cached: tuple[float, list[Metric]] | None = None

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            if self._cached is None or self.clock() - self._cached[0] >= self.cache_seconds:
                self._cached = (self.clock(), self._read())
            yield from self._cached[1]

    def _read(self) -> list[Metric]:
        up = GaugeMetricFamily("crawlfleet_cluster_up", "1 when the cluster's Redis answered this scrape.")
        try:
            metrics = self._families()
        except Exception as exc:  # Redis away: say so, scrape the rest of the process
            logger.warning("cluster metrics unreadable: %s", exc)
            up.add_metric([], 0)
            return [up]
        up.add_metric([], 1)
        return [up, *metrics]

    def _families(self) -> list[Metric]:
        redis = self.redis
        now = RedisClock(redis).now()
        registry = WorkerRegistry(redis)
        live = registry.live()
        infos = registry.infos(live)
        depths = FrontierReader(redis).queue_depths(list(infos))
        seeds = GaugeMetricFamily("crawlfleet_seeds", "Tasks waiting in seeds for the dispatcher.")
        seeds.add_metric([], int(redis.zcard(keys.SEEDS)))
        alive = GaugeMetricFamily("crawlfleet_workers_alive",
                                  "Workers whose heartbeat is younger than CRAWLFLEET_HEARTBEAT_TTL.")
        alive.add_metric([], sum(1 for at in live.values() if now - at <= self.heartbeat_ttl))
        ready = GaugeMetricFamily("crawlfleet_ready_tasks", "Tasks queued for the workers of a spider type, not yet "
                                  "leased (readytasks:<spider_type>): the autoscalers' figure.", labels=["spider_type"])
        pipe = redis.pipeline(transaction=False)  # one key per type, each in its own slot of a cluster
        for spider_type in SPIDER_TYPES:
            pipe.get(keys.ready_tasks_type(spider_type))
        for spider_type, count in zip(SPIDER_TYPES, pipe.execute(), strict=True):
            ready.add_metric([spider_type], max(0, int(count or 0)))
        managers = GaugeMetricFamily("crawlfleet_managers_alive", "Managers in the registry.")
        managers.add_metric([], int(redis.zcard(keys.MANAGERS)))
        queued = GaugeMetricFamily("crawlfleet_worker_queued_tasks", "Tasks in a worker's domain queues.",
                                   labels=WORKER_LABELS)
        leased = GaugeMetricFamily("crawlfleet_worker_leased_tasks", "Tasks a worker holds leased.",
                                   labels=WORKER_LABELS)
        age = GaugeMetricFamily("crawlfleet_worker_heartbeat_age_seconds", "Seconds since a worker's heartbeat.",
                                labels=WORKER_LABELS)
        for job, info in sorted(infos.items()):
            labels = [job, info.spider_type, info.host]
            queued.add_metric(labels, depths[job][0])
            leased.add_metric(labels, depths[job][1])
            age.add_metric(labels, max(0.0, now - live.get(job, now)))
        return [seeds, ready, alive, managers, queued, leased, age, *self._stores(infos, now), self._stalled(),
                *self._crawls(), self._responses()]

    def _stores(self, infos: dict[str, WorkerInfo], now: float) -> list[Metric]:
        refusing = GaugeMetricFamily(
            "crawlfleet_store_refusing_writes_seconds", "Seconds a worker's item store has refused every write "
            "(present after a few seconds of it, while it lasts), by kind: unreachable, authentication, full, "
            "server_error.", labels=[*WORKER_LABELS, "store", "kind"])
        waiting = GaugeMetricFamily("crawlfleet_store_items_waiting", "Items a worker holds for an item store that "
                                    "refuses writes.", labels=[*WORKER_LABELS, "store"])
        for job, state in sorted(storage.read(self.redis, list(infos)).items()):
            labels = [job, infos[job].spider_type, infos[job].host, state.store]
            refusing.add_metric([*labels, state.kind], max(0.0, now - state.since))
            waiting.add_metric(labels, state.waiting)
        return [refusing, waiting]

    def _stalled(self) -> Metric:
        family = GaugeMetricFamily(
            "crawlfleet_crawl_stalled_seconds", "Seconds a running crawl has made no progress with work left (its "
            "item store refusing writes: since the first refused write), by reason: storage, no_worker, blocked, "
            "robots, backlog_full, paced, unknown; present once it is stalled (CRAWLFLEET_STALL_SHOW_AFTER).",
            labels=["crawlid", "reason"])
        for stall in stalled_crawls(self.redis, lambda domain: None, self.stall_show_after):
            family.add_metric([stall["crawlid"], stall["reason"]], round(stall["for"], 3))
        return family

    def _crawls(self) -> list[Metric]:
        ids = [as_text(c) for c in self.redis.smembers(keys.CRAWLS)]
        pipe = self.redis.pipeline(transaction=False)
        for crawlid in ids:
            pipe.hmget(keys.crawl(crawlid), CrawlFields.STATE, CrawlFields.PAGES, CrawlFields.ITEMS,
                       CrawlFields.CREATED)
        rows = []
        for crawlid, (state, pages, items, created) in zip(ids, pipe.execute() if ids else [], strict=True):
            rows.append((_number(created), crawlid, as_text(state or b"unknown"), _number(pages), _number(items)))
        rows.sort(reverse=True)
        pages_family = GaugeMetricFamily("crawlfleet_crawl_pages", "Pages fetched for a crawl (latest crawls).",
                                         labels=["crawlid", "state"])
        items_family = GaugeMetricFamily("crawlfleet_crawl_items", "Items stored for a crawl (latest crawls).",
                                         labels=["crawlid", "state"])
        running = GaugeMetricFamily("crawlfleet_crawls", "Known crawls by state.", labels=["state"])
        states: dict[str, int] = {}
        for row in rows:
            states[row[2]] = states.get(row[2], 0) + 1
        for _, crawlid, state, pages, items in rows[:CRAWLS_EXPORTED]:
            pages_family.add_metric([crawlid, state], pages)
            items_family.add_metric([crawlid, state], items)
        for state, count in sorted(states.items()):
            running.add_metric([state], count)
        return [pages_family, items_family, running]

    def _responses(self) -> Metric:
        family = CounterMetricFamily("crawlfleet_crawler_responses",
                                     "Responses of every worker since the counters began, by spider type and HTTP "
                                     "status (error: no response).", labels=["spider_type", "status"])
        for raw in self.redis.scan_iter(match=keys.stats_pattern(modules.CRAWLER), count=1000):
            parsed = keys.parse_stats_key(as_text(raw))
            spider_type, _, status = parsed.plugin.rpartition(":")
            if parsed.window == "lifetime" and spider_type and (status.isdigit() or status == "error"):
                family.add_metric([spider_type, status], int(self.redis.get(raw) or 0))
        return family


def _number(value: Any) -> float:
    try:
        return float(value) if value else 0.0
    except ValueError:
        return 0.0


def masters(zk: Any, election_path: str) -> list[str]:
    """The masters in the election, the leader first (the others stand by); empty when none runs."""
    try:
        return [str(name) for name in zk.Election(election_path).contenders()]
    except Exception as exc:  # ZooKeeper away or no election node yet
        logger.debug("election unreadable: %s", exc)
        return []


class LeaderCollector:
    """A master's own view: does it lead, and how many masters contend (the leader and its standbys)."""

    def __init__(self, zk: Any, election_path: str, identifier: str) -> None:
        self.zk = zk
        self.election_path = election_path
        self.identifier = identifier

    def collect(self) -> Iterator[Metric]:
        contenders = masters(self.zk, self.election_path)
        leader = GaugeMetricFamily("crawlfleet_master_leader", "1 while this master leads (dispatches), 0 while it "
                                   "stands by.", labels=["master"])
        leader.add_metric([self.identifier], 1 if contenders[:1] == [self.identifier] else 0)
        count = GaugeMetricFamily("crawlfleet_masters", "Masters in the election (the leader and its standbys).")
        count.add_metric([], len(contenders))
        yield leader
        yield count
