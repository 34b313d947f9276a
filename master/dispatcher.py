"""The dispatcher: dynamic-feedback weighted round robin from ``seeds`` into worker queues (seed 4.2.1).

One :meth:`Dispatcher.round` (the leading master runs them back to back):

1. **Workers and weights.** Live workers (``frontier.registry``) grouped by spider type; each one's weight is its
   completions per busy minute over the last k minutes (``frontier.weights``; a new worker starts at its type's mean).
2. **How much** (seed ``is_max``, and no flooding): per spider type, the tasks handed out to its *live* workers over
   the last k minutes (``master:{seeds}:dispatched-jobs:<type>``, per Redis-clock minute and job, so that the tasks
   of workers that left — a rolling restart replaces them all — never hold back their successors) stay under
   ``headroom × Σ weights × k``; and per worker, the tasks it holds (queued or leased, ``out``) stay under
   ``headroom × weight × backlog minutes``, so its queues hold a little more than it can finish in that time. What a
   worker holds counts only while something of it is due: one whose queued tasks all wait for their sites' next
   slots (``frontier.client.ready.waiting_for_pace``) can fetch nothing soon, so it gets its whole bound, outside the
   window cap too (that cap measured the sites' pace, not the worker).
3. **Whom**: tasks are read from the head of ``seeds`` (priority order) and each one goes to the worker chosen by the
   type's interleaved weighted round robin (``master.wrr``, seed 4.2.1.1) among that type's workers with room. A
   worker of one's own Scrapy spider serves one crawl (its spider's arguments, settings and egg version are the
   crawl's): it registers the crawl id with its type, and the tasks of that crawl go only to such workers (a *pool*:
   :func:`pool_of`); a rule spider's workers (no crawl) serve every crawl of their type. A domain holds at most its
   quota of the workers' queues, a few minutes of its own hits (``master.shares``): its other tasks wait in
   ``seeds``, so that a paced site's backlog never takes the room of another crawl. Tasks of a spider type without a
   live worker (or without room) are skipped and wait in ``seeds``: they never block the other types. Tasks of a
   paused crawl (``crawls:{seeds}:paused``, read once per round) take no room and no budget: they are parked out of
   ``seeds`` (:func:`messaging.pause.park_in_seeds`, one call that checks the crawl is still paused), so the crawls
   behind them go on. At most CRAWLFLEET_DISPATCH_SCAN entries are read per round; the leading run of tasks that
   cannot be placed now (no live worker, a full domain) is remembered and skipped by the next rounds while that holds
   (``master.waits.SkipMark``), and why each crawl's tasks wait is published for the info answer and the crawl page
   (``master.waits.WaitBoard``).
4. **Move**, in batches of CRAWLFLEET_DISPATCH_BATCH: ``master.staging`` (stage in the ``seeds`` slot under the
   leader's epoch, land per domain slot, settle) — crash-safe, fenced, Redis-Cluster safe. A task that cannot be
   placed (not a JSON task, or a URL whose host breaks the host rule of ``messaging.domains``, so that none of its
   keys can be formed) is never retried nor allowed to fail the round: it goes to the dead letters
   (:meth:`master.staging.Staging.dead_letter`) with the reason, and the round goes on.

Everything that measures time takes ``now`` (the Redis clock, or the simulation's clock).
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from frontier.client import FrontierReader
from frontier.client.ready import waiting_for_pace
from frontier.config_watch import SiteRates
from frontier.registry import WorkerInfo, WorkerRegistry
from frontier.weights import fill_missing, measure, minute_of
from master.placement import Entry, Partitioner, Unplaceable, parse_task, placement
from master.shares import REFRESH_SECONDS, SiteShares
from master.staging import DeadLetter, Pick, Staging
from master.waits import (
    BACKLOG_FULL,
    FULL_RECHECK_LIMIT,
    NO_WORKER,
    PACED,
    SKIP_MEMORY_SECONDS,
    LeadingRun,
    SkipMark,
    WaitBoard,
)
from master.wrr import InterleavedWRR
from messaging import keys
from messaging.answers import dead_letter_record
from messaging.clients import as_text
from messaging.domains import host_problem
from messaging.hostmap import AddressCache
from messaging.pause import park_in_seeds, paused_crawls
from messaging.settings import SETTINGS, Settings

logger = logging.getLogger(__name__)
__all__ = ["SKIP_MEMORY_SECONDS", "DispatchConfig", "Dispatcher", "RoundResult", "SkipMark", "Unplaceable"]
RECONCILE_SECONDS = 60.0  # a job's outstanding count is recounted at most this often...
RECONCILE_DOMAINS_PER_SECOND = 20.0  # ...and no faster than this many of its domains a second (two ZCARDs each)
PACE_CHECK_SECONDS = 0.5  # how often the workers' ready indexes are asked whether anything of them is due


@dataclass(frozen=True)
class DispatchConfig:
    """The dispatch settings (defaults: the settings registry's, messaging/settings.py)."""

    window_minutes: int = SETTINGS["CRAWLFLEET_WEIGHT_WINDOW_MINUTES"].default
    headroom: float = SETTINGS["CRAWLFLEET_DISPATCH_HEADROOM"].default
    backlog_minutes: float = SETTINGS["CRAWLFLEET_DISPATCH_BACKLOG_MINUTES"].default
    initial_rate: float = SETTINGS["CRAWLFLEET_DISPATCH_INITIAL_RATE"].default
    batch: int = SETTINGS["CRAWLFLEET_DISPATCH_BATCH"].default
    scan: int = SETTINGS["CRAWLFLEET_DISPATCH_SCAN"].default
    site_minutes: float = SETTINGS["CRAWLFLEET_DISPATCH_SITE_MINUTES"].default
    partition: str = SETTINGS["CRAWLFLEET_PARTITION"].default

    @classmethod
    def from_settings(cls, settings: Settings) -> DispatchConfig:
        return cls(window_minutes=settings.weight_window_minutes, headroom=settings.dispatch_headroom,
                   backlog_minutes=settings.dispatch_backlog_minutes, initial_rate=settings.dispatch_initial_rate,
                   batch=settings.dispatch_batch, scan=settings.dispatch_scan,
                   site_minutes=settings.dispatch_site_minutes, partition=settings.partition)


@dataclass
class WorkerView:
    info: WorkerInfo
    rate: float  # tasks per minute (measured, or the mean for a worker without history)
    measured: bool
    outstanding: int
    room: int = 0
    idle: bool = False  # its queued tasks all wait for their sites' next slots (frontier.client.ready.waiting_for_pace)

    @property
    def weight(self) -> int:
        return max(1, round(self.rate))


@dataclass
class RoundResult:
    placed: dict[str, int] = field(default_factory=dict)  # job -> tasks put into its queues
    scanned: int = 0
    dead: int = 0  # tasks that could not be placed, moved to the dead letters
    parked: int = 0  # tasks of paused crawls parked out of seeds (messaging.pause)
    budget: dict[str, int] = field(default_factory=dict)  # spider type -> tasks it could take this round

    @property
    def total(self) -> int:
        return sum(self.placed.values())


class Dispatcher:
    """The dispatch rounds of the leader of ``epoch`` (see the module docstring)."""

    def __init__(self, redis: Any, epoch: int, config: DispatchConfig | None = None,
                 registry: WorkerRegistry | None = None, stats: Any = None, sites: SiteRates | None = None,
                 addresses: AddressCache | None = None) -> None:
        """``sites``: the site rates the workers apply (``frontier.config_watch``); with them every domain gets at
        most its quota of the workers' queues (``master.shares``), without them (simulations, tests) no quota.
        ``addresses``: the hosts' addresses, for crawls partitioned by IP (default: the system resolver)."""
        self.redis = redis
        self.config = config or DispatchConfig()
        self.partitioner = Partitioner(redis, self.config.partition, addresses,  # each task's queue key
                                       blacklisted=sites.is_blacklisted if sites is not None else None)
        self.registry = registry or WorkerRegistry(redis)
        self.reader = FrontierReader(redis)  # what the jobs hold (the frontier's queues and leases)
        self.staging = Staging(redis, epoch)
        self.stats = stats
        self.shares = SiteShares(redis, sites, self.config.site_minutes) if sites is not None else None
        self._paced: dict[str, bool] = {}  # job -> its queued tasks all wait for their sites' next slots
        self._paced_at = -math.inf
        self.board = WaitBoard(redis)
        self._infos: dict[str, WorkerInfo] = {}
        self._wrr: dict[str, InterleavedWRR] = defaultdict(InterleavedWRR)
        self._skip: SkipMark | None = None
        self._next_recount: dict[str, float] = {}  # job -> when its outstanding count is recounted next
        self.weights: dict[str, float] = {}  # job -> rate used in the last round (for reports)

    # --- 1. workers and weights -------------------------------------------------------------------------------
    def workers(self, now: float) -> dict[str, list[WorkerView]]:
        """Live workers by pool (:func:`pool_of`: their spider type, and the crawl a worker of one's own spider
        serves), with their weights and outstanding tasks."""
        live = self.registry.live()
        missing = [job for job in live if job not in self._infos]
        self._infos.update(self.registry.infos(missing))
        for gone in set(self._infos) - set(live):
            del self._infos[gone]
            self._next_recount.pop(gone, None)
        infos = {job: self._infos[job] for job in live if job in self._infos}
        measured = measure(self.registry, {job: info.started for job, info in infos.items()}, now,
                           self.config.window_minutes)
        by_pool: dict[str, list[str]] = defaultdict(list)
        for job, info in infos.items():
            by_pool[pool_of(info.spider_type, info.crawlid)].append(job)
        views: dict[str, list[WorkerView]] = {}
        self.weights = {}
        for pool, jobs in by_pool.items():
            rates = fill_missing({job: measured[job].rate for job in jobs}, self.config.initial_rate)
            views[pool] = [WorkerView(infos[job], rates[job], measured[job].rate is not None,
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
        """Tasks each pool may take now; sets every worker's room."""
        config = self.config
        current = minute_of(now)
        oldest = current - config.window_minutes + 1
        pools = list(views)
        pipe = self.redis.pipeline(transaction=False)
        for pool in pools:  # a type's hash counts per job: each pool reads its own workers' fields
            pipe.hgetall(keys.dispatched_jobs(views[pool][0].info.spider_type))
        budgets: dict[str, int] = {}
        expired: dict[str, list[str]] = {}
        paced = self._waiting_for_pace([w.info.job for workers in views.values() for w in workers], now)
        for pool, counts in zip(pools, pipe.execute() if pools else [], strict=True):
            workers = views[pool]
            spider_type = workers[0].info.spider_type
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
            bounds = 0
            for worker in workers:
                bound = math.ceil(config.headroom * worker.rate * config.backlog_minutes)
                bounds += bound
                worker.idle = paced.get(worker.info.job, False)
                # what it holds counts against its bound only while something of it is due: a worker whose domains
                # all wait for their sites' next slots can fetch nothing soon, and takes work whatever it holds
                worker.room = bound if worker.idle else max(0, bound - worker.outstanding)
            busy = sum(w.room for w in workers if not w.idle)
            idle = sum(w.room for w in workers if w.idle)  # outside the window cap too: it measured the pace
            budgets[pool] = max(0, min(allowed, busy)) + idle
            self.board.room(pool, workers=len(workers), idle=sum(w.idle for w in workers),
                            held=sum(w.outstanding for w in workers), bound=bounds, budget=budgets[pool],
                            window_left=max(0, allowed))
        if expired:  # minutes that slid out of the window
            pipe = self.redis.pipeline(transaction=False)
            for spider_type, names in expired.items():
                pipe.hdel(keys.dispatched_jobs(spider_type), *sorted(set(names)))
            pipe.execute()
        return budgets

    def _waiting_for_pace(self, jobs: list[str], now: float) -> dict[str, bool]:
        """Which jobs hold only tasks waiting for their sites' next slots; read at most every PACE_CHECK_SECONDS (rounds
        run back to back while tasks move, and a worker's state changes at its sites' pace)."""
        if now - self._paced_at >= PACE_CHECK_SECONDS or set(jobs) != set(self._paced):
            self._paced, self._paced_at = waiting_for_pace(self.redis, jobs), now
        return self._paced

    # --- 3 and 4. whom, and move ----------------------------------------------------------------------------------
    def round(self, now: float) -> RoundResult:
        views = self.workers(now)
        self.reconcile(now, [w.info.job for workers in views.values() for w in workers])
        budgets = self.budgets(views, now)
        result = RoundResult(budget=dict(budgets))
        live_types = frozenset(views)
        mark = self._mark(live_types, now)
        self.board.begin(mark.notes if mark else None)
        if any(budgets.values()):
            self._scan(views, budgets, live_types, mark, now, result)
        self.board.publish(now)
        return result

    def _scan(self, views: dict[str, list[WorkerView]], budgets: dict[str, int], live_types: frozenset[str],
              mark: SkipMark | None, now: float, result: RoundResult) -> None:
        """Read ``seeds`` from the head (or past the mark) and place what has room; remember the leading run of
        tasks that cannot be placed now (master.waits)."""
        caps: dict[str, dict[str, int]] = {}
        for pool, workers in views.items():
            caps[pool] = {w.info.job: w.room for w in workers if w.room > 0}
            self._wrr[pool].update({w.info.job: w.weight for w in workers if w.room > 0})
        run = LeadingRun(mark)
        picks: list[Pick] = []
        recheck: set[str] = set()  # full domains whose count is stale: read at the end of the round
        paused = paused_crawls(self.redis)
        chunk = max(500, min(self.config.scan, 2 * self.config.batch))
        offset = 0
        while result.scanned < self.config.scan and any(budgets.values()):
            # moved, dead-lettered and parked tasks left seeds: the entries after them shifted down as many places
            gone = result.total + result.dead + result.parked
            entries = self.redis.zrangebyscore(keys.SEEDS, mark.start() if mark else "-inf", "+inf",
                                               start=offset - gone, num=chunk, withscores=True)
            if not entries:
                break
            offset += len(entries)
            letters: list[DeadLetter] = []
            to_park: list[tuple[str, str]] = []
            for raw, score in entries:
                if not any(budgets.values()):
                    break  # the rest is read again by the next round
                result.scanned += 1
                entry = self._parse(as_text(raw), float(score), live_types, now)
                if entry.letter is not None:
                    letters.append(entry.letter)
                    continue
                if entry.resolving:  # its host's address is on its way: read again by the next round
                    run.ended()
                    continue
                task, spider_type, domain = entry.task, entry.task["spider_type"], entry.domain
                if task["crawlid"] in paused:
                    to_park.append((task["crawlid"], entry.member))
                    continue
                pool = entry.pool
                if pool not in live_types:
                    run.passed(entry.score, task["crawlid"], self.board.note(task["crawlid"], NO_WORKER, spider_type))
                    continue
                if self.shares is not None and self.shares.full(domain):
                    if self.shares.stale_count(domain, now):
                        recheck.add(domain)
                    note = self.board.note(task["crawlid"], PACED, domain, held=self.shares.held(domain),
                                           quota=self.shares.quota(domain))
                    run.passed(entry.score, task["crawlid"], note, full=domain)
                    continue
                run.ended()
                job = self._wrr[pool].choose() if budgets[pool] > 0 else None
                if job is None:
                    self.board.note(task["crawlid"], BACKLOG_FULL, spider_type)
                    continue
                picks.append(Pick(entry.member, job, domain, task["crawlid"], spider_type, entry.queue_score))
                if self.shares is not None:
                    self.shares.placed(domain)
                budgets[pool] -= 1
                caps[pool][job] -= 1
                if caps[pool][job] <= 0:
                    self._wrr[pool].remove(job)
                if len(picks) >= self.config.batch:
                    self._move(picks, now, result)
                    picks = []
            self._dead_letter(letters, result)
            result.parked += park_in_seeds(self.redis, to_park) if to_park else 0
            if len(entries) < chunk:
                break
        if picks:
            self._move(picks, now, result)
        if self.shares is not None and recheck:
            self.shares.refresh(sorted(recheck), now)  # a full domain with room again is placed by the next round
        self._skip = run.mark(self.redis, live_types, now)

    def _parse(self, member: str, score: float, live_types: frozenset[str], now: float) -> Entry:
        task: dict[str, Any] = {}
        try:
            task = parse_task(member)
            pool = pool_of(task["spider_type"], task["crawlid"])
            if pool not in live_types:
                pool = task["spider_type"]  # a rule type's workers serve every crawl of the type
            if pool not in live_types:
                return Entry(member, score, task, pool=pool)
            domain, queue_score = placement(task, self.partitioner)
        except Unplaceable as exc:
            return Entry(member, score, task, letter=self._letter(member, task, exc, now))
        if domain is None:
            return Entry(member, score, task, resolving=True, pool=pool)
        return Entry(member, score, task, domain, queue_score, pool=pool)

    def _mark(self, live_types: frozenset[str], now: float) -> SkipMark | None:
        """The skip mark, if it still holds (master.waits: same live types, nothing new before it, none of its full
        domains has room again, not too old)."""
        mark, self._skip = self._skip, None
        if mark is None or not mark.holds(live_types, now):
            return None
        if int(self.redis.zcount(keys.SEEDS, "-inf", mark.score)) != mark.before:
            return None  # a task of higher priority arrived, or a stop purged some: read from the head again
        if mark.full and self.shares is not None and len(mark.full) <= FULL_RECHECK_LIMIT:
            if now - mark.checked >= REFRESH_SECONDS:
                self.shares.refresh(sorted(mark.full), now)
                mark.checked = now
            if not all(self.shares.full(domain) for domain in mark.full):
                return None  # a domain of the run has room again (read now, or at the end of the last round)
        self._skip = mark
        return mark

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


def pool_of(spider_type: str, crawlid: str = "") -> str:
    """The workers a task may go to: those of its spider type that serve its crawl (one's own spider's workers,
    ``"<type> <crawlid>"``: a spider type has no space), else those of its type that serve any crawl (rule spiders)."""
    return f"{spider_type} {crawlid}" if crawlid else spider_type
