"""A stalled crawl, and why (issue 40): one answer for the info answer, the crawl page, ``fleet status`` and metrics.

A running crawl is *stalled* when

- its items wait in a worker whose store has refused writes for a few seconds (``messaging.storage``): said at once,
  "storage refusing writes since T: reason; N items waiting", since the store's first refused write; or
- it has work left and its counts have not moved for CRAWLFLEET_STALL_SHOW_AFTER seconds (a minute): since when is
  what the leading master's stall watch recorded (``notify:{notify}:progress``, ``master.stalls``), and the reason
  is the weightiest of why its tasks wait now (:mod:`messaging.waits`, in the order of :data:`PRECEDENCE`: no worker
  of its spider type, every site blocked, robots.txt unreachable, a full backlog, pacing), or ``unknown`` when
  nothing explains it (its tasks are leased by workers that do not complete them).

:func:`crawl_stall` decides for one crawl from its waits; :func:`stalled_crawls` finds the stalled crawls of the
cluster for ``crawlfleet fleet status`` and the cluster's gauges, at a cost bounded by :data:`LOOKED_AT` crawls.
"""

from __future__ import annotations

from typing import Any

from messaging import keys, storage
from messaging.clients import RedisClient, as_text
from messaging.tasks import CrawlFields, CrawlState
from messaging.waits import BACKLOG_FULL, BLOCKED, NO_WORKER, PACED, ROBOTS, STORAGE, RateFor, crawl_waits, describe

UNKNOWN = "unknown"
PRECEDENCE = (STORAGE, NO_WORKER, BLOCKED, ROBOTS, BACKLOG_FULL, PACED)  # the weightiest reason first
LOOKED_AT = 50  # crawls whose waits a cluster-wide look reads, at most
US = 1_000_000


def crawl_stall(waits: list[dict[str, Any]], progress_since: float | None, now: float,
                show_after: float) -> dict[str, Any] | None:
    """The crawl's stall (``reason``, ``since``, ``for`` in seconds, ``text``) from its waits and since when its
    counts have not moved (None: it has no work, or no watch saw it); None when it is not stalled."""
    stored = next((wait for wait in waits if wait["reason"] == STORAGE), None)
    if stored is not None:
        return {"reason": STORAGE, "since": stored["since"], "for": max(0.0, now - stored["since"]),
                "items": stored["items"], "text": describe(stored)}
    if progress_since is None or now - progress_since < show_after:
        return None
    idle = now - progress_since
    ranked = sorted((w for w in waits if w["reason"] in PRECEDENCE), key=lambda w: PRECEDENCE.index(w["reason"]))
    if not ranked:
        return {"reason": UNKNOWN, "since": progress_since, "for": idle,
                "text": f"no progress for {idle:.0f} s with work left, and nothing known holds it back (its tasks "
                        f"may be leased by workers that do not complete them)"}
    main = ranked[0]
    return {"reason": main["reason"], "since": progress_since, "for": idle,
            "text": f"no progress for {idle:.0f} s: {describe(main)}"}


def progress_since(redis: RedisClient, crawlids: list[str]) -> dict[str, float]:
    """Since when each crawl's counts have not moved, as the stall watch last saw them (crawls with work only)."""
    if not crawlids:
        return {}
    found = {}
    for crawlid, raw in zip(crawlids, redis.hmget(keys.NOTIFY_PROGRESS, crawlids), strict=True):
        parts = as_text(raw).split() if raw is not None else []
        if len(parts) == 3:
            found[crawlid] = float(parts[1])
    return found


def redis_now(redis: RedisClient) -> float:
    seconds, micros = redis.time()
    return seconds + micros / US


def stall_of(redis: RedisClient, crawlid: str, waits: list[dict[str, Any]], show_after: float,
             now: float | None = None) -> dict[str, Any] | None:
    """:func:`crawl_stall` of one crawl whose waits were read already (the info answer, the crawl page)."""
    now = redis_now(redis) if now is None else now
    return crawl_stall(waits, progress_since(redis, [crawlid]).get(crawlid), now, show_after)


def stalled_crawls(redis: RedisClient, rate_for: RateFor, show_after: float) -> list[dict[str, Any]]:
    """Every running crawl that is stalled now, each ``{"crawlid", "reason", "since", "for", "text", ...}``, the
    longest stalled first: those whose items wait in a store that refuses writes, and those the stall watch saw
    without progress for ``show_after`` seconds (at most :data:`LOOKED_AT` crawls are looked at)."""
    now = redis_now(redis)
    idle = {as_text(c): as_text(v).split() for c, v in redis.hgetall(keys.NOTIFY_PROGRESS).items()}
    candidates = {c: float(p[1]) for c, p in idle.items() if len(p) == 3 and now - float(p[1]) >= show_after}
    live = [as_text(job) for job in redis.zrange(keys.WORKERS, 0, -1)]
    for state in storage.read(redis, live).values():
        candidates.update({crawlid: candidates.get(crawlid, now) for crawlid in state.crawls})
    ordered = sorted(candidates, key=candidates.__getitem__)[:LOOKED_AT]
    pipe = redis.pipeline(transaction=False)
    for crawlid in ordered:
        pipe.hget(keys.crawl(crawlid), CrawlFields.STATE)
    states = pipe.execute() if ordered else []
    stalled = []
    for crawlid, state in zip(ordered, states, strict=True):
        if state is None or as_text(state) != CrawlState.RUNNING:
            continue
        stall = crawl_stall(crawl_waits(redis, crawlid, rate_for), float(idle[crawlid][1])
                            if len(idle.get(crawlid, [])) == 3 else None, now, show_after)
        if stall is not None:
            stalled.append({"crawlid": crawlid, **stall})
    return sorted(stalled, key=lambda stall: -stall["for"])
