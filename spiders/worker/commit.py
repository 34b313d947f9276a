"""Committing finished tasks: their children into ``seeds``, then their leases acknowledged and counted.

A task is *complete* (docs/architecture.md) when its response was processed, its children are in ``seeds`` and its items
are stored. The scheduler hands finished tasks here (items already stored); :meth:`Committer.commit` settles a whole
batch of them in a few round trips, whatever its size:

1. **journal** — ``ZADD NX`` of each parent's digest into ``children:{seeds}:journal`` (score: now). A digest that
   is already there means an earlier processing of the same task stopped between marking its children in the Bloom
   filter and pushing them: that parent re-pushes *all* its children, seen or not, so a crash never loses them.
   A digest whose Bloom step this process completed is its own retry of a commit that Redis interrupted later (the
   batch is kept and committed again), not a re-delivery: it pushes the children that were new to the filter at
   its first attempt (remembered in memory) and those new now, nothing else. One interrupted in the middle of its
   Bloom step counts as re-delivered (some children may be marked, none recorded). (Taking that retry
   for a re-delivery once made one Redis kill -9 re-push every link of the parents in flight — a documentation
   site's pages each link every page, with their parent as ``referer``, so each page was fetched again per parent:
   2,858 pages for 526.)
2. **Bloom** — one batch call per crawl filter: the parents' own URLs first (a crawl's start URL is marked when it
   is fetched), then every child; a child goes on only if it is new (or its parent is re-delivered).
3. **limits** — ``max_pages`` / ``domain_max_pages``: one atomic call per limited crawl on ``crawl:<id>`` admits
   what still fits (``enqueued`` counts every task that ever entered ``seeds``, the start URL included).
4. **push** — one :func:`messaging.tasks.push_seeds` call for every admitted child; for a crawl ordered by importance
   (rule field ``importance``), one :func:`spiders.worker.importance.push_by_importance` call instead, which also
   counts every link of the batch's pages, seen or not (:mod:`spiders.worker.importance`).
5. **revisits** — a crawl whose rule has ``revisit`` (``frontier.revisit``): the batch's pages it revisits are
   scheduled (first fetches) or rescheduled with their outcome (revisits), in one Lua call — before the leases are
   acknowledged, so a crash in between fetches a page again rather than losing its revisit.
6. **count** — the crawls' ``pages`` and ``items`` once per canonical URL (the first processing; later ones count as
   ``restored``, or ``retried`` for ``crawlfleet retry``'s; failures by reason: :mod:`messaging.counts`, ``noindex``
   among them), one script per crawl, mirrored into ``crawl:<id>``; its verdicts go to the crawl's failures list
   (:class:`messaging.failures.FailureStore`: a failed page kept, a recovered one dropped). Tasks the politeness
   step dropped unfetched are counted the same way (:meth:`Committer.count_unfetched`: reason ``robots`` or
   ``blacklisted``). A batch whose commit is tried again after this step is not counted again (this process
   remembers what it counted until the leases are acknowledged).
7. **complete** — :meth:`frontier.client.FrontierClient.complete`: leases acknowledged and the crawls' pending counts
   released, atomically per domain; then the journal entries removed, the finisher's change log
   (``frontier.finish_hints``) and the weights' completion count. A crash anywhere leaves the task to be processed
   again, which counts as ``restored``: a page is counted exactly once; a lost change-log entry delays a crawl's end
   (the finisher re-reads its counts), never hastens it.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from frontier.bloom import url_fingerprint
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
from messaging.tasks import CrawlFields, Task, push_seeds
from spiders.dupefilter import BatchDupeFilter
from spiders.rules import DETAIL
from spiders.worker.crawls import CrawlCatalog
from spiders.worker.importance import Link, push_by_importance, wants_importance

logger = logging.getLogger(__name__)
JOURNAL_KEEP_SECONDS = 86400  # journal entries older than this belong to tasks long since redone

ADMIT = lua_script(Path(__file__).with_name("lua") / "admit.lua")  # a limited crawl's children that still fit
COUNT = lua_script(Path(__file__).with_name("lua") / "count.lua")  # pages and items once per canonical URL


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


@dataclass
class CommitResult:
    completed: list[Lease] = field(default_factory=list)  # acknowledged now
    pushed: int = 0  # children new in seeds
    duplicates: int = 0  # children the Bloom filter had seen
    over_limit: int = 0  # children refused by max_pages / domain_max_pages
    repushed: int = 0  # children of re-delivered tasks pushed whatever the Bloom filter said
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
        # parent digest -> its children that were new to the Bloom filter, recorded once this process's Bloom step
        # for the parent completed. Finding such a parent's journal entry again is this process's own retry of a
        # commit that Redis interrupted later on: it owes exactly these pushes. A parent whose Bloom step did not
        # complete (Redis died in the middle of it) may have some children marked and none recorded: it is treated
        # as re-delivered and pushes all of them.
        self._owed: dict[str, set[bytes]] = {}

    def commit(self, batch: Sequence[Finished], now: float) -> CommitResult:
        """Settle a batch of finished tasks (see the module docstring); raises ``Fenced`` if the job was retired."""
        result = CommitResult()
        if not batch:
            return result
        digests = {id(f): _digest(f.lease.member) for f in batch if f.children}
        redelivered = self._journal(batch, digests, now)
        children = self._new_children(batch, redelivered, result, digests)
        admitted = self._within_limits(children, result)
        important = {crawlid for crawlid in {f.lease.task.crawlid for f in batch} if self._by_importance(crawlid)}
        if important:  # their links are counted and their new URLs pushed by importance, in one call
            links, new = _importance_links(batch, admitted, important)
            admitted = [task for task in admitted if task.crawlid not in important]
            result.pushed += push_by_importance(self.redis, links, new).pushed
        if admitted:
            result.pushed += push_seeds(self.redis, admitted)
        result.revisits = self._revisits(batch)
        self._count(batch)
        result.completed = self.frontier.complete([f.lease for f in batch])
        for finished in batch:
            self._verdicts.pop(finished.lease.member, None)
        self._settle(result.completed, list(digests.values()))
        return result

    def _by_importance(self, crawlid: str) -> bool:
        crawl = self.catalog.get(crawlid)
        return crawl is not None and wants_importance(crawl.rule)

    def mark_seen(self, tasks: Sequence[Task]) -> None:
        """Mark tasks' URLs in their crawls' dupefilter sets (start URLs, which no worker pushed)."""
        by_namespace: dict[str, list[bytes]] = defaultdict(list)
        for task in tasks:
            by_namespace[self.dupefilter.namespace({"crawlid": task.crawlid})].append(url_fingerprint(task.url))
        for namespace, fingerprints in by_namespace.items():
            self.dupefilter.bloom(namespace).add_fingerprints(fingerprints)

    # --- steps ----------------------------------------------------------------------------------------------------
    def _journal(self, batch: Sequence[Finished], digests: dict[int, str], now: float) -> set[int]:
        if not digests:
            return set()
        pipe = self.redis.pipeline(transaction=False)
        for digest in digests.values():
            pipe.zadd(keys.CHILDREN_JOURNAL, {digest: now}, nx=True)
        pipe.zremrangebyscore(keys.CHILDREN_JOURNAL, "-inf", now - JOURNAL_KEEP_SECONDS)
        added = pipe.execute()[:-1]
        redelivered = {key for key, new in zip(digests, added, strict=True)
                       if not int(new) and digests[key] not in self._owed}
        if redelivered:
            logger.info("%d re-delivered tasks push all their children again", len(redelivered))
        return redelivered

    def _new_children(self, batch: Sequence[Finished], redelivered: set[int], result: CommitResult,
                      digests: dict[int, str] | None = None) -> list[Task]:
        """**Where dedup is asked of a page's links**: one batch per crawl's set, the pages' own URLs first; a child
        goes on when it is new (or its parent is re-delivered, or this process owes it: the module docstring)."""
        digests = digests or {}
        by_namespace: dict[str, list[tuple[bytes, Task | None, bool, str]]] = defaultdict(list)
        for finished in batch:
            task = finished.lease.task
            namespace = self.dupefilter.namespace({"crawlid": task.crawlid})
            for url in [task.url, *finished.marks]:
                by_namespace[namespace].append((url_fingerprint(url), None, False, ""))
            forced = id(finished) in redelivered
            digest = digests.get(id(finished), "")
            for kid in finished.children:
                by_namespace[namespace].append((url_fingerprint(kid.url), kid, forced, digest))
        new: list[Task] = []
        for namespace, entries in by_namespace.items():
            unique = list(dict.fromkeys(fp for fp, _, _, _ in entries))
            fresh = dict(zip(unique, self.dupefilter.bloom(namespace).add_fingerprints(unique), strict=True))
            for _, child, _, digest in entries:
                if child is not None and digest:
                    self._owed.setdefault(digest, set())  # this parent's Bloom step is complete
            taken: set[bytes] = set()
            for fp, child, forced, digest in entries:
                if child is None:
                    continue
                # new to the filter now, or new to it when this process's interrupted attempt marked it
                owed = fresh.get(fp) or fp in self._owed.get(digest, ())
                if owed and digest:
                    self._owed[digest].add(fp)
                if forced:
                    new.append(child)
                    result.repushed += 1
                elif owed and fp not in taken:
                    taken.add(fp)
                    new.append(child)
                else:
                    result.duplicates += 1
        return new

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
        verdicts = self._count_tasks([(f.lease.task, f.items, f.failure) for f in fresh])
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
            fingerprint = url_fingerprint(task.url).hex()
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

    def _count_tasks(self, counted: Sequence[tuple[Task, int, str]]) -> list[str]:
        """Count the tasks; returns each one's verdict for the failures list (``keep``, ``drop`` or '')."""
        args: dict[str, list[Any]] = defaultdict(list)
        order: dict[str, list[int]] = defaultdict(list)
        for n, (task, items, failure) in enumerate(counted):
            args[task.crawlid] += [url_fingerprint(task.url).hex(), items, failure, "1" if task.depth == 0 else "0",
                                   "1" if listed_reason(failure) else "0", task.retry]
            order[task.crawlid].append(n)
        if not args:
            return []
        # run_scripts: one pipeline on a plain Redis, one call per crawl on a cluster (a cluster pipeline cannot
        # carry scripts; the commit failed there after its push, and its retries pushed the children again)
        added = run_scripts(self.redis, [(self._count_pages, [keys.crawl_counted(crawlid), keys.crawl_totals(crawlid)],
                                          [self.failures_max, *crawl_args]) for crawlid, crawl_args in args.items()])
        verdicts = [""] * len(counted)
        pipe = self.redis.pipeline(transaction=False)
        for crawlid, reply in zip(args, added, strict=True):
            pages, items = int(reply[0]), int(reply[1])
            for n, verdict in zip(order[crawlid], reply[4:], strict=True):
                verdicts[n] = as_text(verdict)
            if pages:
                pipe.hincrby(keys.crawl(crawlid), CrawlFields.PAGES, pages)
            if items:
                pipe.hincrby(keys.crawl(crawlid), CrawlFields.ITEMS, items)
        pipe.execute()
        return verdicts

    def _settle(self, completed: list[Lease], digests: list[str]) -> None:
        """After the acknowledgement: the journal entries removed and the finisher's change log, in one pipeline;
        the weights' completions counted."""
        pipe = self.redis.pipeline(transaction=False)
        if digests:
            pipe.zrem(keys.CHILDREN_JOURNAL, *digests)
        log_touched(pipe, ((lease.domain, lease.task.crawlid) for lease in completed))  # the finisher looks again
        pipe.execute()
        for digest in digests:
            self._owed.pop(digest, None)
        if completed:
            record_completion(self.redis, self.job, len(completed))


def _importance_links(batch: Sequence[Finished], admitted: list[Task],
                      important: set[str]) -> tuple[list[Link], list[tuple[str, Task]]]:
    """Each page's distinct links (every one counts, seen or not) and the admitted new URLs, of importance crawls."""
    links: list[Link] = []
    for finished in batch:
        crawlid = finished.lease.task.crawlid
        if crawlid in important:
            fingerprints = dict.fromkeys(url_fingerprint(child.url).hex() for child in finished.children)
            parent = url_fingerprint(finished.lease.task.url).hex()
            links += [Link(crawlid, fingerprint, parent, len(fingerprints)) for fingerprint in fingerprints]
    new = [(url_fingerprint(task.url).hex(), task) for task in admitted if task.crawlid in important]
    return links, new


def _digest(member: str) -> str:
    return hashlib.blake2b(member.encode(), digest_size=12).hexdigest()


def _domain_or_empty(url: str) -> str:
    try:
        return domain_of(url) if url else ""
    except InvalidDomain:
        return ""
