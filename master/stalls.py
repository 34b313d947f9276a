"""Stalled crawls: a running crawl with work left whose counts have not moved for CRAWLFLEET_STALL_AFTER.

Progress is what the workers count for the crawl (``crawl:{<id>}:totals``: pages, items, re-processings and failed
pages by reason, :mod:`messaging.counts`): their sum grows with every task that completes, whatever its outcome. The
leader's notifier (:mod:`master.notifier`) calls :meth:`StallWatch.check` every few seconds; what it last saw of each
crawl lives in Redis (``notify:{notify}:progress``: the sum, since when it has not moved, whether the stall was
announced), so a new leader picks up the same stall, with the same start, and raises no second event for it.

A paused crawl (``messaging.pause``) is not running: it is not watched, and its timer starts again when it resumes.

"Work left": a running crawl has tasks somewhere until the finisher declares it finished; a crawl that revisits pages
(``frontier.revisit``) is running between revisits with nothing to do, so it counts as having work only while a
revisit task of it is out (``revisit:{seeds}:out:<id>``) or its ``seeds`` count is above zero. A crawl without work
has its timer reset, so a stall is measured from the moment work was there and did not move.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from messaging import keys
from messaging.clients import RedisClient, as_text
from messaging.notify import stalled_event
from messaging.tasks import CrawlFields, CrawlState

logger = logging.getLogger(__name__)

Emit = Callable[[str, str, list[dict[str, Any]]], None]  # (crawlid, its notify JSON, events)


def progress_of(totals: dict[Any, Any]) -> tuple[int, dict[str, int]]:
    """The sum of a crawl's counts (what grows with each completed task) and the counts a stalled event shows."""
    numbers = {}
    for name, value in totals.items():
        text = as_text(value)
        if text.lstrip("-").isdigit():
            numbers[as_text(name)] = int(text)
    # items come with pages; listed and unlisted mirror the failures
    total = sum(value for name, value in numbers.items() if name not in ("items", "listed", "unlisted"))
    return total, {"pages": numbers.get("pages", 0), "items": numbers.get("items", 0)}


class StallWatch:
    def __init__(self, redis: RedisClient, stall_after: float, emit: Emit) -> None:
        self.redis = redis
        self.stall_after = stall_after
        self.emit = emit

    def check(self, now: float) -> list[str]:
        """One look at every running crawl; returns the crawls found stalled now (their event emitted)."""
        ids = sorted(as_text(c) for c in self.redis.smembers(keys.CRAWLS))
        pipe = self.redis.pipeline(transaction=False)
        for crawlid in ids:
            pipe.hmget(keys.crawl(crawlid), [CrawlFields.STATE, CrawlFields.NOTIFY, CrawlFields.USERID])
        rows = dict(zip(ids, pipe.execute() if ids else [], strict=True))
        running = [c for c in ids if as_text(rows[c][0] or b"") == CrawlState.RUNNING]
        seen = {as_text(k): as_text(v) for k, v in self.redis.hgetall(keys.NOTIFY_PROGRESS).items()}
        details = self._details(running)
        updates: dict[str, str] = {}
        stalled = []
        for crawlid in running:
            totals, has_work = details[crawlid]
            progress, counts = progress_of(totals)
            previous = seen.get(crawlid, "").split()
            if not has_work:
                continue  # left out of `updates`: its entry goes, the timer starts again with work
            if len(previous) != 3 or int(previous[0]) != progress:
                updates[crawlid] = f"{progress} {now!r} 0"
                continue
            since, alerted = float(previous[1]), previous[2] == "1"
            updates[crawlid] = seen[crawlid]
            if not alerted and now - since >= self.stall_after:
                _, notify, userid = rows[crawlid]
                logger.warning("crawl %s is stalled: no progress for %.0f s (%d pages, %d items) with work left",
                               crawlid, now - since, counts["pages"], counts["items"])
                self.emit(crawlid, as_text(notify) if notify else "",
                          [stalled_event(crawlid, as_text(userid or b""), since, now, counts)])
                updates[crawlid] = f"{progress} {since!r} 1"
                stalled.append(crawlid)
        self._write(seen, updates)
        return stalled

    def _details(self, running: list[str]) -> dict[str, tuple[dict[Any, Any], bool]]:
        """Each running crawl's totals and whether it has work left (see the module docstring)."""
        pipe = self.redis.pipeline(transaction=False)
        for crawlid in running:
            pipe.hgetall(keys.crawl_totals(crawlid))
            pipe.sismember(keys.REVISIT_CRAWLS, crawlid)
            pipe.hget(keys.PENDING_SEEDS, crawlid)
            pipe.zcard(keys.revisit_out(crawlid))
        replies = pipe.execute() if running else []
        found = {}
        for index, crawlid in enumerate(running):
            totals, revisits, in_seeds, out = replies[4 * index: 4 * index + 4]
            found[crawlid] = (totals or {}, not revisits or int(in_seeds or 0) > 0 or int(out or 0) > 0)
        return found

    def _write(self, seen: dict[str, str], updates: dict[str, str]) -> None:
        gone = [crawlid for crawlid in seen if crawlid not in updates]
        changed: dict[Any, Any] = {c: value for c, value in updates.items() if seen.get(c) != value}
        pipe = self.redis.pipeline(transaction=False)
        if gone:
            pipe.hdel(keys.NOTIFY_PROGRESS, *gone)
        if changed:
            pipe.hset(keys.NOTIFY_PROGRESS, mapping=changed)
        if gone or changed:
            pipe.execute()
