"""The dispatcher: dynamic-feedback weighted round robin from ``seeds`` into worker queues (seed 4.2.1).

One :meth:`Dispatcher.round` (the leading master runs them back to back):

1. **Workers and weights.** Live workers (``frontier.registry``) grouped by spider type; each one's weight is its
   completions per busy minute over the last k minutes (``frontier.weights``; a new worker starts at its type's mean).
2. **How much** (seed ``is_max``, and no flooding): per spider type, the tasks handed out to its *live* workers over
   the last k minutes (``master:{seeds}:dispatched-jobs:<type>``, per Redis-clock minute and job, so that the tasks
   of workers that left — a rolling restart replaces them all — never hold back their successors) stay under
   ``headroom × Σ weights × k``; and per
   worker, the tasks it holds (queued or leased, ``out``) stay under ``headroom × weight × backlog minutes``, so its
   queues hold a little more than it can finish in that time. A worker at its bound takes nothing this round.
3. **Whom**: tasks are read from the head of ``seeds`` (priority order) and each one goes to the worker chosen by the
   type's interleaved weighted round robin (``master.wrr``, seed 4.2.1.1) among that type's workers with room.
   Tasks of a spider type without a live worker (or without room) are skipped and wait in ``seeds``: they never
   block the other types. At most CRAWLFLEET_DISPATCH_SCAN entries are read per round; a run of tasks at the head
   whose types have no live worker at all is remembered (by score) and skipped by the next rounds, until the set of
   live spider types changes or 30 s have passed.
4. **Move**, in batches of CRAWLFLEET_DISPATCH_BATCH: ``master.staging`` (stage in the ``seeds`` slot under the
   leader's epoch, land per domain slot, settle) — crash-safe, fenced, Redis-Cluster safe. A task that cannot be
   placed (not a JSON task, or a URL whose host breaks the host rule of ``messaging.domains``, so that none of its
   keys can be formed) is never retried nor allowed to fail the round: it goes to the dead letters
   (:meth:`master.staging.Staging.dead_letter`) with the reason, and the round goes on.

Everything that measures time takes ``now`` (the Redis clock, or the simulation's clock).
"""

from __future__ import annotations

import json
import logging
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from frontier.client import FrontierReader
from frontier.registry import WorkerInfo, WorkerRegistry
from frontier.weights import fill_missing, measure, minute_of
from master.staging import DeadLetter, Pick, Staging
from master.wrr import InterleavedWRR
from messaging import keys
from messaging.answers import dead_letter_record
from messaging.clients import as_text
from messaging.domains import domain_of, domain_of_host, host_problem
from messaging.settings import SETTINGS, Settings
from messaging.tasks import DEFAULT_PRIORITY, queue_score

logger = logging.getLogger(__name__)
SKIP_MEMORY_SECONDS = 30.0
RECONCILE_SECONDS = 60.0  # a job's outstanding count is recounted at most this often...
RECONCILE_DOMAINS_PER_SECOND = 20.0  # ...and no faster than this many of its domains a second (two ZCARDs each)


@dataclass(frozen=True)
class DispatchConfig:
    """The dispatch settings (defaults: the settings registry's, messaging/settings.py)."""

    window_minutes: int = SETTINGS["CRAWLFLEET_WEIGHT_WINDOW_MINUTES"].default
    headroom: float = SETTINGS["CRAWLFLEET_DISPATCH_HEADROOM"].default
    backlog_minutes: float = SETTINGS["CRAWLFLEET_DISPATCH_BACKLOG_MINUTES"].default
    initial_rate: float = SETTINGS["CRAWLFLEET_DISPATCH_INITIAL_RATE"].default
    batch: int = SETTINGS["CRAWLFLEET_DISPATCH_BATCH"].default
    scan: int = SETTINGS["CRAWLFLEET_DISPATCH_SCAN"].default

    @classmethod
    def from_settings(cls, settings: Settings) -> DispatchConfig:
        return cls(window_minutes=settings.weight_window_minutes, headroom=settings.dispatch_headroom,
                   backlog_minutes=settings.dispatch_backlog_minutes, initial_rate=settings.dispatch_initial_rate,
                   batch=settings.dispatch_batch, scan=settings.dispatch_scan)


@dataclass(frozen=True)
class SkipMark:
    """Where a round starts scanning the seeds: past the leading tasks of spider types that have no live worker
    (they would be scanned again and again otherwise), while the same types are live and for a while only."""

    score: float  # the seeds score of the last such task seen
    live_types: frozenset[str]  # the spider types that were live: another set of live workers scans from the start
    since: float  # when the first mark was set (a mark older than SKIP_MEMORY_SECONDS is forgotten)

    def holds(self, live_types: frozenset[str], now: float) -> bool:
        return self.live_types == live_types and now - self.since < SKIP_MEMORY_SECONDS

    def start(self) -> str:
        """The exclusive lower bound of the next scan (ZRANGEBYSCORE's ``(score``)."""
        return f"({self.score!r}"


@dataclass
class WorkerView:
    info: WorkerInfo
    rate: float  # tasks per minute (measured, or the mean for a worker without history)
    measured: bool
    outstanding: int
    room: int = 0

    @property
    def weight(self) -> int:
        return max(1, round(self.rate))


@dataclass
class RoundResult:
    placed: dict[str, int] = field(default_factory=dict)  # job -> tasks put into its queues
    scanned: int = 0
    dead: int = 0  # tasks that could not be placed, moved to the dead letters
    budget: dict[str, int] = field(default_factory=dict)  # spider type -> tasks it could take this round

    @property
    def total(self) -> int:
        return sum(self.placed.values())


class Dispatcher:
    """The dispatch rounds of the leader of ``epoch`` (see the module docstring)."""

    def __init__(self, redis: Any, epoch: int, config: DispatchConfig | None = None,
                 registry: WorkerRegistry | None = None, stats: Any = None) -> None:
        self.redis = redis
        self.config = config or DispatchConfig()
        self.registry = registry or WorkerRegistry(redis)
        self.reader = FrontierReader(redis)  # what the jobs hold (the frontier's queues and leases)
        self.staging = Staging(redis, epoch)
        self.stats = stats
        self._infos: dict[str, WorkerInfo] = {}
        self._wrr: dict[str, InterleavedWRR] = defaultdict(InterleavedWRR)
        self._skip: SkipMark | None = None
        self._next_recount: dict[str, float] = {}  # job -> when its outstanding count is recounted next
        self.weights: dict[str, float] = {}  # job -> rate used in the last round (for reports)

    # --- 1. workers and weights -------------------------------------------------------------------------------
    def workers(self, now: float) -> dict[str, list[WorkerView]]:
        """Live workers by spider type, with their weights and outstanding tasks."""
        live = self.registry.live()
        missing = [job for job in live if job not in self._infos]
        self._infos.update(self.registry.infos(missing))
        for gone in set(self._infos) - set(live):
            del self._infos[gone]
            self._next_recount.pop(gone, None)
        infos = {job: self._infos[job] for job in live if job in self._infos}
        measured = measure(self.registry, {job: info.started for job, info in infos.items()}, now,
                           self.config.window_minutes)
        by_type: dict[str, list[str]] = defaultdict(list)
        for job, info in infos.items():
            by_type[info.spider_type].append(job)
        views: dict[str, list[WorkerView]] = {}
        self.weights = {}
        for spider_type, jobs in by_type.items():
            rates = fill_missing({job: measured[job].rate for job in jobs}, self.config.initial_rate)
            views[spider_type] = [WorkerView(infos[job], rates[job], measured[job].rate is not None,
                                             measured[job].outstanding) for job in sorted(jobs)]
            self.weights.update(rates)
        return views

    def reconcile(self, now: float, jobs: list[str]) -> None:
        """Recount what each job holds (its queues and leases): ``out`` is a running hint (dispatch adds, completions
        subtract), recounted at most once a minute, and — since the recount reads every queue of the job — no more
        often than RECONCILE_DOMAINS_PER_SECOND of its domains a second: a broad crawl's job with 10^4 domains is
        recounted every 8 minutes, so that the commands per page stay flat in the number of sites."""
        due = [job for job in jobs if now >= self._next_recount.get(job, -math.inf)]
        for job in due:
            domains = self.reader.job_domains(job)
            # a domain an older leader listed but could not land (it breaks the host rule) has no queue
            domains = [d for d in domains if host_problem(d) is None]
            self.registry.set_outstanding(job, self.reader.held(job, domains))
            self.registry.prune(job, minute_of(now) - self.config.window_minutes - 1)
            self._next_recount[job] = now + max(RECONCILE_SECONDS, len(domains) / RECONCILE_DOMAINS_PER_SECOND)

    # --- 2. how much ------------------------------------------------------------------------------------------
    def budgets(self, views: dict[str, list[WorkerView]], now: float) -> dict[str, int]:
        """Tasks each spider type may take now; sets every worker's room."""
        config = self.config
        current = minute_of(now)
        oldest = current - config.window_minutes + 1
        types = list(views)
        pipe = self.redis.pipeline(transaction=False)
        for spider_type in types:
            pipe.hgetall(keys.dispatched_jobs(spider_type))
        budgets: dict[str, int] = {}
        expired: dict[str, list[str]] = {}
        for spider_type, counts in zip(types, pipe.execute() if types else [], strict=True):
            workers = views[spider_type]
            # only what the live workers were given counts: a departed worker's tasks are done or back in seeds
            live = {w.info.job for w in workers}
            recent = 0
            for raw_field, raw_count in counts.items():
                name = as_text(raw_field)
                minute, _, job = name.partition(":")
                if not minute.lstrip("-").isdigit() or int(minute) < oldest:
                    expired.setdefault(spider_type, []).append(name)
                elif job in live:
                    recent += int(raw_count)
            capacity = sum(w.rate for w in workers)
            allowed = math.floor(config.headroom * capacity * config.window_minutes) - recent
            for worker in workers:
                bound = math.ceil(config.headroom * worker.rate * config.backlog_minutes)
                worker.room = max(0, bound - worker.outstanding)
            budgets[spider_type] = max(0, min(allowed, sum(w.room for w in workers)))
        if expired:  # minutes that slid out of the window
            pipe = self.redis.pipeline(transaction=False)
            for spider_type, names in expired.items():
                pipe.hdel(keys.dispatched_jobs(spider_type), *names)
            pipe.execute()
        return budgets

    # --- 3 and 4. whom, and move ----------------------------------------------------------------------------------
    def round(self, now: float) -> RoundResult:
        views = self.workers(now)
        self.reconcile(now, [w.info.job for workers in views.values() for w in workers])
        budgets = self.budgets(views, now)
        result = RoundResult(budget=dict(budgets))
        if not any(budgets.values()):
            return result
        caps: dict[str, dict[str, int]] = {}
        for spider_type, workers in views.items():
            caps[spider_type] = {w.info.job: w.room for w in workers if w.room > 0}
            self._wrr[spider_type].update({w.info.job: w.weight for w in workers if w.room > 0})
        live_types = frozenset(views)
        start = "-inf"
        if self._skip and self._skip.holds(live_types, now):
            start = self._skip.start()
        else:
            self._skip = None
        picks: list[Pick] = []
        leading_blocked = True
        chunk = max(500, min(self.config.scan, 2 * self.config.batch))
        offset = 0
        while result.scanned < self.config.scan and any(budgets.values()):
            # moved and dead-lettered tasks left seeds: the entries after them shifted down by as many places
            entries = self.redis.zrangebyscore(keys.SEEDS, start, "+inf", start=offset - result.total - result.dead,
                                               num=chunk, withscores=True)
            if not entries:
                break
            offset += len(entries)
            letters: list[DeadLetter] = []
            for raw, score in entries:
                result.scanned += 1
                member = as_text(raw)
                try:
                    task = _task(member)
                except Unplaceable as exc:
                    letters.append(self._letter(member, {}, exc, now))
                    continue
                spider_type = task["spider_type"]
                if spider_type not in live_types:
                    if leading_blocked:
                        self._skip = SkipMark(float(score), live_types, self._skip.since if self._skip else now)
                    continue
                leading_blocked = False
                if budgets[spider_type] <= 0:
                    continue
                try:
                    domain, score_in_queue = _placement(task)
                except Unplaceable as exc:
                    letters.append(self._letter(member, task, exc, now))
                    continue
                job = self._wrr[spider_type].choose()
                if job is None:
                    continue
                picks.append(Pick(member, job, domain, task["crawlid"], spider_type, score_in_queue))
                budgets[spider_type] -= 1
                caps[spider_type][job] -= 1
                if caps[spider_type][job] <= 0:
                    self._wrr[spider_type].remove(job)
                if len(picks) >= self.config.batch:
                    self._move(picks, now, result)
                    picks = []
            self._dead_letter(letters, result)
            if len(entries) < chunk:
                break
        if picks:
            self._move(picks, now, result)
        return result

    def _letter(self, member: str, task: dict[str, Any], problem: Unplaceable, now: float) -> DeadLetter:
        crawlid, userid = task.get("crawlid"), task.get("userid")
        crawlid = crawlid if isinstance(crawlid, str) else ""
        userid = userid if isinstance(userid, str) else ""
        logger.warning("dead-lettering a task the dispatcher cannot place (%s): %s", problem, member[:200])
        return DeadLetter(member, crawlid, dead_letter_record(member, str(problem), crawlid, userid, now,
                                                              path=problem.path))

    def _dead_letter(self, letters: list[DeadLetter], result: RoundResult) -> None:
        moved = self.staging.dead_letter(letters)
        result.dead += moved
        if self.stats is not None and moved:
            self.stats.incr("dead_letters", moved)

    def _move(self, picks: list[Pick], now: float, result: RoundResult) -> None:
        placed = self.staging.move(picks, minute_of(now))
        self.registry.add_outstanding(placed)
        for job, n in placed.items():
            result.placed[job] = result.placed.get(job, 0) + n
        if self.stats is not None and placed:
            self.stats.incr("dispatched", sum(placed.values()))


class Unplaceable(ValueError):
    """A task in ``seeds`` that no worker can be given (it goes to the dead letters); ``path`` says where."""

    def __init__(self, message: str, path: str = "$.url") -> None:
        super().__init__(message)
        self.path = path


def _task(member: str) -> dict[str, Any]:
    """The task of a ``seeds`` member, with a string crawlid and spider type; :class:`Unplaceable` otherwise."""
    try:
        task = json.loads(member)
    except ValueError as exc:
        raise Unplaceable(f"not a JSON task: {exc}", "$") from None
    if not isinstance(task, dict):
        raise Unplaceable("a task is a JSON object", "$")
    for name in ("spider_type", "crawlid"):
        if not isinstance(task.get(name), str) or not task[name]:
            raise Unplaceable(f"a task needs a {name}", f"$.{name}")
    return task


def _placement(task: dict[str, Any]) -> tuple[str, float]:
    """The task's domain (every domain-scoped key is formed from it) and its score in a queue; or
    :class:`Unplaceable` with the reason, under the one host rule the key builder applies."""
    url = task.get("url")
    if not isinstance(url, str):
        raise Unplaceable("a task needs a url")
    try:
        domain = _domain(url)
        keys.queue("-", domain)  # the key builder's own check, in case a rule ever diverges from domain_of's
    except ValueError as exc:  # InvalidDomain, or a URL urlsplit refuses
        raise Unplaceable(f"no usable host in {url[:200]!r}: {exc}") from None
    try:
        return domain, queue_score(int(task.get("priority", DEFAULT_PRIORITY)), int(task.get("depth", 0)))
    except (TypeError, ValueError) as exc:
        raise Unplaceable(f"bad priority or depth: {exc}", "$.priority") from None


def _domain(url: str) -> str:
    """``domain_of`` with a fast path for plain ``http(s)://host/...`` URLs (the host's domain is cached)."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme in ("http", "https"):
        host = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
        if host and not any(ch in host for ch in "@:[%") and host.isascii():
            return domain_of_host(host.lower())
    return domain_of(url)
