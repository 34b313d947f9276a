"""Committing finished tasks: their children into ``seeds``, then their leases acknowledged and counted.

A task is *complete* (docs/architecture.md) when its response was processed, its children are in ``seeds`` and its items
are stored. The scheduler hands finished tasks here (items already stored); :meth:`Committer.commit` settles a whole
batch of them in a few round trips, whatever its size:

1. **children owed** — :class:`spiders.worker.journal.ChildrenJournal` finds the children each page owes, in three
   round trips: the children the crawl's Bloom filter did not hold when asked (the page's *candidates*) are written
   in the children journal before they are marked, and the page owes those then new to the filter; a page committed
   again (its earlier commit cut off) owes the children its journal entry lists.
2. **limits** — ``max_pages`` / ``domain_max_pages``: one atomic call per limited crawl on ``crawl:<id>`` admits
   what still fits (``enqueued`` counts every task that ever entered ``seeds``, the start URL included).
3. **push** — one call for every admitted child (for a crawl ordered by importance, rule field ``importance``, one
   :func:`spiders.worker.importance.push_by_importance` call, which also counts every link of the batch's pages,
   seen or not), each page's only while its journal entry is there, the entry deleted in the same call.
4. **revisits** — a crawl whose rule has ``revisit`` (``frontier.revisit``): the batch's pages it revisits are
   scheduled (first fetches) or rescheduled with their outcome (revisits), in one Lua call — before the leases are
   acknowledged, so a crash in between fetches a page again rather than losing its revisit.
5. **count** — the crawls' ``pages`` and ``items`` once per canonical URL (the first processing; later ones count as
   ``restored``, or ``retried`` for ``crawlfleet retry``'s; failures by reason: :mod:`messaging.counts`, ``noindex``
   among them; a request one's own spider yielded that could not travel counts as a failed page
   ``untravelable: <what>``), one script per crawl, mirrored into ``crawl:<id>``; its verdicts go to the crawl's
   failures list (:class:`messaging.failures.FailureStore`: a failed page kept, a recovered one dropped). Tasks the
   politeness step dropped unfetched are counted the same way (:meth:`Committer.count_unfetched`: reason ``robots``
   or ``blacklisted``). A batch whose commit is tried again after this step is not counted again (this process
   remembers what it counted until the leases are acknowledged).
6. **complete** — :meth:`frontier.client.FrontierClient.complete`: leases acknowledged and the crawls' pending counts
   released, atomically per domain; then the finisher's change log (``frontier.finish_hints``) and the weights'
   completion count.

A crash (or a Redis restart) anywhere leaves the task to be processed again, which counts as ``restored``, and never
loses a child nor pushes again what was pushed (:mod:`spiders.worker.journal`). A lost change-log entry delays a
crawl's end (the finisher re-reads its counts), never hastens it.

A task of one's own Scrapy spider (``Task.travels``) is keyed by its request's fingerprint
(:func:`spiders.worker.journal.fingerprint_of`) wherever a rule task is keyed by its canonical URL — the Bloom filter,
the exact counts, the failures list — and a child with ``dont_filter`` is pushed without asking the filter, as
Scrapy's scheduler never asks its dupefilter about one. :meth:`Committer.push_new` pushes requests that have no
parent task (a crawl's start requests, ``engine.crawl`` calls) through the same journal, filter and limits.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from frontier.client import FrontierClient, Lease
from frontier.finish_hints import log_touched
from frontier.registry import record_completion
from frontier.revisit import FAILED, FETCHED, Fetched, RevisitPolicy, Schedule
from messaging import keys
from messaging.clients import as_text
from messaging.counts import listed_reason
from messaging.domains import InvalidDomain, domain_of
from messaging.failures import DROP, KEEP, Failure, FailureStore
from messaging.scripts import lua_script, run_scripts
from messaging.settings import default
from messaging.tasks import CrawlFields, Task
from spiders.dupefilter import BatchDupeFilter
from spiders.rules import DETAIL
from spiders.worker.crawls import CrawlCatalog
from spiders.worker.importance import wants_importance
from spiders.worker.journal import ChildrenJournal, fingerprint_of

logger = logging.getLogger(__name__)
LUA = Path(__file__).with_name("lua")

ADMIT = lua_script(LUA / "admit.lua")  # a limited crawl's children that still fit
COUNT = lua_script(LUA / "count.lua")  # pages and items once per canonical URL


@dataclass
class Finished:
    """A task whose response was processed and whose items are stored."""

    lease: Lease
    children: list[Task] = field(default_factory=list)  # links that passed scope, blacklist, depth and stop checks
    items: int = 0  # items stored for it
    marks: list[str] = field(default_factory=list)  # URLs to mark seen besides the task's (where a redirect ended)
    revisit: dict[str, Any] | None = None  # a revisiting crawl's outcome (spiders.middlewares.conditional)
    failure: str = ""  # why the task failed (messaging.counts.failure_reason), "" when its response was processed
    status: int | None = None  # a failure's HTTP status
    attempts: int = 1  # a failure's downloads (Scrapy's retries included)
    failed_at: float = 0.0  # Unix time of the failure
    refused: list[tuple[str, str]] = field(default_factory=list)  # (fingerprint hex, reason) of untravelable requests


@dataclass
class CommitResult:
    completed: list[Lease] = field(default_factory=list)  # acknowledged now
    pushed: int = 0  # children new in seeds
    duplicates: int = 0  # children the page did not owe: the Bloom filter had them (pushed or owed by another page)
    over_limit: int = 0  # children refused by max_pages / domain_max_pages
    repushed: int = 0  # children owed by a journal entry an earlier commit of the same task left
    revisits: int = 0  # pages of revisiting crawls scheduled or rescheduled


class Committer:
    def __init__(self, redis: Any, frontier: FrontierClient, dupefilter: BatchDupeFilter, catalog: CrawlCatalog,
                 failures: FailureStore | None = None,
                 failures_max: int = default("CRAWLFLEET_FAILURES_MAX")) -> None:
        """``failures``: the crawls' failures lists (MongoDB); without it failures are only counted."""
        self.redis = redis
        self.failures = failures
        self.failures_max = failures_max
        self._verdicts: dict[str, str] = {}  # lease member -> its count's verdict, until its lease is acknowledged
        self.frontier = frontier
        self.dupefilter = dupefilter  # DUPEFILTER_CLASS (spiders.dupefilter.BloomDupeFilter): per-crawl shared sets
        self.catalog = catalog
        self.job = frontier.job
        self._admit = ADMIT.on(redis)
        self.schedule = Schedule(redis)
        self._count_pages = COUNT.on(redis)
        self.journal = ChildrenJournal(redis, dupefilter)

    def commit(self, batch: Sequence[Finished]) -> CommitResult:
        """Settle a batch of finished tasks (see the module docstring); raises ``Fenced`` if the job was retired.
        A batch that raised is committed again as it is (the feed keeps it): every step is safe to repeat."""
        result = CommitResult()
        if not batch:
            return result
        owed = self.journal.owed(batch)
        result.repushed, result.duplicates = owed.repushed, owed.duplicates
        admitted = self._within_limits([child for _, child in owed.children], result)
        important = {crawlid for crawlid in {f.lease.task.crawlid for f in batch} if self._by_importance(crawlid)}
        result.pushed = self.journal.push(batch, owed, admitted, important)
        result.revisits = self._revisits(batch)
        self._count(batch)
        result.completed = self.frontier.complete([f.lease for f in batch])
        for finished in batch:
            self._verdicts.pop(finished.lease.member, None)
        self._settle(result.completed)
        return result

    def _by_importance(self, crawlid: str) -> bool:
        crawl = self.catalog.get(crawlid)
        return crawl is not None and wants_importance(crawl.rule)

    def mark_seen(self, tasks: Sequence[Task]) -> None:
        """Mark tasks' URLs in their crawls' dupefilter sets (start URLs, which no worker pushed; one's own spider's
        start requests were marked when they were pushed)."""
        by_namespace: dict[str, list[bytes]] = defaultdict(list)
        for task in tasks:
            if not task.travels:
                by_namespace[self._namespace(task.crawlid)].append(fingerprint_of(task))
        for namespace, fingerprints in by_namespace.items():
            self.dupefilter.bloom(namespace).add_fingerprints(fingerprints)

    def push_new(self, name: str, tasks: Sequence[Task]) -> int:
        """Push tasks that have no parent (one's own spider's start requests, its ``engine.crawl`` calls): those new
        to their crawl's filter (every one with ``dont_filter``), within the crawl's limits, through the children
        journal under ``name`` (:meth:`ChildrenJournal.loose`: pushing again under the same name after an
        interruption pushes what the first attempt marked and did not push). Returns how many were new in ``seeds``."""
        if not tasks:
            return 0
        owed = self.journal.loose(name, tasks)
        admitted = self._within_limits([child for _, child in owed.children], CommitResult())
        return self.journal.push((), owed, admitted, set())

    def count_refused(self, crawlid: str, refused: Sequence[tuple[str, str]]) -> None:
        """Requests without a parent task that could not travel, counted as failed pages of the crawl."""
        self._count_rows({crawlid: [_refused_row(fp, reason) for fp, reason in refused]})

    def _namespace(self, crawlid: str) -> str:
        return self.dupefilter.namespace({"crawlid": crawlid})

    # --- steps ----------------------------------------------------------------------------------------------------
    def _within_limits(self, children: list[Task], result: CommitResult) -> list[Task]:
        by_crawl: dict[str, list[Task]] = defaultdict(list)
        for child in children:
            by_crawl[child.crawlid].append(child)
        admitted: list[Task] = []
        unlimited: Counter[str] = Counter()
        for crawlid, tasks in by_crawl.items():
            crawl = self.catalog.get(crawlid)
            if crawl is None or (crawl.max_pages is None and crawl.domain_max_pages is None):
                admitted += tasks
                unlimited[crawlid] += len(tasks)
                continue
            by_domain: dict[str, list[Task]] = defaultdict(list)
            for task in tasks:
                by_domain[task.domain].append(task)
            args: list[Any] = [crawl.max_pages or "", crawl.domain_max_pages or "", _domain_or_empty(crawl.url)]
            for domain, domain_tasks in by_domain.items():
                args += [domain, len(domain_tasks)]
            allowed = self._admit(keys=[keys.crawl(crawlid)], args=args)
            for (_, domain_tasks), n in zip(by_domain.items(), allowed, strict=True):
                admitted += domain_tasks[:int(n)]
                result.over_limit += len(domain_tasks) - int(n)
        if unlimited:
            pipe = self.redis.pipeline(transaction=False)
            for crawlid, n in unlimited.items():
                pipe.hincrby(keys.crawl(crawlid), CrawlFields.ENQUEUED, n)
            pipe.execute()
        return admitted

    def _revisits(self, batch: Sequence[Finished]) -> int:
        policies: dict[str, RevisitPolicy] = {}
        fetched: list[Fetched] = []
        for finished in batch:
            task = finished.lease.task
            crawl = self.catalog.get(task.crawlid)
            if crawl is None or not crawl.live:
                continue  # a stopped crawl's schedule is purged by the master: nothing to add
            policy = policies.get(task.crawlid) or RevisitPolicy.from_rule(crawl.rule)
            if policy is None:
                continue
            policies[task.crawlid] = policy
            seen = finished.revisit or {}
            outcome = seen.get("outcome") or FAILED
            if not task.revisit:  # a first fetch: scheduled when the rule's `pages` chooses it
                list_page = int(seen.get("links") or 0) > 0 or (task.spider_type == "list" and task.callback != DETAIL)
                if outcome != FETCHED or not policy.selects(task.url, list_page):
                    continue
            fetched.append(Fetched(task, outcome, seen.get("etag") or "", seen.get("last_modified") or "",
                                   seen.get("digest") or ""))
        if fetched:
            self.schedule.record(fetched, policies)
        return len(fetched)

    def _count(self, batch: Sequence[Finished]) -> None:
        """Pages and items once per canonical URL (``spiders/worker/lua/count.lua``, one call per crawl), mirrored
        into ``crawl:<id>``, and the failures lists as the count says. Before the acknowledgement: counting is
        idempotent per URL, so a crash or a lost lease after it makes the page's next processing a ``restored`` one,
        never a page counted twice or not at all; a commit this process tries again does not count again."""
        fresh = [f for f in batch if f.lease.member not in self._verdicts]
        verdicts = self._count_tasks([(f.lease.task, f.items, f.failure) for f in fresh],
                                     [(f.lease.task.crawlid, f.refused) for f in fresh if f.refused])
        self._verdicts.update((f.lease.member, verdict) for f, verdict in zip(fresh, verdicts, strict=True))
        self._record_failures(batch)

    def _record_failures(self, batch: Sequence[Finished]) -> None:
        """A failed page the count keeps in the list is written (upserted); a recovered one, or any retried page
        that worked, leaves it (a document a crash left behind included)."""
        if self.failures is None:
            return
        keep: dict[str, list[Failure]] = defaultdict(list)
        drop: dict[str, list[str]] = defaultdict(list)
        for finished in batch:
            task, verdict = finished.lease.task, self._verdicts.get(finished.lease.member, "")
            fingerprint = fingerprint_of(task).hex()
            if verdict == KEEP:
                keep[task.crawlid].append(Failure(fingerprint, task, finished.failure, finished.status,
                                                  finished.attempts, finished.failed_at or time.time(), self.job))
            elif verdict == DROP or (task.retry and not finished.failure):
                drop[task.crawlid].append(fingerprint)
        for crawlid in {*keep, *drop}:
            self.failures.apply(crawlid, keep.get(crawlid, []), drop.get(crawlid, []))

    def count_unfetched(self, tasks: Sequence[Task], reason: str) -> None:
        """Tasks the politeness step dropped unfetched (``robots``: robots.txt disallows them; ``blacklisted``),
        counted like failed pages with that reason, once per canonical URL — before their completion is recorded,
        so the crawl cannot end before they are counted."""
        self._count_tasks([(task, 0, reason) for task in tasks])

    def _count_tasks(self, counted: Sequence[tuple[Task, int, str]],
                     refused: Sequence[tuple[str, Sequence[tuple[str, str]]]] = ()) -> list[str]:
        """Count the tasks (and, after them, the requests their pages yielded that could not travel: failed pages,
        never fetched); returns each task's verdict for the failures list (``keep``, ``drop`` or '')."""
        rows: dict[str, list[list[Any]]] = defaultdict(list)
        order: dict[str, list[int]] = defaultdict(list)
        for n, (task, items, failure) in enumerate(counted):
            start = task.depth == 0 and not task.travels  # one's own spider has many start requests, no start URL
            rows[task.crawlid].append([fingerprint_of(task).hex(), items, failure, "1" if start else "0",
                                       "1" if listed_reason(failure) else "0", task.retry])
            order[task.crawlid].append(n)
        for crawlid, requests in refused:
            rows[crawlid] += [_refused_row(fp, reason) for fp, reason in requests]
        verdicts = [""] * len(counted)
        for crawlid, replies in self._count_rows(rows).items():
            for n, verdict in zip(order[crawlid], replies, strict=False):  # the refused rows' come last: none kept
                verdicts[n] = verdict
        return verdicts

    def _count_rows(self, rows: dict[str, list[list[Any]]]) -> dict[str, list[str]]:
        """``count.lua`` for each crawl's rows, its pages and items mirrored into ``crawl:<id>``; each row's
        verdict."""
        rows = {crawlid: crawl_rows for crawlid, crawl_rows in rows.items() if crawl_rows}
        if not rows:
            return {}
        # run_scripts: one pipeline on a plain Redis, one call per crawl on a cluster (a cluster pipeline cannot
        # carry scripts; the commit failed there after its push, and its retries pushed the children again)
        added = run_scripts(self.redis, [(self._count_pages, [keys.crawl_counted(crawlid), keys.crawl_totals(crawlid)],
                                          [self.failures_max, *(value for row in crawl_rows for value in row)])
                                         for crawlid, crawl_rows in rows.items()])
        verdicts: dict[str, list[str]] = {}
        pipe = self.redis.pipeline(transaction=False)
        for crawlid, reply in zip(rows, added, strict=True):
            pages, items = int(reply[0]), int(reply[1])
            verdicts[crawlid] = [as_text(verdict) for verdict in reply[4:]]
            if pages:
                pipe.hincrby(keys.crawl(crawlid), CrawlFields.PAGES, pages)
            if items:
                pipe.hincrby(keys.crawl(crawlid), CrawlFields.ITEMS, items)
        pipe.execute()
        return verdicts

    def _settle(self, completed: list[Lease]) -> None:
        """After the acknowledgement: the finisher's change log; the weights' completions counted."""
        if not completed:
            return
        pipe = self.redis.pipeline(transaction=False)
        log_touched(pipe, ((lease.domain, lease.task.crawlid) for lease in completed))  # the finisher looks again
        pipe.execute()
        record_completion(self.redis, self.job, len(completed))


def _refused_row(fingerprint: str, reason: str) -> list[Any]:
    """A request that could not travel, as ``count.lua`` counts it: a failed page, never fetched, not listed (there is
    no task to retry)."""
    return [fingerprint, 0, reason, "0", "0", 0]


def _domain_or_empty(url: str) -> str:
    try:
        return domain_of(url) if url else ""
    except InvalidDomain:
        return ""
