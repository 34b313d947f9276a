"""Schedules: a crawl request submitted again and again on a cron schedule, kept in the cluster's state.

A schedule (``crawlfleet schedule add NAME --cron "0 3 * * *" --tz Europe/Berlin FILE``, the manager's
``/api/schedules`` and *Schedules* page) is a hash in Redis (:func:`messaging.keys.schedule`, in the slot of
``seeds``), never the memory of one process, so it outlives any master. The leading master fires it
(:mod:`master.schedules`): each due time becomes a new crawl whose id is derived from the schedule's name and the
due time (:func:`crawl_id`, e.g. ``nightly-20250601T010000Z``), so a firing repeated after a crash is the same
crawl again, which the intake guard turns into a no-op.

The cron expression is read by croniter: five fields (minute hour day-of-month month day-of-week, with croniter's
``@daily`` and the like), or six with a leading seconds field (as Quartz and Spring write it). Due times are computed
in the schedule's time zone (``zoneinfo``; default UTC), so "0 3 * * *" in Europe/Berlin is 03:00 Berlin time in
summer and winter alike; a time that a daylight-saving change skips fires once, at the first minute after the
gap, and a time it repeats fires once too when the minute and hour are fixed (as Vixie cron: "30 2 * * *" fires at
the first 02:30 only, "*/5 * * * *" every five minutes of real time). An expression that never comes due
(``0 0 30 2 *``) is refused at entry, as is an unknown time zone.

What this module holds is pure logic (names, expressions, due times, crawl ids) and the store (add, replace, pause,
resume, remove, read), whose writes are one Lua call each (``messaging/lua/schedule_*.lua``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, CroniterBadDateError, CroniterError, croniter

from messaging import keys
from messaging.clients import RedisClient, as_text
from messaging.clock import NOW_SECONDS_LUA
from messaging.notify import redacted_request
from messaging.scripts import LUA, lua_script
from messaging.validation import CRAWL, Rejected, parse_request

STAMP = "%Y%m%dT%H%M%SZ"  # the due time in a crawl id, UTC
ID_MAX = 128  # common.json's id
NAME_MAX = ID_MAX - len("-20250601T010000Z")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]*")
DEFAULT_TZ = "UTC"
DUE_LIMIT = 10_000  # due times one call computes at most (a long outage of an every-second schedule)

ADD = lua_script(LUA / "schedule_add.lua", NOW_SECONDS_LUA)
STATE = lua_script(LUA / "schedule_state.lua", NOW_SECONDS_LUA)


class InvalidSchedule(ValueError):
    """A schedule that cannot be stored: a bad name, cron expression, time zone or crawl request; says why."""


# --- names, expressions, due times ------------------------------------------------------------------------------
def check_name(name: str) -> str:
    """The name, or :class:`InvalidSchedule`: an id (letters, digits, ``. _ @ -``) short enough for a crawl id."""
    if not _NAME.fullmatch(name or ""):
        raise InvalidSchedule(f"schedule name {name!r}: letters, digits and . _ @ - only, starting with a letter or "
                              "digit")
    if len(name) > NAME_MAX:
        raise InvalidSchedule(f"schedule name of {len(name)} characters: at most {NAME_MAX} (the crawl ids it makes "
                              f"add the due time)")
    return name


def zone(tz: str) -> ZoneInfo:
    """The time zone, or :class:`InvalidSchedule` naming it."""
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise InvalidSchedule(f"time zone {tz!r} is not known (an IANA name such as Europe/Berlin, or UTC)") from None


def _iterator(cron: str, tz: str, after: float) -> croniter:
    fields = cron.split()
    if not fields or (len(fields) not in (5, 6) and not (len(fields) == 1 and fields[0].startswith("@"))):
        raise InvalidSchedule(f"cron expression {cron!r}: five fields (minute hour day month weekday), or six with "
                              "seconds first")
    start = datetime.fromtimestamp(after, zone(tz))
    try:
        return croniter(cron, start, second_at_beginning=len(fields) == 6)
    except (CroniterBadCronError, CroniterError, ValueError, KeyError) as exc:
        raise InvalidSchedule(f"cron expression {cron!r}: {exc}") from None


def _wall_clock_once(cron: str) -> bool:
    """Whether a due time repeated by a daylight-saving change (02:30 twice in one autumn night) fires once: so for
    an expression with a fixed minute and hour, as Vixie cron does; one whose minute or hour is a wildcard (``*``,
    ``*/5``) runs by the real clock, through the repeated hour too."""
    fields = cron.split()
    minute_hour = fields[1:3] if len(fields) == 6 else fields[:2]
    if len(fields) == 1:  # @daily, @weekly …: fixed; @hourly: the hour is a wildcard
        return fields[0] not in ("@hourly",)
    return not any(field.startswith("*") for field in minute_hour)


def _dues(cron: str, tz: str, after: float) -> Iterator[float]:
    """Due times strictly after ``after``, oldest first (endless, or until the expression has none left)."""
    iterator = _iterator(cron, tz, after)
    once = _wall_clock_once(cron)
    where = zone(tz)
    while True:
        try:
            due = float(iterator.get_next(float))
        except CroniterBadDateError:
            return
        if once and datetime.fromtimestamp(due, where).fold == 1:
            continue  # the second pass of a repeated wall-clock time
        yield due


def next_due(cron: str, tz: str, after: float) -> float:
    """The first due time strictly after ``after`` (seconds since the epoch)."""
    for due in _dues(cron, tz, after):
        return due
    raise InvalidSchedule(f"cron expression {cron!r} never comes due")


def due_times(cron: str, tz: str, after: float, until: float, limit: int = DUE_LIMIT) -> list[float]:
    """Due times in ``(after, until]``, oldest first, at most ``limit``."""
    found: list[float] = []
    for due in _dues(cron, tz, after):
        if due > until or len(found) >= limit:
            break
        found.append(due)
    return found


def check_cron(cron: str, tz: str, now: float) -> float:
    """The expression's next due time after ``now``, or :class:`InvalidSchedule` with the reason."""
    return next_due(cron, tz, now)


def crawl_id(name: str, due: float) -> str:
    """The crawl a due time of a schedule becomes: ``<name>-<due time, UTC>``, e.g. ``nightly-20250601T010000Z``."""
    return f"{name}-{datetime.fromtimestamp(due, UTC).strftime(STAMP)}"


def local_time(seconds: float | None, tz: str) -> str:
    """A time in a schedule's zone for people, e.g. ``2025-06-01 03:00:00 CEST``; ``–`` for none."""
    if seconds is None:
        return "–"
    try:
        where: Any = zone(tz)
    except InvalidSchedule:
        where = UTC
    return datetime.fromtimestamp(seconds, where).strftime("%Y-%m-%d %H:%M:%S %Z")


# --- the crawl request -------------------------------------------------------------------------------------------
def stored_request(name: str, request: object, max_bytes: int) -> dict[str, Any]:
    """The crawl request a schedule submits, checked as the Kafka monitor checks one, without ``crawlid`` (each
    firing gets its own) and ``uuid`` (nobody waits for an answer)."""
    if not isinstance(request, dict):
        raise InvalidSchedule("the crawl request is a JSON object (as `crawlfleet submit` takes)")
    data = {key: value for key, value in request.items() if key not in ("crawlid", "uuid")}
    data.setdefault("userid", "scheduler")
    try:
        parsed = parse_request(request_for(name, 0.0, data), max_bytes)
    except Rejected as rejection:
        raise InvalidSchedule(f"crawl request: {rejection.reason}") from None
    if parsed.kind != CRAWL:
        raise InvalidSchedule(f"a schedule submits a crawl request, not a {parsed.kind} request")
    return data


def request_for(name: str, due: float, request: dict[str, Any]) -> dict[str, Any]:
    """The crawl request of one firing."""
    return {**request, "crawlid": crawl_id(name, due)}


# --- a schedule as stored ----------------------------------------------------------------------------------------
@dataclass
class Schedule:
    name: str
    cron: str
    tz: str
    request: dict[str, Any]
    created: float
    after: float  # due times after this are still to fire
    paused: float | None = None
    pending: float | None = None  # a firing begun and not yet recorded
    last_due: float | None = None
    last_crawlid: str = ""
    last_fired: float | None = None
    last_late: float = 0.0
    last_outcome: str = ""
    missed: int = 0
    last_missed: float | None = None

    @classmethod
    def from_hash(cls, name: str, raw: dict[Any, Any]) -> Schedule:
        data = {as_text(k): as_text(v) for k, v in raw.items()}

        def number(field: str) -> float | None:
            return float(data[field]) if data.get(field) else None

        return cls(name=name, cron=data.get("cron", ""), tz=data.get("tz", DEFAULT_TZ),
                   request=json.loads(data.get("request") or "{}"), created=number("created") or 0.0,
                   after=number("after") or 0.0, paused=number("paused"), pending=number("pending"),
                   last_due=number("last_due"), last_crawlid=data.get("last_crawlid", ""),
                   last_fired=number("last_fired"), last_late=number("last_late") or 0.0,
                   last_outcome=data.get("last_outcome", ""), missed=int(data.get("missed") or 0),
                   last_missed=number("last_missed"))

    def next_due(self) -> float | None:
        """The next due time to fire (in the past while a firing is overdue); None while paused."""
        if self.paused is not None:
            return None
        try:
            return next_due(self.cron, self.tz, self.after)
        except InvalidSchedule:
            return None

    def to_json(self) -> dict[str, Any]:
        """What the CLI and the API show; the request's notify URL redacted (it may hold a token)."""
        upcoming = self.next_due()
        return {
            "name": self.name, "cron": self.cron, "tz": self.tz, "state": "paused" if self.paused else "active",
            "paused": self.paused, "created": self.created, "request": redacted_request(self.request),
            "next": None if upcoming is None else {"due": upcoming, "crawlid": crawl_id(self.name, upcoming)},
            "last": None if self.last_due is None else {
                "due": self.last_due, "crawlid": self.last_crawlid, "fired": self.last_fired,
                "late": self.last_late, "outcome": self.last_outcome},
            "firing": None if self.pending is None else {"due": self.pending,
                                                         "crawlid": crawl_id(self.name, self.pending)},
            "missed": self.missed, "last_missed": self.last_missed,
        }


class ScheduleStore:
    """The schedules in Redis: every write is one Lua call in the slot of ``seeds``."""

    def __init__(self, redis: RedisClient) -> None:
        self.redis = redis
        self._add = ADD.on(redis)
        self._state = STATE.on(redis)

    def add(self, name: str, cron: str, tz: str, request: object, *, max_bytes: int,
            replace: bool = False) -> Schedule:
        """Store a schedule (or replace an existing one's expression, zone and request); InvalidSchedule says why
        not. Due times are counted from now (the Redis clock)."""
        check_name(name)
        tz = tz or DEFAULT_TZ
        now = float(self.redis.time()[0])
        check_cron(cron, tz, now)
        data = stored_request(name, request, max_bytes)
        fields = ["cron", cron, "tz", tz, "request", json.dumps(data, sort_keys=True, ensure_ascii=False)]
        result = int(self._add(keys=[keys.SCHEDULES, keys.schedule(name)],
                               args=["", name, "1" if replace else "0", *fields]))
        if result == 0:
            raise InvalidSchedule(f"schedule {name!r} exists (remove it first, or replace it)")
        if result == -1:
            raise InvalidSchedule(f"there is no schedule {name!r} to replace")
        found = self.get(name)
        assert found is not None
        return found

    def get(self, name: str) -> Schedule | None:
        raw = self.redis.hgetall(keys.schedule(name))
        return Schedule.from_hash(name, raw) if raw else None

    def names(self) -> list[str]:
        return sorted(as_text(n) for n in self.redis.smembers(keys.SCHEDULES))

    def all(self) -> list[Schedule]:
        names = self.names()
        pipe = self.redis.pipeline(transaction=False)
        for name in names:
            pipe.hgetall(keys.schedule(name))
        return [Schedule.from_hash(name, raw) for name, raw in zip(names, pipe.execute() if names else [],
                                                                   strict=True) if raw]

    def history(self, name: str, limit: int = 50) -> list[dict[str, Any]]:
        return [json.loads(entry) for entry in self.redis.lrange(keys.schedule_history(name), 0, max(0, limit - 1))]

    def pause(self, name: str) -> bool:
        return self._change(name, "pause")

    def resume(self, name: str) -> bool:
        return self._change(name, "resume")

    def remove(self, name: str) -> bool:
        return self._change(name, "remove")

    def _change(self, name: str, action: str) -> bool:
        return int(self._state(keys=[keys.SCHEDULES, keys.schedule(name), keys.schedule_history(name)],
                               args=["", name, action])) == 1
