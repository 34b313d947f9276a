"""The worker registry: who crawls, what each has done per minute, and who is retired (seed 4.2.1.3).

Keys (``messaging.keys``): ``workers`` (zset job -> last heartbeat, Redis clock), ``worker:<job>`` (hash: job,
spider type, host IP identity, host name, pid, start time, and the crawl a worker of one's own spider serves —
static, written once), ``workers:{workers}:activity:<job>``
(hash: ``d<minute>`` completions and ``b<minute>`` busy flags per Redis-clock minute, ``done`` lifetime completions,
``out`` tasks handed to the job and not yet completed) and ``workers:{workers}:retired`` (zset job -> retirement
time). The zsets and the activity hashes share the hash tag ``workers``, so every script below checks the fence and
writes in one atomic call, also on a Redis Cluster.

Worker side (the Scrapy worker; the simulated workers of tests and benchmarks)::

    registry = WorkerRegistry(redis)
    registry.register(WorkerInfo(job, spider_type, ip, host, pid))
    registry.heartbeat(job, busy=scheduler_has_work, lag=seconds_since_the_feed_last_made_a_pass)
                                                              # every CRAWLFLEET_HEARTBEAT_INTERVAL seconds
    task = frontier.ack(lease)                                # the lease-ack step (frontier.client)
    if task is not None:
        record_completion(redis, job, [task])               # weights + the crawl's pending count
    registry.leave(job)                                       # on a clean shutdown: requeued at once

A *busy* minute is one in which the worker had work queued or leased: a heartbeat with ``busy=True`` marks it, and so
does any completion. Weights (``frontier.weights``) are completions per busy minute, so a worker that ran out of work
is not judged slower for it.

Slow is not gone: a worker beats from a thread of its own (``spiders.worker.heartbeat``), which nothing else the
worker does can hold up, and each beat carries its progress — ``lag``, the seconds since its feed thread last made a
pass (walk, take, commit), kept in the activity hash. :meth:`WorkerRegistry.health` tells the three states apart:
``ok``; ``slow`` (a fresh heartbeat, but no pass for CRAWLFLEET_WORKER_SLOW_AFTER seconds: shown in the status and
logged by the master, never retired); ``gone`` (no heartbeat for CRAWLFLEET_HEARTBEAT_TTL: retired).

Fencing: the master retires a job whose heartbeat is older than CRAWLFLEET_HEARTBEAT_TTL (:meth:`retire`); from then
on ``register``, ``heartbeat`` and ``record_completion`` of that job raise :class:`Fenced` and the worker must stop.
The master then moves the job's queues *and leases* back to ``seeds`` (``master.requeue``), one atomic call per
domain slot, so the job's later lease acks find nothing to acknowledge (``FrontierClient.ack`` returns ``None``) and
nothing of it is counted twice. Writes that are not acks (pushing child tasks) should check :func:`is_retired` first;
a child pushed by a zombie in the gap is at worst a duplicate task, never a lost one.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from frontier.finish_hints import log_touched
from frontier.lua import LUA, PENDING_LUA
from messaging import keys, storage
from messaging.clients import as_text
from messaging.clock import NOW_SECONDS_LUA, Clock, RedisClock
from messaging.scripts import lua_script
from messaging.storage import StoreState
from messaging.tasks import Task

RETIRED_KEEP_SECONDS = 7 * 86400  # a retired job id stays fenced this long (job ids are never reused)

REGISTER = lua_script(LUA / "register.lua", NOW_SECONDS_LUA, LUA / "minute.lua")
HEARTBEAT = lua_script(LUA / "heartbeat.lua", NOW_SECONDS_LUA, LUA / "minute.lua")
COMPLETIONS = lua_script(LUA / "completions.lua", NOW_SECONDS_LUA, LUA / "minute.lua")
RETIRE = lua_script(LUA / "retire.lua", NOW_SECONDS_LUA, LUA / "minute.lua")
DONE = lua_script(LUA / "done.lua", PENDING_LUA)  # tasks leave their crawls' pending counts of a domain


class Fenced(RuntimeError):
    """The job id was retired (declared dead): the worker must stop; its tasks went back to ``seeds``."""


@dataclass(frozen=True)
class WorkerInfo:
    job: str
    spider_type: str
    ip: str
    host: str
    pid: int
    started: float = 0.0  # Redis time of the registration (set by register)
    crawlid: str = ""  # the one crawl a worker of one's own spider serves ("": every crawl of its type)

    def to_hash(self) -> dict[str, str]:
        return {name: str(value) for name, value in asdict(self).items() if name != "crawlid" or value}

    @classmethod
    def from_hash(cls, data: dict[Any, Any]) -> WorkerInfo:
        text = {as_text(k): as_text(v) for k, v in data.items()}
        return cls(job=text["job"], spider_type=text["spider_type"], ip=text.get("ip", ""),
                   host=text.get("host", ""), pid=int(text.get("pid") or 0),
                   started=float(text.get("started") or 0.0), crawlid=text.get("crawlid", ""))


class WorkerState:
    OK = "ok"
    SLOW = "slow"  # alive (heartbeats on time) but its feed thread has made no pass for a while: never retired
    GONE = "gone"  # no heartbeat within the TTL: the master retires it


@dataclass(frozen=True)
class WorkerHealth:
    job: str
    beat_age: float  # seconds since its last heartbeat (Redis clock)
    lag: float | None  # seconds since its feed thread last made a pass, as of now (None: never reported)
    state: str


def health_of(job: str, beat: float, lag: float | None, now: float, ttl: float, slow_after: float) -> WorkerHealth:
    """The state of a job from its last heartbeat and the lag it carried (pure: the rule of the module docstring)."""
    age = max(0.0, now - beat)
    lag_now = None if lag is None else lag + age  # the feed has made no pass since the beat either, at worst
    if age > ttl:
        state = WorkerState.GONE
    elif lag_now is not None and lag_now >= slow_after:
        state = WorkerState.SLOW
    else:
        state = WorkerState.OK
    return WorkerHealth(job, age, lag_now, state)


class WorkerRegistry:
    """Registration, heartbeats, completions and retirement of workers (see the module docstring)."""

    def __init__(self, redis: Any, clock: Clock | None = None) -> None:
        self.redis = redis
        self.clock = clock
        self._register = REGISTER.on(redis)
        self._heartbeat = HEARTBEAT.on(redis)
        self._retire = RETIRE.on(redis)

    def _now(self, now: float | None) -> str:
        if now is not None:
            return repr(float(now))
        return repr(self.clock.now()) if self.clock is not None else ""

    # --- worker side ----------------------------------------------------------------------------------------------
    def register(self, info: WorkerInfo, now: float | None = None) -> WorkerInfo:
        """Join: write the worker's description, then its first heartbeat. Raises :class:`Fenced`."""
        started = float(now) if now is not None else (self.clock or RedisClock(self.redis)).now()
        info = WorkerInfo(info.job, info.spider_type, info.ip, info.host, info.pid, started, info.crawlid)
        # the description goes first: the master ignores a heartbeat it cannot describe yet
        self.redis.hset(keys.worker(info.job), mapping=info.to_hash())
        result = self._register(keys=[keys.WORKERS, keys.RETIRED_WORKERS, keys.worker_activity(info.job)],
                                args=[repr(started), info.job])
        if int(result) < 0:
            raise Fenced(info.job)
        return info

    def heartbeat(self, job: str, busy: bool = True, now: float | None = None, lag: float | None = None) -> bool:
        """I am alive (and had work this minute when ``busy``; my feed thread made its last pass ``lag`` seconds
        ago). False: not registered (register again)."""
        result = int(self._heartbeat(keys=[keys.WORKERS, keys.RETIRED_WORKERS, keys.worker_activity(job)],
                                     args=[self._now(now), job, "1" if busy else "0",
                                           "" if lag is None else f"{max(0.0, lag):.3f}"]))
        if result < 0:
            raise Fenced(job)
        return result == 1

    def report_store(self, job: str, state: StoreState | None) -> None:
        """My item store refuses writes (``state``), or takes them again (``None``): ``messaging.storage``."""
        storage.report(self.redis, job, state)

    def record_completion(self, job: str, tasks: Sequence[Task] | int, now: float | None = None,
                          domain: str | None = None) -> int:
        """Count completed tasks; see :func:`record_completion`."""
        return record_completion(self.redis, job, tasks, now if now is not None else _clock_now(self.clock), domain)

    def leave(self, job: str, now: float | None = None) -> bool:
        """Clean shutdown: retire the job at once, so that the master requeues what it still holds."""
        return self.retire(job, math.inf, now)

    # --- master side ----------------------------------------------------------------------------------------------
    def retire(self, job: str, deadline: float = math.inf, now: float | None = None) -> bool:
        """Fence the job if its last heartbeat is not later than ``deadline``; True when it was retired now."""
        latest = "+inf" if math.isinf(deadline) else repr(float(deadline))
        return int(self._retire(keys=[keys.WORKERS, keys.RETIRED_WORKERS], args=[self._now(now), job, latest])) == 1

    def expired(self, ttl: float, now: float) -> list[str]:
        """Jobs whose last heartbeat is more than ``ttl`` seconds before ``now``."""
        return [as_text(job) for job in self.redis.zrangebyscore(keys.WORKERS, "-inf", f"({now - ttl!r}")]

    def live(self) -> dict[str, float]:
        """Registered (not retired) jobs and their last heartbeat."""
        return {as_text(job): float(score) for job, score in self.redis.zrange(keys.WORKERS, 0, -1, withscores=True)}

    def health(self, now: float, ttl: float, slow_after: float) -> dict[str, WorkerHealth]:
        """Every registered job's state (ok, slow, gone; see the module docstring), in two round trips."""
        live = self.live()
        pipe = self.redis.pipeline(transaction=False)
        for job in live:
            pipe.hget(keys.worker_activity(job), "lag")
        lags = pipe.execute() if live else []
        return {job: health_of(job, beat, None if lag is None else float(lag), now, ttl, slow_after)
                for (job, beat), lag in zip(live.items(), lags, strict=True)}

    def infos(self, jobs: Iterable[str]) -> dict[str, WorkerInfo]:
        """Descriptions of the given jobs (jobs without one are left out)."""
        jobs = list(jobs)
        pipe = self.redis.pipeline(transaction=False)
        for job in jobs:
            pipe.hgetall(keys.worker(job))
        return {job: WorkerInfo.from_hash(data) for job, data in zip(jobs, pipe.execute(), strict=True)
                if data and b"spider_type" in data}

    def activity(self, jobs: Iterable[str], fields: Sequence[str]) -> dict[str, list[int]]:
        """The given activity fields (``d<minute>``, ``b<minute>``, ``out``, ``done``) of each job, 0 when unset."""
        jobs = list(jobs)
        if not fields:
            return {job: [] for job in jobs}
        pipe = self.redis.pipeline(transaction=False)
        for job in jobs:
            pipe.hmget(keys.worker_activity(job), list(fields))
        return {job: [int(value or 0) for value in values]
                for job, values in zip(jobs, pipe.execute(), strict=True)}

    def add_outstanding(self, counts: dict[str, int]) -> None:
        """Tasks just placed in the jobs' queues (the dispatcher's backlog bound reads ``out``)."""
        if counts:
            pipe = self.redis.pipeline(transaction=False)
            for job, n in counts.items():
                pipe.hincrby(keys.worker_activity(job), "out", n)
            pipe.execute()

    def set_outstanding(self, job: str, n: int) -> None:
        self.redis.hset(keys.worker_activity(job), "out", n)

    def prune(self, job: str, oldest_minute: int) -> None:
        """Drop per-minute fields older than ``oldest_minute`` (bounded memory)."""
        stale = [field for field in map(as_text, self.redis.hkeys(keys.worker_activity(job)))
                 if field[:1] in ("d", "b") and field[1:].isdigit() and int(field[1:]) < oldest_minute]
        if stale:
            self.redis.hdel(keys.worker_activity(job), *stale)

    def retired(self) -> list[str]:
        return [as_text(job) for job in self.redis.zrange(keys.RETIRED_WORKERS, 0, -1)]

    def retired_since(self, since: float) -> list[str]:
        """Jobs retired (or that left) at or after ``since`` (Redis clock)."""
        return [as_text(job) for job in self.redis.zrangebyscore(keys.RETIRED_WORKERS, repr(float(since)), "+inf")]

    def forget(self, job: str, now: float) -> None:
        """After its tasks are back in ``seeds``: drop a retired job's description and activity; prune old fences."""
        self.redis.delete(keys.worker(job))
        self.redis.delete(keys.worker_activity(job))
        self.redis.hdel(keys.WORKER_STORES, job)
        self.redis.zremrangebyscore(keys.RETIRED_WORKERS, "-inf", now - RETIRED_KEEP_SECONDS)


def is_retired(redis: Any, job: str) -> bool:
    """The cheap fence check for a worker's writes that are not lease acks (e.g. pushing child tasks)."""
    return redis.zscore(keys.RETIRED_WORKERS, job) is not None


def record_completion(redis: Any, job: str, tasks: Sequence[Task] | int, now: float | None = None,
                      domain: str | None = None) -> int:
    """Count tasks the job completed (their leases were acknowledged): the ack path calls this.

    With tasks (not a bare number) each one also leaves its crawl's pending count of its queue's key
    (``pending:{<domain>}``: ``domain``, the queue the tasks left, or by default each task's registered domain —
    a crawl partitioned by host or address counts under those keys, ``master.placement``; the master declares a
    crawl finished when every count is zero). Call it only for tasks whose ack succeeded, exactly once: a crash
    between ack and this call leaves a count too high (the crawl is then not declared finished), never too low.
    The completion counts for the job's weight in the minute of ``now`` (default: the Redis clock), which is marked
    busy. Raises :class:`Fenced` when the job is retired (the
    domain counts are still released: the acknowledged tasks did leave).
    """
    n = tasks if isinstance(tasks, int) else len(tasks)
    if n <= 0:
        return 0
    if not isinstance(tasks, int):
        by_domain: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for task in tasks:
            by_domain[domain or task.domain][task.crawlid] += 1
        done = DONE.on(redis)
        pipe = redis.pipeline(transaction=False)
        for domain, crawls in by_domain.items():
            args: list[Any] = []
            for crawlid, count in crawls.items():
                args += [crawlid, count]
            done(keys=[keys.pending_domain(domain)], args=args, client=pipe)
        log_touched(pipe, ((domain, crawlid) for domain, crawls in by_domain.items() for crawlid in crawls))
        pipe.execute()
    result = int(COMPLETIONS.on(redis)(
        keys=[keys.RETIRED_WORKERS, keys.worker_activity(job)],
        args=["" if now is None else repr(float(now)), job, n], client=redis))
    if result < 0:
        raise Fenced(job)
    return result


def _clock_now(clock: Clock | None) -> float | None:
    return clock.now() if clock is not None else None

