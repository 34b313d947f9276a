"""The children journal: which children a commit's pages owe, and their push into ``seeds`` — each child pushed once,
none lost, whatever cut a commit off and whoever commits the task again (steps 1 and 3 of
:mod:`spiders.worker.commit`).

1. **candidates** — one Bloom filter check per crawl filter (nothing is marked): a child the filter holds is someone
   else's to push — pushed already, or owed by the page that marked it, whose journal entry lists it. The others are
   the page's *candidates*, the only children it can be the first to mark, each given to the first page of the batch
   that links it (a page's own URL, or where its redirects ended, is nobody's candidate). **Where dedup is asked of a
   page's links.**
2. **journal** — one Lua call (``lua/journal.lua``) writes each page's candidates (fingerprint -> child task) under its
   entry ``children:{seeds}:journal:<digest of the task>``, *before* they are marked, and says which pages had an
   entry already: such a page is being committed again — by this process, after Redis interrupted an earlier
   attempt, or by another worker after its lease expired — and the earlier attempt may have marked the entry's
   children without pushing them. A task without children is asked too (its fetch may have failed this time).
3. **Bloom** — one check-and-add per crawl filter: the pages' own URLs and every candidate. A page committed for the
   first time owes the candidates that were new to the filter (a candidate that another page marked in between is
   that page's); a page that had an entry owes every child in it, since which of them its earlier attempt marked is
   not known.
4. **push** (after the crawls' limits) — one call for every admitted child (``lua/push_owed.lua``; for a crawl
   ordered by importance, one :func:`spiders.worker.importance.push_by_importance` call, which also counts every link
   of the batch's pages, seen or not): a page's children go into ``seeds`` only if its journal entry is still there,
   and the entry is deleted in the same call. A commit retried after its push, or a call sent twice, pushes nothing
   twice; an entry is gone exactly when its children are in ``seeds``.

So a child the filter holds was pushed, or is listed in the entry of the page that marked it until it is; a page
committed again pushes its entry's children, which no one pushed. Refetches a cut-off commit can still cause: the
children a page raced another page for (both asked the filter before either marked them), when the losing page is
cut off between its entry and its push. (Before the journal recorded candidates, a page committed again pushed
*every* link it had, seen or not: one Redis kill -9 made a documentation site's pages, each linking the others, be
fetched again once per page in flight — 878 requests for 526 pages.)

A task of one's own Scrapy spider (``Task.travels``, issue 35) is keyed by its request's fingerprint (the project's
``REQUEST_FINGERPRINTER_CLASS``, carried in the task: :func:`fingerprint_of`) wherever a rule task is keyed by its
canonical URL, and a child with ``dont_filter`` is never asked of the filter nor marked, as Scrapy's scheduler never
asks its dupefilter about one: it is a candidate of its page whatever the filter holds (journaled under a digest of
the task), owed by it on its first commit. Requests with no parent task (a crawl's start requests, ``engine.crawl``
calls) go through the same steps as a *page* of their own (:meth:`ChildrenJournal.loose`), its entry named by the
caller: a push cut off after its marks is finished by whoever pushes under the same name.
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frontier.bloom import url_fingerprint
from messaging import keys
from messaging.clients import as_text
from messaging.scripts import lua_script
from messaging.tasks import SEEDS_SCORE_LUA, Task, check_priority
from spiders.dupefilter import BatchDupeFilter
from spiders.worker.importance import Link, push_by_importance

if TYPE_CHECKING:
    from spiders.worker.commit import Finished

logger = logging.getLogger(__name__)
# An entry outlives any lease by far: its task is processed again (its lease expired, its job retired) long before;
# only a task purged by a stop leaves its entry behind, and it expires.
JOURNAL_KEEP_SECONDS = 7 * 86400
LUA = Path(__file__).with_name("lua")
JOURNAL = lua_script(LUA / "journal.lua")  # each page's candidates written before they are marked
PUSH_OWED = lua_script(LUA / "push_owed.lua", prefix=SEEDS_SCORE_LUA)  # owed children, once per journal entry


@dataclass
class Page:
    """A finished task (or requests with no parent), as one commit sees it."""

    crawlid: str
    namespace: str  # its crawl's Bloom filter
    entry: str  # its journal entry's key
    own: list[bytes]  # what it stands for in the filter: its own task's fingerprint, where its redirects ended
    children: list[Task]
    candidates: dict[bytes, Task] = field(default_factory=dict)  # fingerprint -> child the filter did not hold
    stored: dict[bytes, Task] | None = None  # its journal entry's children, when it had one (committed again)

    @property
    def journaled(self) -> bool:
        """Whether it has a journal entry now (written in step 2, or left by an earlier commit)."""
        return bool(self.candidates) or self.stored is not None


@dataclass
class Owed:
    """What a batch's pages owe: each child once, with the page whose entry it is pushed under."""

    pages: list[Page]
    children: list[tuple[Page, Task]]
    repushed: int = 0  # children owed by entries an earlier commit of the same task left
    duplicates: int = 0  # children the pages did not owe: the filter had them (pushed, or owed by another page)


class ChildrenJournal:
    def __init__(self, redis: Any, dupefilter: BatchDupeFilter) -> None:
        self.redis = redis
        self.dupefilter = dupefilter
        self._write = JOURNAL.on(redis)
        self._push_owed = PUSH_OWED.on(redis)

    def owed(self, batch: Sequence[Finished]) -> Owed:
        """Steps 1-3: the children each page owes, their candidates written in the journal and marked."""
        return self._owed([self._page(finished.lease.task.crawlid, finished.lease.member, _own_fingerprints(finished),
                                      finished.children) for finished in batch])

    def loose(self, name: str, tasks: Sequence[Task]) -> Owed:
        """Steps 1-3 for tasks with no parent task (one's own spider's start requests, its ``engine.crawl`` calls):
        one page per crawl, its journal entry named by ``name`` (the same name finishes a push that was cut off)."""
        by_crawl: dict[str, list[Task]] = defaultdict(list)
        for task in tasks:
            by_crawl[task.crawlid].append(task)
        return self._owed([self._page(crawlid, f"{name} {crawlid}", [], children)
                           for crawlid, children in by_crawl.items()])

    def _page(self, crawlid: str, member: str, own: list[bytes], children: list[Task]) -> Page:
        return Page(crawlid, self.dupefilter.namespace({"crawlid": crawlid}), keys.children_journal(_digest(member)),
                    own, children)

    def _owed(self, pages: list[Page]) -> Owed:
        self._candidates(pages)
        self._journal(pages)
        return self._mark(pages)

    def push(self, batch: Sequence[Finished], owed: Owed, admitted: Sequence[Task], important: set[str]) -> int:
        """Step 4: the ``admitted`` children into ``seeds``, each page's only while its journal entry is there (deleted
        in the same call); crawls ordered by importance (``important``) in their own call, which counts every link
        of their pages. Returns the tasks new in ``seeds``."""
        pushing = {id(child) for child in admitted}
        pushed = 0
        plain = [page for page in owed.pages if page.journaled and page.crawlid not in important]
        if plain:
            index = {id(page): n for n, page in enumerate(plain, 1)}
            args: list[Any] = []
            for page, child in owed.children:
                if id(child) in pushing and page.crawlid not in important:
                    args += [index[id(page)], child.encode(), check_priority(child.priority), child.crawlid]
            pushed += int(self._push_owed(keys=[keys.SEEDS, keys.SEEDS_SEQUENCE, keys.PENDING_SEEDS,
                                                *(page.entry for page in plain)], args=args))
        if important:
            ranked = [page for page in owed.pages if page.journaled and page.crawlid in important]
            index = {id(page): n for n, page in enumerate(ranked, 1)}
            new = [(url_fingerprint(child.url).hex(), child, index[id(page)]) for page, child in owed.children
                   if id(child) in pushing and page.crawlid in important]
            pushed += push_by_importance(self.redis, _importance_links(batch, important), new,
                                         entries=[page.entry for page in ranked]).pushed
        return pushed

    def _candidates(self, pages: list[Page]) -> None:
        """Step 1: one check per crawl's set; each child the set does not hold becomes a candidate of the first page
        that links it (a child with ``dont_filter``: of its page, unasked)."""
        own: dict[str, set[bytes]] = defaultdict(set)  # the batch's own URLs and redirect ends, per set
        for page in pages:
            own[page.namespace].update(page.own)
        links: dict[str, list[tuple[bytes, Page, Task]]] = defaultdict(list)
        for page in pages:  # a task without children too: an earlier commit of it may have left an entry
            for child in page.children:
                if unfiltered(child):
                    page.candidates[_unfiltered_key(child)] = child
                    continue
                fingerprint = fingerprint_of(child)
                if fingerprint not in own[page.namespace]:
                    links[page.namespace].append((fingerprint, page, child))
        for namespace, found in links.items():
            unique = list(dict.fromkeys(fingerprint for fingerprint, _, _ in found))
            held = dict(zip(unique, self.dupefilter.bloom(namespace).contains_fingerprints(unique), strict=True))
            for fingerprint, page, child in found:
                if not held[fingerprint]:
                    held[fingerprint] = True  # given to this page: the batch's other pages do not owe it
                    page.candidates[fingerprint] = child

    def _journal(self, pages: list[Page]) -> None:
        """Step 2: the pages' candidates written under their entries, in one call; the entries found are read back."""
        if not pages:
            return
        args: list[Any] = [int(JOURNAL_KEEP_SECONDS * 1000)]
        for page in pages:
            args.append(len(page.candidates))
            for fingerprint, child in page.candidates.items():
                args += [fingerprint.hex(), child.encode()]
        replies = self._write(keys=[page.entry for page in pages], args=args)
        again = 0
        for page, reply in zip(pages, replies, strict=True):
            if reply:
                page.stored = {bytes.fromhex(as_text(reply[i])): Task.decode(reply[i + 1])
                               for i in range(0, len(reply), 2)}
                again += 1
        if again:
            logger.info("%d tasks committed again push the children their journal entries list", again)

    def _mark(self, pages: list[Page]) -> Owed:
        """Step 3: the pages' own URLs and every candidate marked (a ``dont_filter`` one never), one check-and-add per
        crawl's set; each page's owed children, each child once."""
        marked: dict[str, list[bytes]] = defaultdict(list)
        for page in pages:
            marked[page.namespace] += page.own
            marked[page.namespace] += [fingerprint for fingerprint, child in {**page.candidates,
                                                                              **(page.stored or {})}.items()
                                       if not unfiltered(child)]
        new: dict[str, dict[bytes, bool]] = {}
        for namespace, fingerprints in marked.items():
            unique = list(dict.fromkeys(fingerprints))
            new[namespace] = dict(zip(unique, self.dupefilter.bloom(namespace).add_fingerprints(unique), strict=True))
        owed = Owed(pages, [])
        taken: dict[str, set[bytes]] = defaultdict(set)
        for page in pages:
            if page.stored is not None:
                children = page.stored
                owed.repushed += len(children)
            else:
                children = {fp: child for fp, child in page.candidates.items()
                            if unfiltered(child) or new[page.namespace][fp]}
            for fingerprint, child in children.items():
                if fingerprint not in taken[page.namespace]:
                    taken[page.namespace].add(fingerprint)
                    owed.children.append((page, child))
            owed.duplicates += max(0, len(page.children) - len(children))
        return owed


def fingerprint_of(task: Task) -> bytes:
    """What the crawl's Bloom filter and exact counts key a task by: one's own spider's request fingerprint (carried
    in the task, ``fp``), else the canonical URL's."""
    fp = task.request.get("fp") if task.request else None
    return bytes.fromhex(fp) if fp else url_fingerprint(task.url)


def unfiltered(task: Task) -> bool:
    """A request of one's own spider with ``dont_filter``: never asked of the filter, never marked in it."""
    return bool(task.request) and bool(task.request.get("dont_filter"))


def _unfiltered_key(task: Task) -> bytes:
    """Its journal field: a digest of the task (never asked of the filter, its fingerprint says nothing)."""
    return hashlib.blake2b(task.encode().encode(), digest_size=16).digest()


def _own_fingerprints(finished: Finished) -> list[bytes]:
    """What a finished task stands for in the filter: its own fingerprint (not a ``dont_filter`` request's: Scrapy
    never marks one) and where its redirects ended."""
    task = finished.lease.task
    return [*([] if unfiltered(task) else [fingerprint_of(task)]), *(url_fingerprint(url) for url in finished.marks)]


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
