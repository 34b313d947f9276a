"""A worker's ``/livez`` and ``/readyz`` (a Scrapy extension), on its metrics port (:mod:`messaging.health`).

Live while every loop that does the worker's work turns, each within CRAWLFLEET_LIVENESS_SECONDS:

- ``reactor``: a ``LoopingCall`` ticks every second (a callback that blocks the reactor stops it);
- ``feed``: the feed thread's last pass (:attr:`spiders.worker.feed.TaskFeed.last_pass`, the lag its heartbeats
  carry). A pass that failed because Redis is away still counts (the thread retries every second), so an outage
  never fails liveness; a wedged thread (a call that never returns, a deadlock) does;
- ``heartbeat``: the heartbeat thread's last beat, or attempt.

Ready while Redis answers (``redis``) and the job is registered (``registered``): its last heartbeat reached the
registry within CRAWLFLEET_HEARTBEAT_TTL and the master has not retired it.
"""

from __future__ import annotations

from typing import Any

from scrapy import signals
from twisted.internet import task

from messaging.health import HEALTH, Health, redis_answers
from spiders.fleet_settings import crawlfleet_settings
from spiders.metrics import feed_of

TICK_SECONDS = 1.0
CHECKS = ("reactor", "feed", "heartbeat", "redis", "registered")


class WorkerHealth:
    def __init__(self, crawler: Any, health: Health = HEALTH) -> None:
        self.crawler = crawler
        self.settings = crawlfleet_settings(crawler.settings)
        self.health = health
        self._loop: Any = None

    @classmethod
    def from_crawler(cls, crawler: Any) -> WorkerHealth:
        extension = cls(crawler)
        crawler.signals.connect(extension.engine_started, signal=signals.engine_started)
        crawler.signals.connect(extension.engine_stopped, signal=signals.engine_stopped)
        return extension

    def engine_started(self) -> None:
        health = self.health
        beat = health.beat("reactor")
        self._loop = task.LoopingCall(beat.tick)
        self._loop.start(TICK_SECONDS, now=True)
        health.age("feed", self._feed_age)
        health.age("heartbeat", self._heartbeat_age)
        health.ready("redis", redis_answers(self.settings))
        health.ready("registered", self._registered)

    def engine_stopped(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self.health.remove(*CHECKS)

    def _feed_age(self) -> float | None:
        feed = feed_of(self.crawler)
        if feed is None or not feed.heartbeat.running:  # not started yet, or stopped
            return None
        return feed.clock.now() - feed.last_pass

    def _heartbeat_age(self) -> float | None:
        feed = feed_of(self.crawler)
        heartbeat = getattr(feed, "heartbeat", None)
        if heartbeat is None or heartbeat.turned_at is None or not heartbeat.running:
            return None
        return heartbeat.clock() - heartbeat.turned_at

    def _registered(self) -> str | None:
        feed = feed_of(self.crawler)
        if feed is None:
            return "not registered yet"
        heartbeat = feed.heartbeat
        if heartbeat.fenced or feed.fenced:
            return "retired by the master"
        if heartbeat.registered_at is None:
            return "no heartbeat reached the registry yet"
        age = heartbeat.clock() - heartbeat.registered_at
        if age > self.settings.heartbeat_ttl:
            return f"no heartbeat reached the registry for {age:.0f}s"
        return None
