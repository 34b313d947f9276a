"""Pause and resume a crawl (issue 42): while paused nothing of it is fetched, its tasks wait parked, none is lost.

**Where a paused crawl's tasks wait.** Every task stays counted in the pending count of its hash slot, so the crawl
never looks finished, and moves only within that slot, atomically:

- in ``seeds``: into ``parked:{seeds}:<id>`` at its ``seeds`` score (:func:`pause`, the Redis monitor's pause plugin,
  parks those already there; the dispatcher parks those it meets later, :func:`park_in_seeds`), so that the
  dispatcher spends no worker's room on it and the crawls behind it in ``seeds`` go on;
- in a job's queue or leases: into ``<job>:{<domain>}:parked`` at its queue score, by the job's own worker
  (``spiders.worker.feed``), which hears of the pause on ``crawls:states`` within milliseconds (else within
  CRAWLFLEET_CRAWL_REFRESH), parks what it has queued, hands back the leases it holds and has not sent (their hits
  withdrawn), and parks any task of the crawl it takes later; a retired job's parked tasks go back to ``seeds``
  with the rest of its tasks (``master.requeue``), where the dispatcher parks them again.

**The state** is ``paused`` in ``crawl:<id>`` (with ``paused``: since when, Redis time), which workers, the
finisher (it finishes only running crawls), the stall watch and the revisits (postponed, not purged) read, and the
crawl's entry in ``crawls:{seeds}:paused``, which the dispatcher reads (same slot as ``seeds``: its parking call
checks it). Both live in Redis, so a pause survives a master failover and a worker restart.

**Resume** (:func:`resume`) sets the state back to running, takes the crawl out of ``crawls:{seeds}:paused`` and
moves its parked tasks back into ``seeds`` at their old place, in the same calls; workers hear of it and put their
parked tasks back into their queues; the crawl becomes a finish candidate again (one with nothing left finishes).
A request that dies half-way is carried out again by another Redis monitor (at least once): every step is
idempotent. A stop of a paused crawl purges its parked tasks with the rest (``messaging.redis_monitor.plugins.stop``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from messaging import keys
from messaging.clients import RedisClient, as_text
from messaging.redis_monitor.crawl_tasks import crawl_members
from messaging.scripts import LUA, lua_script, run_scripts
from messaging.tasks import CrawlFields, CrawlState

CHANGE = lua_script(LUA / "crawl_pause.lua")  # running <-> paused in crawl:<id>
PARK_SEEDS = lua_script(LUA / "park_seeds.lua", LUA / "pending.lua")
UNPARK_SEEDS = lua_script(LUA / "unpark_seeds.lua", LUA / "pending.lua")
CHUNK = 500  # tasks moved per call (a call blocks Redis while it runs)
CHANGED, UNCHANGED, REFUSED = "changed", "unchanged", "refused"


class NotPausable(Exception):
    """The crawl cannot be paused or resumed: ``state`` is what it is ('' when there is no such crawl)."""

    def __init__(self, crawlid: str, state: str, action: str) -> None:
        self.crawlid, self.state = crawlid, state
        why = f"no such crawl: {crawlid}" if not state else f"crawl {crawlid} is {state}: only a " + (
            "running crawl can be paused" if action == "pause" else "paused crawl can be resumed")
        super().__init__(why)


@dataclass(frozen=True)
class Change:
    crawlid: str
    changed: bool  # False: it already was in that state (the request is answered all the same)
    state: str  # paused | running
    since: float | None  # paused: since when (Redis time); resumed: since when it had been paused
    moved: int = 0  # tasks parked in (pause) or taken out of (resume) parked:{seeds}:<id>


def publish_state(redis: RedisClient, crawlid: str, state: str) -> None:
    """Tell every worker at once (``crawls:states``); one that misses it reads the state within its refresh time."""
    redis.publish(keys.CRAWL_STATES_CHANNEL, f"{crawlid} {state}")


def parse_state_message(data: bytes | str) -> tuple[str, str] | None:
    """``(crawlid, state)`` of a ``crawls:states`` message; None for a malformed one."""
    crawlid, _, state = as_text(data).strip().rpartition(" ")
    return (crawlid, state) if crawlid and state else None


def pause(redis: RedisClient, crawlid: str) -> Change:
    """Pause a running crawl (see the module docstring); :class:`NotPausable` when it is stopped, finished or
    unknown. Pausing a paused crawl changes nothing and says since when."""
    what, state, since = _change(redis, crawlid, "pause")
    if what == REFUSED:
        raise NotPausable(crawlid, state, "pause")
    park = PARK_SEEDS.on(redis)
    script_keys = [keys.PAUSED, keys.SEEDS, keys.parked_seeds(crawlid), keys.PENDING_SEEDS]
    park(keys=script_keys, args=[crawlid, since])  # marked for the dispatcher (again, if the first try died here)
    publish_state(redis, crawlid, CrawlState.PAUSED)
    moved = 0
    for chunk in _chunks(member for member, _ in crawl_members(redis, keys.SEEDS, crawlid)):
        moved += max(0, int(park(keys=script_keys, args=[crawlid, "", *chunk])))
    return Change(crawlid, what == CHANGED, CrawlState.PAUSED, float(since), moved)


def resume(redis: RedisClient, crawlid: str) -> Change:
    """Resume a paused crawl (see the module docstring); :class:`NotPausable` when it is stopped, finished or
    unknown. Resuming a running crawl changes nothing (but puts back what an interrupted resume left parked)."""
    what, state, since = _change(redis, crawlid, "resume")
    if what == REFUSED:
        raise NotPausable(crawlid, state, "resume")
    unpark = UNPARK_SEEDS.on(redis)
    moved, left = 0, 1
    while left:
        done, left = (int(n) for n in unpark(keys=[keys.PAUSED, keys.SEEDS, keys.parked_seeds(crawlid),
                                                   keys.PENDING_SEEDS], args=[crawlid, CHUNK]))
        moved += done
    publish_state(redis, crawlid, CrawlState.RUNNING)
    redis.sadd(keys.FINISH_CANDIDATES, crawlid)  # nothing left anywhere: the finisher declares it now
    return Change(crawlid, what == CHANGED, CrawlState.RUNNING, float(since) if since else None, moved)


def paused_crawls(redis: RedisClient) -> dict[str, float]:
    """Every paused crawl and since when, as the dispatcher sees them (one HGETALL of a small hash)."""
    return {as_text(k): float(v) for k, v in (redis.hgetall(keys.PAUSED) or {}).items()}


def park_in_seeds(redis: RedisClient, members: Iterable[tuple[str, str]]) -> int:
    """Park ``(crawlid, member)`` tasks met in ``seeds`` whose crawl is paused (the dispatcher); a crawl resumed
    meanwhile keeps its tasks in ``seeds``. Returns how many were parked."""
    by_crawl: dict[str, list[str]] = defaultdict(list)
    for crawlid, member in members:
        by_crawl[crawlid].append(member)
    park = PARK_SEEDS.on(redis)
    calls = [(park, [keys.PAUSED, keys.SEEDS, keys.parked_seeds(crawlid), keys.PENDING_SEEDS], [crawlid, "", *chunk])
             for crawlid, tasks in by_crawl.items() for chunk in _chunks(tasks)]
    return sum(max(0, int(n)) for n in run_scripts(redis, calls)) if calls else 0


def _change(redis: RedisClient, crawlid: str, action: str) -> tuple[str, str, str]:
    reply = CHANGE.on(redis)(keys=[keys.crawl(crawlid)], args=[action, CrawlFields.STATE, CrawlFields.PAUSED,
                                                                CrawlState.RUNNING, CrawlState.PAUSED])
    what, state, since = (as_text(v) for v in reply)
    return what, state, since


def _chunks(members: Iterable[Any]) -> Iterable[list[Any]]:
    chunk: list[Any] = []
    for member in members:
        chunk.append(member)
        if len(chunk) >= CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
