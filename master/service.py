"""``crawlfleet master``: the long-running master process (seed 4.2.1.3's ``Dispatcher.run``).

Every master contends in the ZooKeeper election (``master.election``); the standbys wait. The leader, with its epoch:

1. settles batches that an earlier leader left half-moved (``master.staging``) and finishes requeues that an earlier
   leader left half-done (``master.requeue``);
2. then loops until it must step down: detects leaves (heartbeat older than CRAWLFLEET_HEARTBEAT_TTL by the Redis
   clock: retire the job, put its queues and leases back into ``seeds``) and runs a dispatch round
   (``master.dispatcher``). When a round moved nothing it waits CRAWLFLEET_DISPATCH_INTERVAL.
   Every CRAWLFLEET_SCHEDULE_INTERVAL it also fires the schedules' due times (``master.schedules``), each a new
   crawl, fenced by its epoch.
3. meanwhile its *reporting thread*, every CRAWLFLEET_FINISH_INTERVAL, checks for finished crawls
   (``master.finisher``, events to the outbound topic) and produces dead letters (tasks the dispatcher could not
   place, ``master.staging``) to the failed topic — off the dispatch path, so that neither Kafka's latency nor the
   finisher's sweep of ``seeds`` delays a round or a failover;
4. and its *notifier thread* (``master.notifier``) looks for stalled crawls and posts crawl events to their
   receivers (webhooks), each attempt with a timeout, so a slow receiver holds back nothing but notifications.

Probes (``messaging.health``): live while the leader's loop turns (a standby's rests); ready while Redis answers
and this master is in the election, leading or standing by, on a connected ZooKeeper session.

SIGTERM/SIGINT: the current step completes (a batch is always settled before the loop looks at the flag), the
election node is released, and the process exits, so a standby takes over at once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from typing import Any

from redis.exceptions import RedisError

from frontier.config_watch import SiteConfigWatch
from frontier.registry import WorkerRegistry, WorkerState
from frontier.weights import minute_of
from master.dispatcher import DispatchConfig, Dispatcher
from master.election import Leadership
from master.finisher import Finisher
from master.notifier import Notifier
from master.requeue import Requeuer
from master.revisits import RevisitMover
from master.schedules import ScheduleFirer
from master.staging import LeadershipLost, send_dead_letters
from messaging import clients, modules
from messaging.clock import RedisClock
from messaging.delivery import Delivery, Record
from messaging.health import Beat, Health
from messaging.hostmap import AddressCache, load_hostmap
from messaging.identity import node_name
from messaging.outage import OutageLog
from messaging.settings import Settings
from messaging.siteconfig import SitePaths
from messaging.stats import EVENTS, Stats

logger = logging.getLogger(__name__)
STATS_MODULE = modules.MASTER
LEAVE_CHECK_SECONDS = 1.0
LEFT_WINDOW_SECONDS = 300.0  # a job that left (retired itself) this recently is checked for tasks to hand back
SEND_SECONDS = 30.0  # a send waits this long for Kafka's acknowledgement (then the next check waits again)
REPORTER_JOIN_SECONDS = SEND_SECONDS + 5
ALERTED_EVENTS = ("worker_left", "dead_letters")  # deploy/monitoring/alerts.yml reads their counters


class MasterService:
    def __init__(self, settings: Settings, identifier: str | None = None) -> None:
        self.settings = settings
        self.identifier = identifier or f"{node_name(settings)}:{os.getpid()}"
        self.redis = clients.redis_client(settings)
        self.zk = clients.zk_client(settings)
        self.clock = RedisClock(self.redis)
        self.registry = WorkerRegistry(self.redis)
        self.leadership = Leadership(self.zk, self.redis, SitePaths(settings.zk_root).election, self.identifier)
        self.delivery = Delivery(settings, self.redis)  # outbound records once each (messaging.delivery)
        self.stats = Stats(self.redis, STATS_MODULE)
        for plugin in ALERTED_EVENTS:  # a series from 0, so that the alert rules' increase() sees the first one
            EVENTS.labels(STATS_MODULE, plugin)
        self.dispatch_outage = OutageLog(logger, "master: dispatch rounds (Redis)")
        self._grace_until = float("-inf")  # no worker is retired before this (Redis clock): see _leaves
        self.report_outage = OutageLog(logger, "master: reporting finished crawls and dead letters (Redis or Kafka)")
        self._slow: set[str] = set()  # workers last seen slow (logged when that changes)
        self.notifier = Notifier(self.redis, settings, self.clock)
        self.dispatch_beat = Beat()  # the leader's loop turns; rests while this master stands by
        self.sites: SiteConfigWatch | None = None
        self.addresses = AddressCache(load_hostmap(settings))  # crawls partitioned by IP (master.placement)

    def health_checks(self, health: Health) -> None:
        health.beat("dispatch", self.dispatch_beat)
        health.ready("election", self.leadership.standing)

    def run(self) -> None:
        """Contend for the leadership and lead when elected, until :meth:`stop` (the caller closes)."""
        logger.info("master %s standing by for the election", self.identifier)
        self.leadership.run(self._lead)

    def stop(self) -> None:
        self.leadership.stop()

    def close(self) -> None:
        self.delivery.close(timeout=5)
        self.zk.stop()
        self.zk.close()
        self.redis.close()

    # --- the leader's loop ----------------------------------------------------------------------------------------
    def _lead(self, epoch: int, lost: threading.Event) -> None:
        settings = self.settings
        if self.sites is None:  # the rates the workers apply: each site's share of their queues follows them
            self.sites = SiteConfigWatch(self.zk, SitePaths(settings.zk_root)).start()
        dispatcher = Dispatcher(self.redis, epoch, DispatchConfig.from_settings(settings), self.registry,
                                self.stats, sites=self.sites, addresses=self.addresses)
        requeuer = Requeuer(self.redis, epoch)
        revisits = RevisitMover(self.redis, epoch, settings.revisit_batch)
        schedules = ScheduleFirer(self.redis, epoch, settings)
        done = threading.Event()
        reporter = threading.Thread(target=self._report, args=(done,), name="master-reporter", daemon=True)
        notifier = threading.Thread(target=self.notifier.run, args=(done,), name="master-notifier", daemon=True)
        try:
            self._settle_earlier(dispatcher, requeuer)
            reporter.start()
            notifier.start()
            next_leaves = next_revisits = next_schedules = 0.0
            if self._redis_was_away():
                # no heartbeat could be written while Redis was away: give the workers one TTL to write again
                next_leaves = self.clock.now() + settings.heartbeat_ttl
                logger.info("Redis or ZooKeeper was away until just now: retiring no worker for %.0fs",
                            settings.heartbeat_ttl)
            while not lost.is_set() and not self.leadership.stopping.is_set():
                self.dispatch_beat.tick()
                try:
                    now = self.clock.now()
                    if now >= next_leaves:
                        self._leaves(requeuer, now)
                        next_leaves = now + LEAVE_CHECK_SECONDS
                    if now >= next_revisits:
                        revisits.round(now)
                        next_revisits = now + settings.revisit_interval
                    if now >= next_schedules:
                        schedules.round(now)
                        next_schedules = now + settings.schedule_interval
                    result = dispatcher.round(now)
                except RedisError as exc:
                    # Redis away: say so once and step down; the election takes a new epoch once Redis answers, and
                    # the leader of that epoch settles what the outage cut short (a batch half-moved)
                    self.dispatch_outage.failed(exc)
                    raise
                self.dispatch_outage.ok()
                if result.total:
                    logger.debug("dispatched %s", result.placed)
                else:
                    lost.wait(settings.dispatch_interval)
        except LeadershipLost as exc:
            logger.warning("a newer leader exists: %s", exc)
        finally:
            self.dispatch_beat.rest()
            done.set()
            if reporter.is_alive():
                reporter.join(timeout=REPORTER_JOIN_SECONDS)
            if notifier.is_alive():  # at most one delivery attempt in flight
                notifier.join(timeout=2 * settings.notify_timeout + 5)
            # what the producer still holds is not this leader's to deliver any more: its successor reads the notes
            self.delivery.abandon()

    def _redis_was_away(self) -> bool:
        """Whether this master saw Redis (or ZooKeeper, for its election) fail within the last heartbeat TTL."""
        now = time.monotonic()
        ended = [log.ended_at for log in (self.leadership.outage, self.dispatch_outage) if log.ended_at is not None]
        return self.leadership.outage.down or any(now - at < self.settings.heartbeat_ttl for at in ended)

    def _settle_earlier(self, dispatcher: Dispatcher, requeuer: Requeuer) -> None:
        """Batches left half-moved and requeues left half-done (by an earlier leader, or by a Redis outage)."""
        landed, returned = dispatcher.staging.recover(minute_of(self.clock.now()))
        if landed or returned:
            logger.info("settled batches left half-moved: %d tasks had landed, %d back in seeds", landed, returned)
        for job in requeuer.pending_jobs(self.registry.retired()):
            requeuer.requeue(job)
            self.registry.forget(job, self.clock.now())

    def _report(self, done: threading.Event) -> None:
        """The leader's second thread: finished crawls (``crawl_finished`` events) and dead letters go to Kafka here,
        so that neither a slow producer nor the finisher's sweep of ``seeds`` ever holds back a dispatch round."""
        finisher = self._finisher()
        while not done.is_set():
            try:
                finisher.check(self.clock.now())
                send_dead_letters(self.redis, self._send_failed)
            except Exception as exc:  # Redis or Kafka away: one line when it starts failing, the loop goes on
                self.report_outage.failed(exc)
            else:
                if self.report_outage.ok() is not None:
                    # a verification sweep begun before the outage read a seeds that a Redis restart may have
                    # rebuilt (its ZSCAN cursor means nothing now): the next one starts afresh
                    finisher = self._finisher()
            done.wait(self.settings.finish_interval)

    def _finisher(self) -> Finisher:
        return Finisher(self.redis, self._send, self.settings.crawl_ttl, on_finished=self.notifier.crawl_finished)

    def _leaves(self, requeuer: Requeuer, now: float) -> None:
        """Retire the workers that are gone (no heartbeat within the TTL); a slow one (fresh heartbeat, its feed
        thread behind) is only logged when it becomes slow and when it recovers."""
        self._left(requeuer, now)
        ttl = self.settings.heartbeat_ttl
        health = self.registry.health(now, ttl, self.settings.worker_slow_after)
        gone = sorted(job for job, h in health.items() if h.state == WorkerState.GONE)
        if gone and len(gone) == len(health) and now >= self._grace_until + ttl:
            # every worker silent at once: Redis could not take heartbeats (an outage), not every worker dead;
            # give them one TTL to write again (those that stay silent are retired then)
            self._grace_until = now + ttl
            logger.warning("every worker's heartbeat is older than %.0fs (Redis was away?): waiting %.0fs more "
                           "before retiring any", ttl, ttl)
        if now < self._grace_until:
            return
        slow = {job for job, h in health.items() if h.state == WorkerState.SLOW}
        for job in sorted(slow - self._slow):
            logger.warning("worker %s is slow: heartbeats on time, but its feed made no pass for %.0fs", job,
                           health[job].lag or 0.0)
            self.stats.incr("worker_slow")
        for job in sorted(self._slow - slow):
            if job in health and health[job].state == WorkerState.OK:
                logger.info("worker %s has caught up", job)
        self._slow = slow
        for job in gone:
            if self.registry.retire(job, now - ttl, now):
                logger.warning("worker %s left (no heartbeat for %.0fs): retired, requeueing its tasks", job, ttl)
                moved = requeuer.requeue(job)
                self.registry.forget(job, now)
                self.stats.incr("worker_left")
                self.stats.incr("requeued", moved)

    def _left(self, requeuer: Requeuer, now: float) -> None:
        """Workers that left cleanly (SIGTERM: the worker retires itself, ``WorkerRegistry.leave``): what they still
        held — queued and leased tasks — goes back into ``seeds`` now, not at the next election (a pod scaled down in
        the middle of a crawl would otherwise strand its tasks). A leader that was away longer than the window settles
        them when it leads again (:meth:`_settle_earlier`)."""
        for job in requeuer.pending_jobs(self.registry.retired_since(now - LEFT_WINDOW_SECONDS)):
            moved = requeuer.requeue(job)
            self.registry.forget(job, now)
            logger.info("worker %s left: %d tasks it held are back in seeds", job, moved)
            self.stats.incr("worker_left")
            self.stats.incr("requeued", moved)

    def _send(self, event: dict[str, Any]) -> None:
        """Produce one event and wait for Kafka's acknowledgement (DeliveryPending after 30 s: the producer keeps it,
        and the finisher's next attempt waits for that same send; messaging.delivery)."""
        self.delivery.send([Record(self.settings.topic_outbound, event, event["crawlid"], event["event_id"])],
                           timeout=SEND_SECONDS)

    def _send_failed(self, records: list[dict[str, Any]]) -> None:
        """Dead letters to the failed topic (keyed by crawl), acknowledged before this returns."""
        self.delivery.send([Record(self.settings.topic_failed, record, record.get("crawlid") or None,
                                   f"dead-letter:{_digest(record)}") for record in records], timeout=SEND_SECONDS)


def _digest(record: dict[str, Any]) -> str:
    return hashlib.sha1(json.dumps(record, sort_keys=True).encode()).hexdigest()
