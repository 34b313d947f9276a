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
   ``restored``; failures by reason: :mod:`messaging.counts`, ``noindex`` among them; a request one's own spider
   yielded that could not travel counts as a failed page ``untravelable: <what>``), one script per crawl,
   mirrored into ``crawl:<id>``. Tasks the politeness step dropped unfetched are counted the same way
   (:meth:`Committer.count_unfetched`: reason ``robots`` or ``blacklisted``).
7. **complete** — :meth:`frontier.client.FrontierClient.complete`: leases acknowledged and the crawls' pending counts
   released, atomically per domain; then the journal entries removed, the finisher's change log
   (``frontier.finish_hints``) and the weights' completion count. A crash anywhere leaves the task to be processed
   again, which counts as ``restored``: a page is counted exactly once; a lost change-log entry delays a crawl's end
   (the finisher re-reads its counts), never hastens it.

A task of one's own Scrapy spider (``Task.travels``) is keyed by its request's fingerprint (the project's
``REQUEST_FINGERPRINTER_CLASS``, carried in the task: :func:`fingerprint_of`) wherever a rule task is keyed by its
canonical URL — the Bloom filter, the exact counts — and a child with ``dont_filter`` is pushed without asking the
filter, as Scrapy's scheduler never asks its dupefilter about one. :meth:`Committer.push_new` pushes requests that
have no parent task (a crawl's start requests, ``engine.crawl`` calls) through the same filter and limits.
"""

from __future__ import annotations

import hashlib
import logging
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
from messaging.domains import InvalidDomain, domain_of
from messaging.scripts import lua_script, run_scripts
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
    refused: list[tuple[str, str]] = field(default_factory=list)  # (fingerprint hex, reason) of untravelable requests


@dataclass
class CommitResult:
    completed: list[Lease] = field(default_factory=list)  # acknowledged now
    pushed: int = 0  # children new in seeds
    duplicates: int = 0  # children the Bloom filter had seen
    over_limit: int = 0  # children refused by max_pages / domain_max_pages
    repushed: int = 0  # children of re-delivered tasks pushed whatever the Bloom filter said
    revisits: int = 0  # pages of revisiting crawls scheduled or rescheduled


class Committer:
    def __init__(self, redis: Any, frontier: FrontierClient, dupefilter: BatchDupeFilter,
                 catalog: CrawlCatalog) -> None:
        self.redis = redis
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
        self._settle(result.completed, list(digests.values()))
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
                by_namespace[self.dupefilter.namespace({"crawlid": task.crawlid})].append(url_fingerprint(task.url))
        for namespace, fingerprints in by_namespace.items():
            self.dupefilter.bloom(namespace).add_fingerprints(fingerprints)

    def push_new(self, tasks: Sequence[Task]) -> int:
        """Push tasks that have no parent (one's own spider's start requests, its ``engine.crawl`` calls): those new
        to their crawl's filter (every one with ``dont_filter``), within the crawl's limits; returns how many were
        new in ``seeds``."""
        by_namespace: dict[str, list[Task]] = defaultdict(list)
        new: list[Task] = []
        for task in tasks:
            if task.request.get("dont_filter"):
                new.append(task)
            else:
                by_namespace[self.dupefilter.namespace({"crawlid": task.crawlid})].append(task)
        for namespace, group in by_namespace.items():
            fingerprints = [fingerprint_of(task) for task in group]
            fresh = self.dupefilter.bloom(namespace).add_fingerprints(list(dict.fromkeys(fingerprints)))
            first = dict(zip(dict.fromkeys(fingerprints), fresh, strict=True))
            for task, fp in zip(group, fingerprints, strict=True):
                if first.pop(fp, False):  # new, and its first occurrence in the batch
                    new.append(task)
        return push_seeds(self.redis, self._within_limits(new, CommitResult())) if new else 0

    def count_refused(self, crawlid: str, refused: Sequence[tuple[str, str]]) -> None:
        """Requests without a parent task that could not travel, counted as failed pages of the crawl."""
        self._count_pages_of({crawlid: [value for fp, reason in refused for value in (fp, 0, reason, "0")]})

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
        new: list[Task] = []
        by_namespace: dict[str, list[tuple[bytes, Task | None, bool, str]]] = defaultdict(list)
        for finished in batch:
            task = finished.lease.task
            namespace = self.dupefilter.namespace({"crawlid": task.crawlid})
            if not task.request.get("dont_filter"):  # Scrapy never marks a request it need not filter
                by_namespace[namespace].append((fingerprint_of(task), None, False, ""))
            for url in finished.marks:
                by_namespace[namespace].append((url_fingerprint(url), None, False, ""))
            forced = id(finished) in redelivered
            digest = digests.get(id(finished), "")
            for kid in finished.children:
                if kid.request.get("dont_filter"):  # never asked of the filter, as in Scrapy's scheduler
                    new.append(kid)
                    continue
                by_namespace[namespace].append((fingerprint_of(kid), kid, forced, digest))
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
            if crawl is None or not crawl.running:
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
        into ``crawl:<id>``. Before the acknowledgement: counting is idempotent per URL, so a crash or a lost lease
        after it makes the page's next processing a ``restored`` one, never a page counted twice or not at all."""
        self._count_tasks([(f.lease.task, f.items, f.failure) for f in batch],
                          [(f.lease.task, f.refused) for f in batch if f.refused])

    def count_unfetched(self, tasks: Sequence[Task], reason: str) -> None:
        """Tasks the politeness step dropped unfetched (``robots``: robots.txt disallows them; ``blacklisted``),
        counted like failed pages with that reason, once per canonical URL — before their completion is recorded,
        so the crawl cannot end before they are counted."""
        self._count_tasks([(task, 0, reason) for task in tasks])

    def _count_tasks(self, counted: Sequence[tuple[Task, int, str]],
                     refused: Sequence[tuple[Task, Sequence[tuple[str, str]]]] = ()) -> None:
        args: dict[str, list[Any]] = defaultdict(list)
        for task, items, failure in counted:
            start = "1" if task.depth == 0 and not task.travels else "0"  # one's own spider has many start requests
            args[task.crawlid] += [fingerprint_of(task).hex(), items, failure, start]
        for parent, requests in refused:  # requests that could not travel: failed pages, never fetched
            args[parent.crawlid] += [value for fp, reason in requests for value in (fp, 0, reason, "0")]
        self._count_pages_of(args)

    def _count_pages_of(self, args: dict[str, list[Any]]) -> None:
        if not args:
            return
        # run_scripts: one pipeline on a plain Redis, one call per crawl on a cluster (a cluster pipeline cannot
        # carry scripts; the commit failed there after its push, and its retries pushed the children again)
        added = run_scripts(self.redis, [(self._count_pages, [keys.crawl_counted(crawlid), keys.crawl_totals(crawlid)],
                                          crawl_args) for crawlid, crawl_args in args.items()])
        pipe = self.redis.pipeline(transaction=False)
        for crawlid, (pages, items, _restored) in zip(args, added, strict=True):
            if int(pages):
                pipe.hincrby(keys.crawl(crawlid), CrawlFields.PAGES, int(pages))
            if int(items):
                pipe.hincrby(keys.crawl(crawlid), CrawlFields.ITEMS, int(items))
        pipe.execute()

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


def fingerprint_of(task: Task) -> bytes:
    """What the crawl's Bloom filter and exact counts key a task by: one's own spider's request fingerprint (carried
    in the task, ``fp``), else the canonical URL's."""
    fp = task.request.get("fp") if task.request else None
    return bytes.fromhex(fp) if fp else url_fingerprint(task.url)


def _digest(member: str) -> str:
    return hashlib.blake2b(member.encode(), digest_size=12).hexdigest()


def _domain_or_empty(url: str) -> str:
    try:
        return domain_of(url) if url else ""
    except InvalidDomain:
        return ""
