"""A worker's item store refusing writes: what the worker reports, where it lives, how it reads (issue 40).

A worker holds the items of its tasks until its store (MongoDB) acknowledges them (``spiders.pipelines.buffer``);
while the store refuses writes — unreachable, a full cache or disk, repeated server errors, authentication — the
items wait in the worker (its feed takes no new task once its buffer is full) and their tasks' leases are renewed.
Once the store has refused writes for :data:`REPORT_AFTER` seconds the worker reports it, with every heartbeat until
a write succeeds, in ``workers:{workers}:stores`` (job -> :class:`StoreState` as JSON; its field is deleted when the
store takes writes again, or when the master retires the job). The info answer's ``waiting`` and ``stalled``, the
crawl page, ``crawlfleet fleet status`` and the cluster's Prometheus gauges read it (:mod:`messaging.waits`,
:mod:`messaging.stalls`).

``since`` is the worker's wall clock (epoch seconds) at the first refused write of the outage: what an operator reads
as "since T" (hosts of a fleet keep their clocks in step; the Redis clock is for windows, not for this).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from messaging import keys
from messaging.clients import RedisClient, as_text

REPORT_AFTER = 5.0  # seconds a store refuses writes before its worker reports it ("longer than a few seconds")
CRAWLS_REPORTED = 50  # the crawls with the most waiting items a report names (the total counts them all)
UNREACHABLE, AUTHENTICATION, FULL, SERVER_ERROR = "unreachable", "authentication", "full", "server_error"
KINDS = (UNREACHABLE, AUTHENTICATION, FULL, SERVER_ERROR)


@dataclass(frozen=True)
class StoreState:
    """A worker's store refusing writes: since when, why, and the items that wait for it (by crawl)."""

    since: float  # epoch seconds of the first refused write of this outage
    reason: str  # the store's error, one line
    kind: str  # one of KINDS (bounded: a metric's label)
    waiting: int  # items the worker holds that the store has not acknowledged
    crawls: dict[str, int] = field(default_factory=dict)  # of those, per crawl (the CRAWLS_REPORTED largest)
    store: str = "mongodb"
    at: float = 0.0  # when the worker wrote this report (epoch seconds)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, raw: Any) -> StoreState | None:
        try:
            data = json.loads(raw)
            return cls(float(data["since"]), str(data["reason"]), str(data.get("kind", SERVER_ERROR)),
                       int(data.get("waiting", 0)), {str(c): int(n) for c, n in (data.get("crawls") or {}).items()},
                       str(data.get("store", "mongodb")), float(data.get("at", 0.0)))
        except (TypeError, ValueError, KeyError):
            return None


def largest(by_crawl: Mapping[str, int], limit: int = CRAWLS_REPORTED) -> dict[str, int]:
    """The ``limit`` crawls with the most waiting items (a report stays small however many crawls a worker holds)."""
    return dict(sorted(((c, n) for c, n in by_crawl.items() if n > 0), key=lambda cn: -cn[1])[:limit])


def report(redis: RedisClient, job: str, state: StoreState | None) -> None:
    """Write (or, with ``None``: delete) this job's report."""
    if state is None:
        redis.hdel(keys.WORKER_STORES, job)
    else:
        redis.hset(keys.WORKER_STORES, job, state.to_json())


def read(redis: RedisClient, jobs: Iterable[str] | None = None) -> dict[str, StoreState]:
    """The reports of ``jobs`` (every job's when ``None``; a caller passes the live ones: a dead job's report is
    stale until the master retires it)."""
    raw: dict[str, Any]
    if jobs is None:
        raw = {as_text(job): value for job, value in redis.hgetall(keys.WORKER_STORES).items()}
    else:
        wanted = list(jobs)
        raw = dict(zip(wanted, redis.hmget(keys.WORKER_STORES, wanted), strict=True)) if wanted else {}
    states = {job: StoreState.from_json(value) for job, value in raw.items() if value is not None}
    return {job: state for job, state in states.items() if state is not None}


def when(epoch: float) -> str:
    """A time as people read it in a status line: UTC, to the second."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))


def describe(since: float, reason: str, items: int, workers: int = 1) -> str:
    """``storage refusing writes since T: reason; N items waiting`` (in how many workers, when more than one)."""
    where = f" in {workers} workers" if workers > 1 else ""
    return f"storage refusing writes since {when(since)}: {reason}; {items:,} items waiting{where}"
