"""The leader's part of schedules: each due time of each schedule becomes one crawl, exactly once (messaging.schedules).

Every CRAWLFLEET_SCHEDULE_INTERVAL the leading master (``master.service``) reads the schedules and, for each active
one, the due times after its ``after`` mark up to now (Redis clock):

1. a firing that an earlier leader began and did not record (``pending``) is completed first: the same crawl, whose
   request the intake guard recognises if it was stored already;
2. due times older than CRAWLFLEET_SCHEDULE_GRACE are skipped in one fenced call (``lua/schedule_skip.lua``),
   logged and counted as missed on the schedule;
3. each remaining due time, oldest first, is begun (``lua/schedule_begin.lua``: fenced by the epoch like staging,
   refused when the time was fired already), submitted, and recorded (``lua/schedule_record.lua``: ``after`` moves up
   to it). A due time more than :data:`LATE_AFTER` behind is logged as fired late, and the schedule shows how late.

The crawl is stored exactly as the Kafka monitor stores a crawl request, by its own code
(:class:`messaging.kafka_monitor.plugins.crawl.CrawlPlugin` on a :class:`messaging.kafka_monitor.batch.Batch`): the
rule and limits in ``crawl:<id>``, refused for a stopped crawl, and the start URL into ``seeds`` behind the intake
guard ``intake:seen:{seeds}:<digest>``, whose delivery id names the schedule and the due time. The crawl id is the
schedule's name and the due time (``messaging.schedules.crawl_id``), so a firing repeated by the next leader is the
same request delivered again: answered ``redelivered``, never pushed twice. So across a failover a due time fires
once: a new leader never begins a time that the old one recorded (``after``), completes the one it began
(``pending``), and a stale leader can begin nothing (the epoch).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from master.lua import LUA
from master.staging import LeadershipLost
from messaging import keys
from messaging.clients import RedisClient
from messaging.kafka_monitor.batch import Batch, Incoming
from messaging.kafka_monitor.plugins.crawl import CrawlPlugin
from messaging.schedules import Schedule, ScheduleStore, crawl_id, due_times, request_for
from messaging.scripts import lua_script
from messaging.settings import Settings
from messaging.validation import Rejected, parse_request

logger = logging.getLogger(__name__)
LATE_AFTER = 5.0  # seconds behind its due time after which a firing is called late (a leader was missing)
DELIVERY_TOPIC = "schedule"  # the intake guard's delivery id of a firing: schedule:<name>/0/<due>

BEGIN = lua_script(LUA / "schedule_begin.lua")
RECORD = lua_script(LUA / "schedule_record.lua")
SKIP = lua_script(LUA / "schedule_skip.lua")


@dataclass(frozen=True)
class Firing:
    name: str
    due: float
    crawlid: str
    outcome: str  # enqueued, redelivered, queued-already, duplicate, rejected: <reason>
    late: float  # seconds after the due time


class ScheduleFirer:
    def __init__(self, redis: RedisClient, epoch: int, settings: Settings) -> None:
        self.redis = redis
        self.epoch = epoch
        self.grace = float(settings.schedule_grace)
        self.history = max(1, int(settings.schedule_history))
        self.max_bytes = int(settings.max_message_bytes)
        # the guard must outlive a firing begun by a leader that died: the next one may complete it much later
        self.guard_ttl = max(int(settings.intake_dedup_ttl), int(settings.crawl_ttl))
        self.request_ttl = int(settings.request_ttl)
        self.store = ScheduleStore(redis)
        self._begin = BEGIN.on(redis)
        self._record = RECORD.on(redis)
        self._skip = SKIP.on(redis)
        self._plugin = CrawlPlugin()

    def round(self, now: float) -> list[Firing]:
        """Fire what is due (see the module docstring); raises LeadershipLost when a newer leader exists."""
        fired: list[Firing] = []
        for schedule in self.store.all():
            try:
                fired += self._schedule(schedule, now)
            except LeadershipLost:
                raise
            except Exception as exc:
                if "FENCED" in str(exc):
                    raise LeadershipLost(str(exc)) from exc
                logger.exception("schedule %s", schedule.name)
        return fired

    def _schedule(self, schedule: Schedule, now: float) -> list[Firing]:
        fired = []
        after = schedule.after
        if schedule.pending is not None:  # begun by a leader that did not record it: complete it first
            fired.append(self._fire(schedule, schedule.pending, now))
            after = max(after, schedule.pending)
        if schedule.paused is not None:
            return fired
        due = due_times(schedule.cron, schedule.tz, after, now)
        missed = [time for time in due if now - time > self.grace]
        if missed:
            self._skip_missed(schedule, missed, now)
        for time in due[len(missed):]:
            if int(self._begin(keys=[keys.MASTER_EPOCH, keys.schedule(schedule.name)],
                               args=[self.epoch, repr(time), crawl_id(schedule.name, time)])):
                fired.append(self._fire(schedule, time, now))
        return fired

    def _skip_missed(self, schedule: Schedule, missed: list[float], now: float) -> None:
        entry = {"due": missed[-1], "first": missed[0], "skipped": len(missed), "at": now,
                 "outcome": f"missed: {len(missed)} due times older than the grace period"}
        if int(self._skip(keys=[keys.MASTER_EPOCH, keys.schedule(schedule.name), keys.schedule_history(schedule.name)],
                          args=[self.epoch, repr(missed[-1]), len(missed), self.history, json.dumps(entry)])):
            logger.warning("schedule %s: %d due times from %s to %s passed while no master led, more than %.0f s "
                           "ago (CRAWLFLEET_SCHEDULE_GRACE): skipped, counted as missed", schedule.name, len(missed),
                           _utc(missed[0]), _utc(missed[-1]), self.grace)

    def _fire(self, schedule: Schedule, due: float, now: float) -> Firing:
        crawlid = crawl_id(schedule.name, due)
        outcome = self._submit(schedule, due)
        late = max(0.0, now - due)
        entry = {"due": due, "crawlid": crawlid, "fired": now, "late": round(late, 3), "outcome": outcome}
        self._record(keys=[keys.schedule(schedule.name), keys.schedule_history(schedule.name)],
                     args=[repr(due), crawlid, repr(now), repr(round(late, 3)), outcome, self.history,
                           json.dumps(entry)])
        if late > LATE_AFTER:
            logger.warning("schedule %s fired LATE: crawl %s was due at %s, %.1f s ago (no master led then); %s",
                           schedule.name, crawlid, _utc(due), late, outcome)
        else:
            logger.info("schedule %s fired: crawl %s (due %s): %s", schedule.name, crawlid, _utc(due), outcome)
        return Firing(schedule.name, due, crawlid, outcome, late)

    def _submit(self, schedule: Schedule, due: float) -> str:
        """Store the firing's crawl as the Kafka monitor's crawl plugin stores a request; its outcome."""
        try:
            request = parse_request(request_for(schedule.name, due, schedule.request), self.max_bytes)
        except Rejected as rejection:  # the schemas changed since the schedule was stored
            return f"rejected: {rejection.reason}"
        incoming = Incoming(topic=f"{DELIVERY_TOPIC}:{schedule.name}", partition=0, offset=int(due), raw=b"",
                            request=request, plugin=self._plugin.name)
        batch = Batch(self.redis, self.guard_ttl, self.request_ttl)
        self._plugin.prepare([incoming], batch)
        try:
            self._plugin.handle(incoming, batch)
        except Rejected as rejection:  # the crawl was stopped before this firing completed
            return f"rejected: {rejection.message}"
        batch.write()
        return incoming.outcome


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

