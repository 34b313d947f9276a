"""``crawlfleet master``: the long-running master process (seed 4.2.1.3's ``Dispatcher.run``).

Every master contends in the ZooKeeper election (``master.election``); the standbys wait. The leader, with its epoch:

1. settles batches that an earlier leader left half-moved (``master.staging``) and finishes requeues that an earlier
   leader left half-done (``master.requeue``);
2. then loops until it must step down: detects leaves (heartbeat older than CRAWLFLEET_HEARTBEAT_TTL by the Redis
   clock: retire the job, put its queues and leases back into ``seeds``) and runs a dispatch round
   (``master.dispatcher``). When a round moved nothing it waits CRAWLFLEET_DISPATCH_INTERVAL.
3. meanwhile its *reporting thread*, every CRAWLFLEET_FINISH_INTERVAL, checks for finished crawls
   (``master.finisher``, events to the outbound topic) and produces dead letters (tasks the dispatcher could not
   place, ``master.staging``) to the failed topic — off the dispatch path, so that neither Kafka's latency nor the
   finisher's sweep of ``seeds`` delays a round or a failover.

SIGTERM/SIGINT: the current step completes (a batch is always settled before the loop looks at the flag), the
election node is released, and the process exits, so a standby takes over at once.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from frontier.registry import WorkerRegistry, WorkerState
from frontier.weights import minute_of
from master.dispatcher import DispatchConfig, Dispatcher
from master.election import Leadership
from master.finisher import Finisher
from master.requeue import Requeuer
from master.staging import LeadershipLost, send_dead_letters
from messaging import clients, modules
from messaging.clock import RedisClock
from messaging.identity import node_name
from messaging.settings import Settings
from messaging.siteconfig import SitePaths
from messaging.stats import Stats

logger = logging.getLogger(__name__)
STATS_MODULE = modules.MASTER
LEAVE_CHECK_SECONDS = 1.0
REPORTER_JOIN_SECONDS = 35.0  # a send waits at most 30 s for Kafka


class MasterService:
    def __init__(self, settings: Settings, identifier: str | None = None) -> None:
        self.settings = settings
        self.identifier = identifier or f"{node_name(settings)}:{os.getpid()}"
        self.redis = clients.redis_client(settings)
        self.zk = clients.zk_client(settings)
        self.clock = RedisClock(self.redis)
        self.registry = WorkerRegistry(self.redis)
        self.leadership = Leadership(self.zk, self.redis, SitePaths(settings.zk_root).election, self.identifier)
        self._producer: Any = None
        self._producer_lock = threading.Lock()
        self.stats = Stats(self.redis, STATS_MODULE)
        self._slow: set[str] = set()  # workers last seen slow (logged when that changes)

    def run(self) -> None:
        """Contend for the leadership and lead when elected, until :meth:`stop` (the caller closes)."""
        logger.info("master %s standing by for the election", self.identifier)
        self.leadership.run(self._lead)

    def stop(self) -> None:
        self.leadership.stop()

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close(timeout=5)
        self.zk.stop()
        self.zk.close()
        self.redis.close()

    # --- the leader's loop ----------------------------------------------------------------------------------------
    def _lead(self, epoch: int, lost: threading.Event) -> None:
        settings = self.settings
        dispatcher = Dispatcher(self.redis, epoch, DispatchConfig.from_settings(settings), self.registry,
                                self.stats)
        requeuer = Requeuer(self.redis, epoch)
        finisher = Finisher(self.redis, self._send, settings.crawl_ttl)
        done = threading.Event()
        reporter = threading.Thread(target=self._report, args=(finisher, done), name="master-reporter", daemon=True)
        try:
            landed, returned = dispatcher.staging.recover(minute_of(self.clock.now()))
            if landed or returned:
                logger.info("settled an earlier leader's batches: %d tasks had landed, %d back in seeds",
                            landed, returned)
            for job in requeuer.pending_jobs(self.registry.retired()):
                requeuer.requeue(job)
                self.registry.forget(job, self.clock.now())
            reporter.start()
            next_leaves = 0.0
            while not lost.is_set() and not self.leadership.stopping.is_set():
                now = self.clock.now()
                if now >= next_leaves:
                    self._leaves(requeuer, now)
                    next_leaves = now + LEAVE_CHECK_SECONDS
                result = dispatcher.round(now)
                if result.total:
                    logger.debug("dispatched %s", result.placed)
                else:
                    lost.wait(settings.dispatch_interval)
        except LeadershipLost as exc:
            logger.warning("a newer leader exists: %s", exc)
        finally:
            done.set()
            if reporter.is_alive():
                reporter.join(timeout=REPORTER_JOIN_SECONDS)

    def _report(self, finisher: Finisher, done: threading.Event) -> None:
        """The leader's second thread: finished crawls (``crawl_finished`` events) and dead letters go to Kafka here,
        so that neither a slow producer nor the finisher's sweep of ``seeds`` ever holds back a dispatch round."""
        failing = False
        while not done.is_set():
            try:
                finisher.check(self.clock.now())
                send_dead_letters(self.redis, self._send_failed)
                if failing:
                    logger.info("master: reporting finished crawls and dead letters works again")
                failing = False
            except Exception as exc:  # Redis or Kafka away: one line when it starts failing, the loop goes on
                if not failing:
                    logger.warning("master: cannot report finished crawls or dead letters (%s: %s); retrying",
                                   type(exc).__name__, exc)
                failing = True
            done.wait(self.settings.finish_interval)

    def _leaves(self, requeuer: Requeuer, now: float) -> None:
        """Retire the workers that are gone (no heartbeat within the TTL); a slow one (fresh heartbeat, its feed
        thread behind) is only logged when it becomes slow and when it recovers."""
        ttl = self.settings.heartbeat_ttl
        health = self.registry.health(now, ttl, self.settings.worker_slow_after)
        slow = {job for job, h in health.items() if h.state == WorkerState.SLOW}
        for job in sorted(slow - self._slow):
            logger.warning("worker %s is slow: heartbeats on time, but its feed made no pass for %.0fs", job,
                           health[job].lag or 0.0)
            self.stats.incr("worker_slow")
        for job in sorted(self._slow - slow):
            if job in health and health[job].state == WorkerState.OK:
                logger.info("worker %s has caught up", job)
        self._slow = slow
        for job in sorted(job for job, h in health.items() if h.state == WorkerState.GONE):
            if self.registry.retire(job, now - ttl, now):
                logger.warning("worker %s left (no heartbeat for %.0fs): retired, requeueing its tasks", job, ttl)
                moved = requeuer.requeue(job)
                self.registry.forget(job, now)
                self.stats.incr("worker_left")
                self.stats.incr("requeued", moved)

    def _send(self, event: dict[str, Any]) -> None:
        producer = self._kafka()
        producer.send(self.settings.topic_outbound, event, key=event["crawlid"]).get(timeout=30)
        producer.flush(timeout=30)

    def _send_failed(self, records: list[dict[str, Any]]) -> None:
        """Dead letters to the failed topic (keyed by crawl), acknowledged before this returns."""
        producer = self._kafka()
        futures = [producer.send(self.settings.topic_failed, record, key=record.get("crawlid") or None)
                   for record in records]
        producer.flush(timeout=30)
        for future in futures:
            future.get(timeout=30)

    def _kafka(self) -> Any:
        with self._producer_lock:
            if self._producer is None:
                self._producer = clients.kafka_producer(self.settings)
            return self._producer

