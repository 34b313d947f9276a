"""Committing finished tasks: their children into ``seeds``, then their leases acknowledged and counted.

A task is *complete* (docs/architecture.md) when its response was processed, its children are in ``seeds`` and its items
are stored. The scheduler hands finished tasks here (items already stored); :meth:`Committer.commit` settles a whole
batch of them in a few round trips, whatever its size:

1. **candidates** — one Bloom filter check per crawl filter (nothing is marked): a child the filter holds is someone
   else's to push — pushed already, or owed by the page that marked it, whose journal entry lists it (step 2). The
   others are the page's *candidates*, the only children it can be the first to mark, each given to the first page
   of the batch that links it (a page's own URL, or where its redirects ended, is nobody's candidate).
2. **journal** — one Lua call (``lua/journal.lua``) writes each page's candidates (fingerprint -> child task) under
   its entry ``children:{seeds}:journal:<digest of the task>``, *before* they are marked, and says which pages had an
   entry already: such a page is being committed again — by this process, after Redis interrupted an earlier
   attempt, or by another worker after its lease expired — and the earlier attempt may have marked the entry's
   children without pushing them.
3. **Bloom** — one check-and-add per crawl filter: the pages' own URLs and every candidate. A page committed for the
   first time owes the candidates that were new to the filter (a candidate that another page marked in between is
   that page's); a page that had an entry owes every child in it, since which of them its earlier attempt marked is
   not known.
4. **limits** — ``max_pages`` / ``domain_max_pages``: one atomic call per limited crawl on ``crawl:<id>`` admits
   what still fits (``enqueued`` counts every task that ever entered ``seeds``, the start URL included).
5. **push** — one call for every admitted child (``lua/push_owed.lua``; for a crawl ordered by importance, rule field
   ``importance``, one :func:`spiders.worker.importance.push_by_importance` call instead, which also counts every
   link of the batch's pages, seen or not): a page's children go into ``seeds`` only if its journal entry is still
   there, and the entry is deleted in the same call. A commit retried after its push, or a call the client sent
   twice, pushes nothing twice; an entry is gone exactly when its children are in ``seeds``.
6. **revisits** — a crawl whose rule has ``revisit`` (``frontier.revisit``): the batch's pages it revisits are
   scheduled (first fetches) or rescheduled with their outcome (revisits), in one Lua call — before the leases are
   acknowledged, so a crash in between fetches a page again rather than losing its revisit.
7. **count** — the crawls' ``pages`` and ``items`` once per canonical URL (the first processing; later ones count as
   ``restored``, or ``retried`` for ``crawlfleet retry``'s; failures by reason: :mod:`messaging.counts`, ``noindex``
   among them), one script per crawl, mirrored into ``crawl:<id>``; its verdicts go to the crawl's failures list
   (:class:`messaging.failures.FailureStore`: a failed page kept, a recovered one dropped). Tasks the politeness
   step dropped unfetched are counted the same way (:meth:`Committer.count_unfetched`: reason ``robots`` or
   ``blacklisted``). A batch whose commit is tried again after this step is not counted again (this process
   remembers what it counted until the leases are acknowledged).
8. **complete** — :meth:`frontier.client.FrontierClient.complete`: leases acknowledged and the crawls' pending counts
   released, atomically per domain; then the finisher's change log (``frontier.finish_hints``) and the weights'
   completion count.

A crash (or a Redis restart) anywhere leaves the task to be processed again, which counts as ``restored``, and never
loses a child: a child the filter holds was marked by a page whose entry lists it until it is in ``seeds``. Nor does
it push again what was pushed: a page processed again pushes only its entry's children, which no one pushed. (Before
the journal recorded candidates, a page committed again pushed *every* link it had, seen or not: one Redis kill -9
made a documentation site's pages, each linking the others, be fetched again once per page in flight — 878
requests for 526 pages.) A lost change-log entry delays a crawl's end (the finisher re-reads its counts), never
hastens it.
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
from messaging.tasks import SEEDS_SCORE_LUA, CrawlFields, Task, check_priority
from spiders.dupefilter import BatchDupeFilter
from spiders.rules import DETAIL
from spiders.worker.crawls import CrawlCatalog
from spiders.worker.importance import Link, push_by_importance, wants_importance

logger = logging.getLogger(__name__)
# A journal entry outlives any lease by far: the task it belongs to is processed again (its lease expired, its job
# retired) long before; only a task purged by a stop leaves its entry behind, and it expires.
JOURNAL_KEEP_SECONDS = 7 * 86400
LUA = Path(__file__).with_name("lua")

ADMIT = lua_script(LUA / "admit.lua")  # a limited crawl's children that still fit
COUNT = lua_script(LUA / "count.lua")  # pages and items once per canonical URL
JOURNAL = lua_script(LUA / "journal.lua")  # each page's candidates written before they are marked
PUSH_OWED = lua_script(LUA / "push_owed.lua", prefix=SEEDS_SCORE_LUA)  # owed children, once per journal entry


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
    duplicates: int = 0  # children the page did not owe: the Bloom filter had them (pushed or owed by another page)
    over_limit: int = 0  # children refused by max_pages / domain_max_pages
    repushed: int = 0  # children owed by a journal entry an earlier commit of the same task left (step 2)
    revisits: int = 0  # pages of revisiting crawls scheduled or rescheduled


@dataclass
class _Page:
    """A finished task, as one commit sees it."""

    finished: Finished
    namespace: str  # its crawl's Bloom filter
    entry: str  # its journal entry's key
    candidates: dict[bytes, Task] = field(default_factory=dict)  # fingerprint -> child the filter did not hold
    stored: dict[bytes, Task] | None = None  # its journal entry's children, when it had one (committed again)

    @property
    def crawlid(self) -> str:
        return self.finished.lease.task.crawlid

    @property
    def journaled(self) -> bool:
        """Whether it has a journal entry now (written in step 2, or left by an earlier commit)."""
        return bool(self.candidates) or self.stored is not None


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
        self._journal_write = JOURNAL.on(redis)
        self._push_owed = PUSH_OWED.on(redis)

    def commit(self, batch: Sequence[Finished]) -> CommitResult:
        """Settle a batch of finished tasks (see the module docstring); raises ``Fenced`` if the job was retired.
        A batch that raised is committed again as it is (the feed keeps it): every step is safe to repeat."""
        result = CommitResult()
        if not batch:
            return result
        pages = self._candidates(batch)
        self._journal(pages)
        owed = self._mark(batch, pages, result)
        admitted = self._within_limits([child for _, child in owed], result)
        self._push(batch, pages, owed, admitted, result)
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
        """Mark tasks' URLs in their crawls' dupefilter sets (start URLs, which no worker pushed)."""
        by_namespace: dict[str, list[bytes]] = defaultdict(list)
        for task in tasks:
            by_namespace[self._namespace(task.crawlid)].append(url_fingerprint(task.url))
        for namespace, fingerprints in by_namespace.items():
            self.dupefilter.bloom(namespace).add_fingerprints(fingerprints)

    def _namespace(self, crawlid: str) -> str:
        return self.dupefilter.namespace({"crawlid": crawlid})

    # --- steps ----------------------------------------------------------------------------------------------------
    def _candidates(self, batch: Sequence[Finished]) -> list[_Page]:
        """Step 1, **where dedup is asked of a page's links**: one check per crawl's set; each child the set does not
        hold becomes a candidate of the first page that links it."""
        own: dict[str, set[bytes]] = defaultdict(set)  # the batch's own URLs and redirect ends, per set
        for finished in batch:
            task = finished.lease.task
            own[self._namespace(task.crawlid)].update(url_fingerprint(url) for url in [task.url, *finished.marks])
        pages: list[_Page] = []
        links: dict[str, list[tuple[bytes, _Page, Task]]] = defaultdict(list)
        for finished in batch:  # a task without children too: an earlier commit of it may have left an entry
            namespace = self._namespace(finished.lease.task.crawlid)
            page = _Page(finished, namespace, keys.children_journal(_digest(finished.lease.member)))
            pages.append(page)
            for child in finished.children:
                fingerprint = url_fingerprint(child.url)
                if fingerprint not in own[namespace]:
                    links[namespace].append((fingerprint, page, child))
        for namespace, found in links.items():
            unique = list(dict.fromkeys(fingerprint for fingerprint, _, _ in found))
            held = dict(zip(unique, self.dupefilter.bloom(namespace).contains_fingerprints(unique), strict=True))
            for fingerprint, page, child in found:
                if not held[fingerprint]:
                    held[fingerprint] = True  # given to this page: the batch's other pages do not owe it
                    page.candidates[fingerprint] = child
        return pages

    def _journal(self, pages: list[_Page]) -> None:
        """Step 2: the pages' candidates written under their entries, in one call; the entries found are read back."""
        if not pages:
            return
        args: list[Any] = [int(JOURNAL_KEEP_SECONDS * 1000)]
        for page in pages:
            args.append(len(page.candidates))
            for fingerprint, child in page.candidates.items():
                args += [fingerprint.hex(), child.encode()]
        replies = self._journal_write(keys=[page.entry for page in pages], args=args)
        again = 0
        for page, reply in zip(pages, replies, strict=True):
            if reply:
                page.stored = {bytes.fromhex(as_text(reply[i])): Task.decode(reply[i + 1])
                               for i in range(0, len(reply), 2)}
                again += 1
        if again:
            logger.info("%d tasks committed again push the children their journal entries list", again)

    def _mark(self, batch: Sequence[Finished], pages: list[_Page], result: CommitResult) -> list[tuple[_Page, Task]]:
        """Step 3: the pages' own URLs and every candidate marked, one check-and-add per crawl's set; returns the
        children each page owes, each child once."""
        marked: dict[str, list[bytes]] = defaultdict(list)
        for finished in batch:
            task = finished.lease.task
            marked[self._namespace(task.crawlid)] += [url_fingerprint(url) for url in [task.url, *finished.marks]]
        for page in pages:
            marked[page.namespace] += [*page.candidates, *(page.stored or ())]
        new: dict[str, dict[bytes, bool]] = {}
        for namespace, fingerprints in marked.items():
            unique = list(dict.fromkeys(fingerprints))
            new[namespace] = dict(zip(unique, self.dupefilter.bloom(namespace).add_fingerprints(unique), strict=True))
        owed: list[tuple[_Page, Task]] = []
        taken: dict[str, set[bytes]] = defaultdict(set)
        for page in pages:
            if page.stored is not None:
                children = page.stored
                result.repushed += len(children)
            else:
                children = {fp: child for fp, child in page.candidates.items() if new[page.namespace][fp]}
            for fingerprint, child in children.items():
                if fingerprint not in taken[page.namespace]:
                    taken[page.namespace].add(fingerprint)
                    owed.append((page, child))
            result.duplicates += max(0, len(page.finished.children) - len(children))
        return owed

    def _push(self, batch: Sequence[Finished], pages: list[_Page], owed: list[tuple[_Page, Task]],
              admitted: list[Task], result: CommitResult) -> None:
        """Step 5: the admitted children into ``seeds``, each page's only while its journal entry is there (deleted
        in the same call); importance crawls in their own call, which counts every link of their pages."""
        important = {crawlid for crawlid in {f.lease.task.crawlid for f in batch} if self._by_importance(crawlid)}
        pushing = {id(child) for child in admitted}
        plain = [page for page in pages if page.journaled and page.crawlid not in important]
        if plain:
            index = {id(page): n for n, page in enumerate(plain, 1)}
            args: list[Any] = []
            for page, child in owed:
                if id(child) in pushing and page.crawlid not in important:
                    args += [index[id(page)], child.encode(), check_priority(child.priority), child.crawlid]
            result.pushed += int(self._push_owed(keys=[keys.SEEDS, keys.SEEDS_SEQUENCE, keys.PENDING_SEEDS,
                                                       *(page.entry for page in plain)], args=args))
        if important:
            ranked = [page for page in pages if page.journaled and page.crawlid in important]
            index = {id(page): n for n, page in enumerate(ranked, 1)}
            new = [(url_fingerprint(child.url).hex(), child, index[id(page)]) for page, child in owed
                   if id(child) in pushing and page.crawlid in important]
            result.pushed += push_by_importance(self.redis, _importance_links(batch, important), new,
                                                entries=[page.entry for page in ranked]).pushed

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

    def _settle(self, completed: list[Lease]) -> None:
        """After the acknowledgement: the finisher's change log; the weights' completions counted."""
        if not completed:
            return
        pipe = self.redis.pipeline(transaction=False)
        log_touched(pipe, ((lease.domain, lease.task.crawlid) for lease in completed))  # the finisher looks again
        pipe.execute()
        record_completion(self.redis, self.job, len(completed))


def _importance_links(batch: Sequence[Finished], important: set[str]) -> list[Link]:
    """Each page's distinct links, of importance crawls: every one counts, seen or not."""
    links: list[Link] = []
    for finished in batch:
        crawlid = finished.lease.task.crawlid
        if crawlid in important:
            fingerprints = dict.fromkeys(url_fingerprint(child.url).hex() for child in finished.children)
            parent = url_fingerprint(finished.lease.task.url).hex()
            links += [Link(crawlid, fingerprint, parent, len(fingerprints)) for fingerprint in fingerprints]
    return links


def _digest(member: str) -> str:
    return hashlib.blake2b(member.encode(), digest_size=12).hexdigest()


def _domain_or_empty(url: str) -> str:
    try:
        return domain_of(url) if url else ""
    except InvalidDomain:
        return ""
