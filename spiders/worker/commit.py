"""Committing finished tasks: their children into ``seeds``, then their leases acknowledged and counted.

A task is *complete* (docs/architecture.md) when its response was processed, its children are in ``seeds`` and its items
are stored. The scheduler hands finished tasks here (items already stored); :meth:`Committer.commit` settles a whole
batch of them in a few round trips, whatever its size:

1. **journal** — ``ZADD NX`` of each parent's digest into ``children:{seeds}:journal`` (score: now). A digest that
   is already there means an earlier processing of the same task stopped between marking its children in the Bloom
   filter and pushing them: that parent re-pushes *all* its children, seen or not, so a crash never loses them.
2. **Bloom** — one batch call per crawl filter: the parents' own URLs first (a crawl's start URL is marked when it
   is fetched), then every child; a child goes on only if it is new (or its parent is re-delivered).
3. **limits** — ``max_pages`` / ``domain_max_pages``: one atomic call per limited crawl on ``crawl:<id>`` admits
   what still fits (``enqueued`` counts every task that ever entered ``seeds``, the start URL included).
4. **push** — one :func:`messaging.tasks.push_seeds` call for every admitted child.
5. **revisits** — a crawl whose rule has ``revisit`` (``frontier.revisit``): the batch's pages it revisits are
   scheduled (first fetches) or rescheduled with their outcome (revisits), in one Lua call — before the leases are
   acknowledged, so a crash in between fetches a page again rather than losing its revisit.
6. **complete** — :meth:`frontier.politeness.Politeness.complete`: leases acknowledged and the crawls' pending counts
   released, atomically per domain; then the weights' completion count, the crawls' ``pages`` and ``items``, and
   the journal entries removed, in one pipeline. A crash between 6's two halves loses a few weight counts, never
   a crawl's end.
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
from frontier.politeness import Lease, Politeness
from frontier.registry import record_completion
from frontier.revisit import FAILED, FETCHED, Fetched, RevisitPolicy, Schedule
from messaging import keys
from messaging.domains import InvalidDomain, domain_of
from messaging.scripts import lua_source
from messaging.tasks import CrawlFields, Task, push_seeds
from spiders.rules import DETAIL
from spiders.worker.crawls import CrawlCatalog

logger = logging.getLogger(__name__)
JOURNAL_KEEP_SECONDS = 86400  # journal entries older than this belong to tasks long since redone

ADMIT_LUA = Path(__file__).with_name("lua") / "admit.lua"


@dataclass
class Finished:
    """A task whose response was processed and whose items are stored."""

    lease: Lease
    children: list[Task] = field(default_factory=list)  # links that passed scope, blacklist, depth and stop checks
    items: int = 0  # items stored for it
    marks: list[str] = field(default_factory=list)  # URLs to mark seen besides the task's (where a redirect ended)
    revisit: dict[str, Any] | None = None  # a revisiting crawl's outcome (spiders.middlewares.conditional)


@dataclass
class CommitResult:
    completed: list[Lease] = field(default_factory=list)  # acknowledged now
    pushed: int = 0  # children new in seeds
    duplicates: int = 0  # children the Bloom filter had seen
    over_limit: int = 0  # children refused by max_pages / domain_max_pages
    repushed: int = 0  # children of re-delivered tasks pushed whatever the Bloom filter said
    revisits: int = 0  # pages of revisiting crawls scheduled or rescheduled


class Committer:
    def __init__(self, redis: Any, politeness: Politeness, dupefilter: Any, catalog: CrawlCatalog) -> None:
        self.redis = redis
        self.politeness = politeness
        self.dupefilter = dupefilter  # spiders.dupefilter.BloomDupeFilter: its per-crawl filters
        self.catalog = catalog
        self.job = politeness.job
        self._admit = redis.register_script(lua_source(ADMIT_LUA))
        self.schedule = Schedule(redis)

    def commit(self, batch: Sequence[Finished], now: float) -> CommitResult:
        """Settle a batch of finished tasks (see the module docstring); raises ``Fenced`` if the job was retired."""
        result = CommitResult()
        if not batch:
            return result
        digests = {id(f): _digest(f.lease.member) for f in batch if f.children}
        redelivered = self._journal(batch, digests, now)
        children = self._new_children(batch, redelivered, result)
        admitted = self._within_limits(children, result)
        if admitted:
            result.pushed = push_seeds(self.redis, admitted)
        result.revisits = self._revisits(batch)
        result.completed = self.politeness.complete([f.lease for f in batch])
        self._count(batch, result.completed, list(digests.values()))
        return result

    def mark_seen(self, tasks: Sequence[Task]) -> None:
        """Mark tasks' URLs in their crawls' Bloom filters (start URLs, which no worker pushed)."""
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
        redelivered = {key for key, new in zip(digests, added, strict=True) if not int(new)}
        if redelivered:
            logger.info("%d re-delivered tasks push all their children again", len(redelivered))
        return redelivered

    def _new_children(self, batch: Sequence[Finished], redelivered: set[int], result: CommitResult) -> list[Task]:
        by_namespace: dict[str, list[tuple[bytes, Task | None, bool]]] = defaultdict(list)
        for finished in batch:
            task = finished.lease.task
            namespace = self.dupefilter.namespace({"crawlid": task.crawlid})
            for url in [task.url, *finished.marks]:
                by_namespace[namespace].append((url_fingerprint(url), None, False))
            forced = id(finished) in redelivered
            for kid in finished.children:
                by_namespace[namespace].append((url_fingerprint(kid.url), kid, forced))
        new: list[Task] = []
        for namespace, entries in by_namespace.items():
            unique = list(dict.fromkeys(fp for fp, _, _ in entries))
            fresh = dict(zip(unique, self.dupefilter.bloom(namespace).add_fingerprints(unique), strict=True))
            taken: set[bytes] = set()
            for fp, child, forced in entries:
                if child is None:
                    continue
                if forced:
                    new.append(child)
                    result.repushed += 1
                elif fresh.get(fp) and fp not in taken:
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

    def _count(self, batch: Sequence[Finished], completed: list[Lease], digests: list[str]) -> None:
        done = {lease.member for lease in completed}
        pages: Counter[str] = Counter()
        items: Counter[str] = Counter()
        for finished in batch:
            if finished.lease.member in done:
                crawlid = finished.lease.task.crawlid
                pages[crawlid] += 1
                items[crawlid] += finished.items
        pipe = self.redis.pipeline(transaction=False)
        for crawlid, n in pages.items():
            pipe.hincrby(keys.crawl(crawlid), CrawlFields.PAGES, n)
            if items[crawlid]:
                pipe.hincrby(keys.crawl(crawlid), CrawlFields.ITEMS, items[crawlid])
        if digests:
            pipe.zrem(keys.CHILDREN_JOURNAL, *digests)
        pipe.execute()
        if completed:
            record_completion(self.redis, self.job, len(completed))


def _digest(member: str) -> str:
    return hashlib.blake2b(member.encode(), digest_size=12).hexdigest()


def _domain_or_empty(url: str) -> str:
    try:
        return domain_of(url) if url else ""
    except InvalidDomain:
        return ""
