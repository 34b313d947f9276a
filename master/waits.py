"""What the dispatcher passes by in ``seeds``, and why: the skip mark, and the reasons it publishes per crawl.

**The skip mark.** A round reads ``seeds`` from its head. Tasks that cannot go anywhere now — their spider type has no
live worker, or their domain holds its whole quota already (``master.shares``: a paced site's tasks beyond a few
minutes of its hits) — would be read again by every round, and a site with 100,000 waiting pages would leave no
scan budget for the crawl behind it. So a round remembers the *leading run* of such tasks (the score of its last
one) and the next rounds start after it, while the mark holds: the same spider types are live, nothing entered or
left ``seeds`` before the mark (``ZCOUNT`` up to its score, read when the mark was set and again before it is used:
a new task of higher priority, a stop's purge), no domain of the run has room again (their counts are read at most
once a second), and for at most SKIP_MEMORY_SECONDS. Tasks held back only because every worker of their type is at
its bound do not extend the run: room comes back with any completion.

**Reasons** (:class:`WaitBoard`). Every round notes, per crawl, the tasks it passed by and why — ``paced`` (the
domain holds its quota: figures ``held`` and ``quota``), ``no_worker`` (no live worker of the spider type),
``backlog_full`` (every worker of the type is at its bound) — and, per spider type, the room it found (workers, how
many had nothing due, tasks held against their bounds). At most once a second the board writes them to
``master:{seeds}:waits`` and ``master:{seeds}:room`` (one pipeline), where ``messaging.waits`` reads them for the
info answer and the crawl page, adding what only the moment can say (a site's next slot, a robots.txt outage).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from messaging import keys
from messaging.clients import RedisClient

SKIP_MEMORY_SECONDS = 30.0
FULL_RECHECK_LIMIT = 1000  # full domains of a run rechecked by count; a run with more is forgotten after a while
FULL_MEMORY_SECONDS = 2.0  # how long such a run is remembered
PUBLISH_SECONDS = 1.0
PACED, NO_WORKER, BACKLOG_FULL = "paced", "no_worker", "backlog_full"

Note = tuple[str, str]  # (reason, subject: the domain of a paced task, else the spider type)


@dataclass
class SkipMark:
    """Where a round starts scanning ``seeds``: past the leading run of tasks that cannot be placed now."""

    score: float  # the seeds score of the run's last task
    live_types: frozenset[str]  # the spider types that were live: another set of live workers scans from the start
    since: float  # when the first mark was set (a mark older than SKIP_MEMORY_SECONDS is forgotten)
    before: int = -1  # entries of seeds up to the score when the mark was set (-1: not read)
    full: frozenset[str] = frozenset()  # domains passed by because they held their quota
    checked: float = 0.0  # when their counts were last read
    notes: dict[str, Counter[Note]] = field(default_factory=dict)  # the run's tasks by crawl and reason

    def holds(self, live_types: frozenset[str], now: float) -> bool:
        if self.live_types != live_types or now - self.since >= SKIP_MEMORY_SECONDS:
            return False
        return len(self.full) <= FULL_RECHECK_LIMIT or now - self.since < FULL_MEMORY_SECONDS

    def start(self) -> str:
        """The exclusive lower bound of the next scan (ZRANGEBYSCORE's ``(score``)."""
        return f"({self.score!r}"


class LeadingRun:
    """The leading run of a round's scan: tasks that cannot be placed now, from the mark it started from."""

    def __init__(self, mark: SkipMark | None) -> None:
        self.start = mark
        self.score: float | None = None
        self.full: set[str] = set(mark.full) if mark else set()
        self.notes: dict[str, Counter[Note]] = {c: Counter(n) for c, n in (mark.notes if mark else {}).items()}
        self.open = True

    def passed(self, score: float, crawlid: str, note: Note, full: str | None = None) -> None:
        if not self.open:
            return
        self.score = score
        self.notes.setdefault(crawlid, Counter())[note] += 1
        if full is not None:
            self.full.add(full)

    def ended(self) -> None:
        self.open = False

    def mark(self, redis: RedisClient, live_types: frozenset[str], now: float) -> SkipMark | None:
        """The mark for the next round: the run extended by this round, the old mark, or none."""
        if self.score is None:
            return self.start
        since = self.start.since if self.start else now
        checked = self.start.checked if self.start else now
        return SkipMark(self.score, live_types, since, int(redis.zcount(keys.SEEDS, "-inf", self.score)),
                        frozenset(self.full), checked, self.notes)


class WaitBoard:
    """The reasons of the latest round, per crawl and per spider type, published at most once a second."""

    def __init__(self, redis: Any, publish_seconds: float = PUBLISH_SECONDS) -> None:
        self.redis = redis
        self.publish_seconds = publish_seconds
        self.notes: dict[str, Counter[Note]] = defaultdict(Counter)
        self.figures: dict[Note, dict[str, Any]] = {}
        self.rooms: dict[str, dict[str, Any]] = {}
        self._published: set[str] = set()
        self._next = 0.0

    def begin(self, carried: dict[str, Counter[Note]] | None = None) -> None:
        """A new round, starting from the reasons of the remembered run (its tasks are not read again)."""
        self.notes = defaultdict(Counter)
        for crawlid, counts in (carried or {}).items():
            self.notes[crawlid].update(counts)

    def note(self, crawlid: str, reason: str, subject: str, **figures: Any) -> Note:
        key = (reason, subject)
        self.notes[crawlid][key] += 1
        if figures:
            self.figures[key] = figures
        return key

    def room(self, spider_type: str, **figures: Any) -> None:
        self.rooms[spider_type] = figures

    def publish(self, now: float, force: bool = False) -> bool:
        """Write the reasons (and the rooms) when a second has passed since the last write; True when it did."""
        if not force and now < self._next:
            return False
        self._next = now + self.publish_seconds
        pipe = self.redis.pipeline(transaction=False)
        current = {crawlid for crawlid, counts in self.notes.items() if counts}
        if current:
            pipe.hset(keys.DISPATCH_WAITS, mapping={crawlid: json.dumps(self._record(crawlid, now), sort_keys=True)
                                                    for crawlid in current})
        gone = self._published - current
        if gone:
            pipe.hdel(keys.DISPATCH_WAITS, *gone)
        if self.rooms:
            pipe.hset(keys.DISPATCH_ROOM, mapping={name: json.dumps({**figures, "at": now}, sort_keys=True)
                                                   for name, figures in self.rooms.items()})
        pipe.execute()
        self._published = current
        self.figures = {key: value for key, value in self.figures.items()
                        if any(key in counts for counts in self.notes.values())}
        return True

    def _record(self, crawlid: str, now: float) -> dict[str, Any]:
        waits = []
        for (reason, subject), tasks in sorted(self.notes[crawlid].items()):
            where = {"domain": subject} if reason == PACED else {"spider_type": subject}
            waits.append({"reason": reason, **where, "tasks": tasks, **self.figures.get((reason, subject), {})})
        return {"at": now, "waits": waits}

