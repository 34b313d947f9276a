"""Heartbeats on their own thread (issue 30, item 4): a worker whose feed thread is stalled stays alive and shows
as slow; only a worker without heartbeats is gone. Real Redis, the worker's own feed and heartbeat code."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from deploy.procs import wait_for
from frontier.client import FrontierClient
from frontier.config_watch import StaticSiteConfig
from frontier.politeness import Politeness
from frontier.registry import WorkerInfo, WorkerRegistry, WorkerState, health_of
from messaging.clock import RedisClock
from messaging.siteconfig import Rate
from spiders.dupefilter import BloomDupeFilter
from spiders.worker.commit import Committer
from spiders.worker.crawls import CrawlCatalog
from spiders.worker.feed import FeedConfig, TaskFeed, Unheard

pytestmark = pytest.mark.integration

T0 = 1_700_000_040.0
TTL = 3.0  # the master's cut-off in this test
SLOW_AFTER = 1.0


class StallingCatalog(CrawlCatalog):
    """The feed thread re-reads known crawls on every pass: holding that call holds the whole feed loop (as a walk
    over thousands of domains or a slow commit would)."""

    def __init__(self, redis: Any) -> None:
        super().__init__(redis, refresh_seconds=0.05)
        self.stall = threading.Event()
        self.stalled = threading.Event()
        self.release = threading.Event()

    def refresh_known(self) -> None:
        if self.stall.is_set() and not self.release.is_set():
            self.stalled.set()
            self.release.wait(60)
        super().refresh_known()


def test_a_worker_with_a_stalled_feed_keeps_beating_shows_slow_and_is_not_retired(cf: Any) -> None:
    redis = cf.redis()
    job = "beat-job"
    frontier = FrontierClient(redis, job, "list", "10.0.0.1", Politeness(StaticSiteConfig(Rate(100, 60))))
    catalog = StallingCatalog(redis)
    committer = Committer(redis, frontier, BloomDupeFilter(redis, cf.settings), catalog)
    registry = WorkerRegistry(redis)
    feed = TaskFeed(WorkerInfo(job, "list", "10.0.0.1", "host", 1), frontier, registry, catalog, committer,
                    FeedConfig(heartbeat_interval=0.2, idle_backoff_max=0.1, crawl_refresh=0.05),
                    beats=WorkerRegistry(cf.redis()))
    feed.register()
    clock = RedisClock(redis)
    feed.start()
    try:
        wait_for(lambda: feed.heartbeat.beats >= 2, 10, "the first heartbeats")
        assert registry.health(clock.now(), TTL, SLOW_AFTER)[job].state == WorkerState.OK
        catalog.stall.set()
        wait_for(catalog.stalled.is_set, 10, "the feed thread to stall")
        stalled_at = clock.now()

        def stalled_past_the_ttl() -> bool:
            now = clock.now()
            health = registry.health(now, TTL, SLOW_AFTER)[job]
            # what the master does every second: retire only a heartbeat older than the TTL
            assert health.state != WorkerState.GONE, health
            assert not registry.retire(job, now - TTL, now), "a live worker with a stalled feed was retired"
            return now - stalled_at > 2 * TTL and health.state == WorkerState.SLOW

        wait_for(stalled_past_the_ttl, 30, "the feed stalled for twice the TTL", 0.1)
        assert registry.health(clock.now(), TTL, SLOW_AFTER)[job].lag > 2 * TTL - 1
        assert job in registry.live() and not feed.fenced
        catalog.release.set()
        wait_for(lambda: registry.health(clock.now(), TTL, SLOW_AFTER)[job].state == WorkerState.OK, 10,
                 "the worker to show ok again once its feed moves")
    finally:
        catalog.release.set()
        feed.stop(timeout=10)
    assert not feed.heartbeat.running
    assert registry.retired() == [job]  # it left on stop


class FenceListener(Unheard):
    """The scheduler's part: it hears of the fence."""

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def fenced(self) -> None:
        self.event.set()


def test_a_worker_retired_while_its_feed_is_stalled_is_stopped_by_its_heartbeat(cf: Any) -> None:
    redis = cf.redis()
    job = "fenced-job"
    frontier = FrontierClient(redis, job, "list", "10.0.0.1", Politeness(StaticSiteConfig(Rate(100, 60))))
    catalog = StallingCatalog(redis)
    fenced = threading.Event()
    feed = TaskFeed(WorkerInfo(job, "list", "10.0.0.1", "host", 1), frontier, WorkerRegistry(redis), catalog,
                    Committer(redis, frontier, BloomDupeFilter(redis, cf.settings), catalog),
                    FeedConfig(heartbeat_interval=0.1, idle_backoff_max=0.1, crawl_refresh=0.05), FenceListener(fenced))
    feed.register()
    catalog.stall.set()
    feed.start()
    try:
        wait_for(catalog.stalled.is_set, 10, "the feed thread to stall")
        assert WorkerRegistry(redis).retire(job)  # e.g. an operator, or a master with a shorter TTL
        wait_for(fenced.is_set, 10, "the heartbeat to notice the fence while the feed is stalled")
        assert feed.fenced and not feed.heartbeat.running
    finally:
        catalog.release.set()
        feed.stop(timeout=10)


def test_health_tells_ok_slow_and_gone_apart(cf: Any) -> None:
    registry = WorkerRegistry(cf.redis())
    for job in ("fast", "slow", "silent", "old"):
        registry.register(WorkerInfo(job, "list", "ip", "h", 1), now=T0)
    registry.heartbeat("fast", now=T0 + 10, lag=0.2)
    registry.heartbeat("slow", now=T0 + 10, lag=8.0)
    registry.heartbeat("silent", now=T0 + 10)  # an older worker that reports no lag
    health = registry.health(T0 + 12, ttl=15, slow_after=10)
    assert {job: h.state for job, h in health.items()} == {"fast": "ok", "slow": "slow", "silent": "ok",
                                                            "old": "ok"}
    assert health["slow"].lag == pytest.approx(10.0) and health["silent"].lag is None
    health = registry.health(T0 + 16, ttl=15, slow_after=10)
    assert health["old"].state == WorkerState.GONE and health["slow"].state == WorkerState.SLOW
    assert registry.expired(15, T0 + 16) == ["old"]  # the master retires only the gone one


def test_health_of_counts_the_lag_on_from_the_last_beat() -> None:
    assert health_of("j", beat=100, lag=1, now=105, ttl=15, slow_after=10).state == WorkerState.OK
    assert health_of("j", beat=100, lag=6, now=105, ttl=15, slow_after=10).state == WorkerState.SLOW
    assert health_of("j", beat=100, lag=0, now=116, ttl=15, slow_after=10).state == WorkerState.GONE
