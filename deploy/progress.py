"""The demo's live progress view: what the fleet is doing, read from Redis and MongoDB once a second.

Two halves, so that the rendering is tested without services:

- :func:`collect` reads one :class:`Snapshot`: per crawl its pages (``crawl:<id>`` ``pages``, counted by the workers
  as tasks complete), its items (documents in its MongoDB collection, named after the crawl id) and its tasks still
  pending (the per-crawl counts the master's finisher reads: ``pending:{seeds}`` and ``pending:{<domain>}``); the
  depth of ``seeds``; per worker its queued and leased tasks (``<job>:domains``, then ``<job>:{<domain>}:queue`` and
  ``:inflight``), its completions and its weight as the master computes it (``frontier.weights.measure``: completions
  per busy minute over the window; none until the worker has a whole busy minute behind it).
- :func:`progress_view` and :func:`summary_tables` turn snapshots into rich tables; :class:`RateMeter` turns a
  growing total into a per-minute rate over a sliding window (injectable times).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from frontier.client import FrontierReader
from frontier.registry import WorkerRegistry
from frontier.weights import measure
from messaging import keys
from messaging.clients import as_text
from messaging.clock import RedisClock

RATE_WINDOW_SECONDS = 60.0


@dataclass(frozen=True)
class CrawlProgress:
    crawlid: str
    spider_type: str
    url: str
    state: str  # the crawl hash's state (running, finished, stopped), or "waiting" before the monitor took it
    pages: int  # responses processed
    items: int | None  # documents in its MongoDB collection; None when MongoDB did not answer
    pending: int  # tasks in seeds, queues or leases
    seconds: float  # since it was submitted, until its crawl_finished event
    finished: bool  # its crawl_finished event arrived

    @property
    def pages_per_minute(self) -> float:
        return self.pages / self.seconds * 60 if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class WorkerProgress:
    job: str
    spider_type: str
    registered: bool  # in the ``workers`` registry (heartbeat not expired, not retired)
    queued: int
    leased: int
    pages: int  # completions since the demo began
    weight: float | None  # the master's weight: completions per busy minute; None without history


@dataclass(frozen=True)
class Snapshot:
    seconds: float  # since the demo began
    seeds: int
    pages_per_minute: float | None  # every worker together, over the last minute
    crawls: tuple[CrawlProgress, ...]
    workers: tuple[WorkerProgress, ...]

    @property
    def pages(self) -> int:
        return sum(worker.pages for worker in self.workers)


@dataclass
class SubmittedCrawl:
    """A crawl the demo sent, as the demo sees it (times: ``time.monotonic()``)."""

    crawlid: str
    spider_type: str
    url: str
    submitted: float
    finished: float | None = None  # when its crawl_finished event arrived
    event: dict[str, Any] | None = None


class RateMeter:
    """A per-minute rate of a growing total over a sliding window of samples."""

    def __init__(self, window: float = RATE_WINDOW_SECONDS) -> None:
        self.window = window
        self.samples: deque[tuple[float, int]] = deque()

    def add(self, now: float, total: int) -> float | None:
        """Record ``total`` at ``now``; returns the rate per minute since the oldest sample still in the window
        (None until two samples are apart)."""
        self.samples.append((now, total))
        while len(self.samples) > 2 and self.samples[1][0] <= now - self.window:
            self.samples.popleft()
        first_time, first_total = self.samples[0]
        if now <= first_time:
            return None
        return (total - first_total) / (now - first_time) * 60


# --- reading -----------------------------------------------------------------------------------------------------
def collect(redis: Any, mongo_db: Any, crawls: Sequence[SubmittedCrawl], jobs: Mapping[str, str], now: float,
            began: float, baseline: Mapping[str, int], meter: RateMeter, window_minutes: int) -> Snapshot:
    """One snapshot. ``jobs``: job -> spider type (the fleet's workers); ``baseline``: each job's lifetime
    completions when the demo began; ``now``/``began``: ``time.monotonic()`` values."""
    workers = _workers(redis, jobs, baseline, window_minutes)
    rate = meter.add(now, sum(worker.pages for worker in workers))
    crawl_progress = tuple(_crawl(redis, mongo_db, crawl, now) for crawl in crawls)
    return Snapshot(now - began, int(redis.zcard(keys.SEEDS)), rate, crawl_progress, workers)


def lifetime_completions(redis: Any, jobs: Sequence[str]) -> dict[str, int]:
    """Each job's lifetime completions (``done``): the baseline the demo's per-worker pages count from."""
    return {job: values[0] for job, values in WorkerRegistry(redis).activity(jobs, ["done"]).items()}


def _crawl(redis: Any, mongo_db: Any, crawl: SubmittedCrawl, now: float) -> CrawlProgress:
    fields = {as_text(k): as_text(v) for k, v in redis.hgetall(keys.crawl(crawl.crawlid)).items()}
    domains = [as_text(domain) for domain in redis.smembers(keys.crawl_domains(crawl.crawlid))]
    pipe = redis.pipeline(transaction=False)
    pipe.hget(keys.PENDING_SEEDS, crawl.crawlid)
    for domain in domains:
        pipe.hget(keys.pending_domain(domain), crawl.crawlid)
    pending = sum(int(value or 0) for value in pipe.execute())
    end = crawl.finished if crawl.finished is not None else now
    return CrawlProgress(
        crawlid=crawl.crawlid, spider_type=crawl.spider_type, url=crawl.url,
        state=fields.get("state") or "waiting", pages=int(float(fields.get("pages") or 0)),
        items=count_items(mongo_db, crawl.crawlid), pending=pending, seconds=end - crawl.submitted,
        finished=crawl.finished is not None,
    )  # fmt: skip


def count_items(mongo_db: Any, crawlid: str) -> int | None:
    """Documents in the crawl's collection; None when MongoDB does not answer."""
    try:
        return int(mongo_db[crawlid].count_documents({}))
    except Exception:  # MongoDB away or slow: the view shows "?" and tries again next second
        return None


def _workers(redis: Any, jobs: Mapping[str, str], baseline: Mapping[str, int],
             window_minutes: int) -> tuple[WorkerProgress, ...]:
    registry = WorkerRegistry(redis)
    live = registry.live()
    infos = registry.infos(jobs)
    done = lifetime_completions(redis, list(jobs))
    started = {job: info.started for job, info in infos.items()}
    rates = measure(registry, started, RedisClock(redis).now(), window_minutes) if started else {}
    depths = FrontierReader(redis).queue_depths(list(jobs))
    return tuple(
        WorkerProgress(job=job, spider_type=spider, registered=job in live, queued=depths[job][0],
                       leased=depths[job][1], pages=max(0, done.get(job, 0) - baseline.get(job, 0)),
                       weight=rates[job].rate if job in rates else None)
        for job, spider in jobs.items()
    )  # fmt: skip


# --- rendering (pure) --------------------------------------------------------------------------------------------
def _number(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}:{rest:02d}"


def crawls_table(snapshot: Snapshot) -> Table:
    table = Table(title="crawls", title_justify="left")
    for column in ("crawl", "spider", "state", "pages", "items", "pending", "time"):
        table.add_column(column, justify="left" if column in ("crawl", "spider", "state") else "right",
                         overflow="fold")
    for crawl in snapshot.crawls:
        state = f"[green]{crawl.state}[/]" if crawl.finished else crawl.state
        table.add_row(crawl.crawlid, crawl.spider_type, state, _number(crawl.pages), _number(crawl.items),
                      _number(crawl.pending), _duration(crawl.seconds))
    return table


def workers_table(snapshot: Snapshot) -> Table:
    table = Table(title="workers", title_justify="left")
    for column in ("job", "spider", "registered", "queued", "leased", "pages", "weight /min"):
        table.add_column(column, justify="left" if column in ("job", "spider", "registered") else "right",
                         overflow="fold")
    for worker in snapshot.workers:
        table.add_row(worker.job, worker.spider_type, "yes" if worker.registered else "[red]no[/]",
                      _number(worker.queued), _number(worker.leased), _number(worker.pages),
                      "new" if worker.weight is None else _number(worker.weight, 1))
    return table


def headline(snapshot: Snapshot) -> Text:
    rate = _number(snapshot.pages_per_minute, 1)
    return Text(f"{_duration(snapshot.seconds)} elapsed   {rate} pages/min   {snapshot.pages:,} pages   "
                f"seeds {snapshot.seeds:,}")


def progress_view(snapshot: Snapshot) -> Group:
    """The live view: a headline, then the crawls and the workers."""
    return Group(headline(snapshot), crawls_table(snapshot), workers_table(snapshot))


def progress_line(snapshot: Snapshot) -> str:
    """One plain line, for output that is not a terminal (logs, CI)."""
    crawls = ", ".join(f"{c.crawlid} {c.state} {c.pages}p/{_number(c.items)}i" for c in snapshot.crawls)
    return f"{headline(snapshot).plain}   {crawls}"


def summary_tables(snapshot: Snapshot) -> tuple[Table, Table]:
    """Per crawl: pages, items, duration, pages/min; per worker: pages and share of all pages."""
    crawls = Table(title="crawls", title_justify="left")
    for column in ("crawl", "spider", "finished", "pages", "items", "duration", "pages/min"):
        crawls.add_column(column, justify="left" if column in ("crawl", "spider", "finished") else "right",
                              overflow="fold")
    for crawl in snapshot.crawls:
        crawls.add_row(crawl.crawlid, crawl.spider_type, "yes" if crawl.finished else "[red]no[/]",
                       _number(crawl.pages), _number(crawl.items), _duration(crawl.seconds),
                       _number(crawl.pages_per_minute, 1))
    workers = Table(title="workers", title_justify="left")
    for column in ("job", "spider", "pages", "share"):
        workers.add_column(column, justify="left" if column in ("job", "spider") else "right",
                               overflow="fold")
    total = snapshot.pages
    for worker in snapshot.workers:
        share = f"{worker.pages / total:.0%}" if total else "–"
        workers.add_row(worker.job, worker.spider_type, _number(worker.pages), share)
    return crawls, workers


def diagnose(crawl: CrawlProgress, workers: Sequence[WorkerProgress], dead: Sequence[str] = ()) -> str:
    """Why ``crawl`` has not finished, as far as the last snapshot tells; ``dead``: fleet processes that died."""
    own = [worker for worker in workers if worker.spider_type == crawl.spider_type]
    if crawl.state == "waiting":
        reason = "no Kafka monitor stored it (no crawl:<id> in Redis): is kafka-monitor alive? see its log"
    elif crawl.state == "stopped":
        reason = "it was stopped"
    elif crawl.state == "finished":
        reason = "Redis says finished, but its crawl_finished event was not read from the outbound topic"
    elif not any(worker.registered for worker in own):
        reason = f"no {crawl.spider_type} worker is registered: its {crawl.pending:,} tasks wait in seeds"
    elif crawl.pending:
        leased = sum(worker.leased for worker in own)
        reason = (f"{crawl.pending:,} tasks still pending ({leased:,} leased by its workers) after {crawl.pages:,} "
                  f"pages: it needs more time than the timeout (a Crawl-delay or rate limit bounds its pace)")
    else:
        reason = ("no task is pending, yet no crawl_finished event came: the leading master's finisher has not "
                  "declared it (see the master logs)")
    if dead:
        reason += f"; dead fleet processes: {', '.join(dead)}"
    return f"{crawl.crawlid} did not finish: {reason}"
