"""Crawl finished: the master notices when a crawl has no task left anywhere and says so once, on Kafka.

How the master knows, at any scale, without scanning every queue: **per-crawl pending counts kept per hash slot**,
each changed in the same atomic call that moves the tasks, so a count is never lower than the tasks it stands for:

- ``pending:{seeds}`` (crawlid -> tasks in ``seeds`` or a dispatcher staging area): ``messaging.tasks.push_seeds``
  adds, the dispatcher's settle step (``master.staging``) subtracts what landed, the requeue of a dead job adds back;
- ``pending:{<domain>}`` (crawlid -> tasks in any job's queue, leases or requeue outbox of the domain): the landing
  step adds, :func:`frontier.registry.record_completion` (called after an acknowledged lease) and the requeue's
  release step subtract.

Moves always add at the destination before they subtract at the source, and children are pushed before their
parent is acknowledged, so a crawl's counts are all zero only when it really has nothing left. A lost subtraction
(a worker crashing between its ack and ``record_completion``) leaves a count too high: the crawl is then late, never
early. When its ``seeds`` count drops to zero the settle step adds the crawl to ``finish:{seeds}:candidates``.

**A check costs O(what changed), not O(domains of a crawl).** Reading every domain count of every waiting crawl on every
check cost 17 reads per page at 5,000 hosts. Instead the finisher (:meth:`Finisher.check`, run by the leading master in
its reporting thread, never on the dispatch path) keeps in memory, per crawl it watches, the domains whose count was
above zero when last read (its *view*); a count named in the change log ``finish:{seeds}:touched``
(:mod:`frontier.finish_hints`) becomes *unread*, and unread counts are read (a chunk per round trip) only when the view
has no busy domain left — one busy domain is enough to keep a crawl waiting, so a check of a crawl at work costs no
read, and a broad crawl's changes (a count or two per page) are not read one by one. The settle step logs the (domain,
crawl) pairs of landed tasks in the same call that lowers the crawl's ``seeds`` count, and completions, drops and
requeues log theirs right after lowering a domain count. Each check takes the whole log and reads the candidates'
``seeds`` counts in one atomic call (``lua/finish_poll.lua``), so a crawl whose ``seeds`` count reads zero has every
landing of its tasks in the log. A crawl's first view is one read of all its domains (``crawl:<id>:domains``); every
RESYNC_SECONDS its busy domains become unread again (a hint lost in a crash delays the end, never hastens it).

A candidate whose ``seeds`` count and view are empty is verified before it is declared: one full read of its domain
counts and its ``seeds`` count again, and a check that no task of the crawl was pushed without ``push_seeds``. That
verification is **one shared, incremental sweep** of ``seeds`` (``ZSCAN``, at most ``scan_budget`` entries per
check) for every crawl that was waiting for it when the sweep began — not a scan per crawl, whose cost (half a second
per crawl with 200,000 tasks in ``seeds``) once held back dispatch and failover. When the sweep has seen all of
``seeds`` and the crawl's counts are still zero, the crawl is declared finished; a crawl that becomes ready during a
sweep waits for the next one.

Once: the state moves ``running`` -> ``finished`` in one script on ``crawl:<id>`` that also marks the event pending;
the ``crawl_finished`` event (crawlid, userid, duration, and the exact counts of :mod:`messaging.counts`: pages and
items once per canonical URL, re-processings as ``restored``, failed tasks by reason, why the start URL failed) is
produced to the outbound topic, acknowledged, and then marked sent; only then does the crawl leave the candidates.
On the topic it is once (``messaging.delivery``, keyed by its ``event_id``): a send that times out is waited for by
the next check, not made again (a Kafka pause across a crawl's end once put it there twice), and a master that dies
between producing and marking leaves a note from which the next leader reads the partition before it sends. Stopped
crawls, paused crawls (their tasks wait parked, still counted: ``messaging.pause``) and crawls without a
``crawl:<id>`` hash are never declared finished. The crawl's keys then expire after
CRAWLFLEET_CRAWL_TTL, and so do the keys of its own Bloom filter (``frontier.bloom.crawl_namespace``), whose TTL
otherwise only slides with activity.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from frontier import finish_hints
from frontier.bloom import crawl_namespace, expire_filter
from frontier.revisit import has_schedule
from master.lua import LUA
from messaging import keys
from messaging.clients import as_text
from messaging.counts import read_counts
from messaging.domains import host_problem
from messaging.scripts import lua_script
from messaging.tasks import CrawlFields, CrawlState

logger = logging.getLogger(__name__)

EVENT = "crawl_finished"
EVENT_FIELD = CrawlFields.FINISH_EVENT  # crawl hash field: pending | sent
CHECK_BATCH = 200  # candidates looked at per check
SCAN_COUNT = 5000  # ZSCAN COUNT of the verification sweep
SCAN_BUDGET = 20_000  # entries of seeds one check reads at most
# a waiting crawl's view is read again this often: a hint lost in a crash, or a path that forgot to leave one,
# delays the crawl's end by at most this (its cost: the busy domains of the crawls waiting to end)
RESYNC_SECONDS = 10.0
READ_CHUNK = 64  # unread counts of a view read per round trip, until one is above zero
_DROP, _WAIT, _VERIFY, _ANNOUNCE = "drop", "wait", "verify", "announce"
# Tasks are canonical JSON (sorted keys, no spaces): the crawl id is the string after "crawlid":
_CRAWLID = re.compile(r'"crawlid":"((?:[^"\\]|\\.)*)"')

FINISH = lua_script(LUA / "finish.lua")  # running -> finished, the event marked pending, once
POLL = lua_script(LUA / "finish_poll.lua")  # the change log and the candidates' seeds counts, atomically


@dataclass
class _View:
    """A watched crawl's domains that may hold tasks: ``busy`` were read above zero and have not changed since,
    ``unread`` changed since they were read (or wait for a resync); ``read_at``: when the view was last resynced."""

    busy: set[str]
    read_at: float
    unread: set[str] = field(default_factory=set)


@dataclass
class _Sweep:
    """One pass of ZSCAN over ``seeds``, shared by every crawl that waits for its verification."""

    watched: frozenset[str]  # crawls with nothing counted anywhere when the sweep started
    strays: Counter[str] = field(default_factory=Counter)  # their tasks found in seeds so far
    cursor: int = 0
    started: bool = False


class Finisher:
    """Checks candidate crawls and produces one ``crawl_finished`` event per crawl (see the module docstring)."""

    def __init__(self, redis: Any, send: Callable[[dict[str, Any]], None], crawl_ttl: float = 0,
                 scan_budget: int = SCAN_BUDGET,
                 on_finished: Callable[[dict[str, Any]], None] | None = None) -> None:
        """``send`` produces an event and returns once it is acknowledged (e.g. produce + flush); ``scan_budget``
        bounds the ``seeds`` entries one :meth:`check` reads for the verification sweep; ``on_finished`` gets every
        event sent, before it is marked sent (the notifier enqueues the crawl's notifications, idempotently)."""
        self.redis = redis
        self.send = send
        self.on_finished = on_finished
        self.crawl_ttl = crawl_ttl
        self.scan_budget = max(1, scan_budget)
        self._finish = FINISH.on(redis)
        self._poll = POLL.on(redis)
        self._sweep: _Sweep | None = None
        self._views: dict[str, _View] = {}  # watched crawl -> its domains with tasks, as last read
        self.reads = Counter[str]()  # pending counts read: "full" (every domain of a crawl), "touched" (unread ones)

    def check(self, now: float) -> list[str]:
        """One bounded pass: look at the candidates, advance the verification sweep by at most ``scan_budget``
        entries of ``seeds``, and announce the crawls it cleared; returns the crawls whose event was produced now.
        A crawl whose check fails does not stop the others; the first failure is raised at the end."""
        produced = []
        ready = []
        errors: list[Exception] = []
        touched, raw_candidates, seeds_counts = self._poll(
            keys=[keys.FINISH_TOUCHED, keys.FINISH_CANDIDATES, keys.PENDING_SEEDS], args=[CHECK_BATCH])
        self._apply(touched)
        candidates = [as_text(c) for c in raw_candidates]
        for crawlid, in_seeds in zip(candidates, seeds_counts, strict=True):
            try:
                verdict = self._triage(crawlid, int(in_seeds), now)
                if verdict == _ANNOUNCE and self._announce(crawlid, now):
                    produced.append(crawlid)
                elif verdict == _VERIFY:
                    ready.append(crawlid)
            except Exception as exc:  # one bad crawl must not stop the others; the caller logs it once per outage
                errors.append(exc)
        if self._sweep is None and ready:
            self._sweep = _Sweep(frozenset(ready))
        if self._sweep is not None and self._advance(self._sweep):
            sweep, self._sweep = self._sweep, None
            for crawlid in sorted(sweep.watched):
                try:
                    if self._conclude(crawlid, sweep.strays[crawlid], now):
                        produced.append(crawlid)
                except Exception as exc:
                    errors.append(exc)
        if errors:
            raise errors[0]  # Kafka or Redis away: the reporting loop's OutageLog says so once, not per crawl
        return produced

    def _triage(self, crawlid: str, in_seeds: int, now: float) -> str:
        """What a candidate needs: dropping, waiting, the verification sweep, or (re)sending its event."""
        state, event = (as_text(v) if v is not None else None
                        for v in self.redis.hmget(keys.crawl(crawlid), [CrawlFields.STATE, EVENT_FIELD]))
        if state == CrawlState.FINISHED and event == "pending":
            return _ANNOUNCE  # finished, but the event's sending failed or was cut short
        if state != CrawlState.RUNNING:  # unknown, stopped, or finished and announced
            self.redis.srem(keys.FINISH_CANDIDATES, crawlid)
            self._views.pop(crawlid, None)
            return _DROP
        if in_seeds > 0:  # the poll dropped it from the candidates, atomically with its read (lua/finish_poll.lua);
            return _DROP  # the settle step adds it again when the count reaches zero
        view = self._views.get(crawlid)
        if view is None:
            self._views[crawlid] = view = _View(self._busy_domains(crawlid), now)
        elif now - view.read_at >= RESYNC_SECONDS:  # read again, lazily: a lost hint may have left one busy
            view.unread |= view.busy
            view.busy, view.read_at = set(), now
        if not view.busy:
            self._read_unread(crawlid, view)
        if view.busy or has_schedule(self.redis, crawlid):
            return _WAIT  # still in worker queues, or revisiting until stopped or `until` (master.revisits)
        return _VERIFY

    # --- views: which domains of a crawl still hold tasks ---------------------------------------------------------
    def _apply(self, touched: list[Any]) -> None:
        """The counts the change log names, of the crawls being watched, become unread (others get a full read when
        they are first watched). Nothing is read here: one busy domain is enough to keep a crawl waiting, so a
        view's unread counts are read only once it has none (:meth:`_read_unread`)."""
        for domain, crawlid in map(finish_hints.parse, touched):
            view = self._views.get(crawlid)
            if view is not None:
                view.busy.discard(domain)
                view.unread.add(domain)

    def _read_unread(self, crawlid: str, view: _View) -> None:
        """Read a view's unread counts, READ_CHUNK per round trip, until one is above zero or none is left: a
        check of a crawl still at work costs a round trip, not a read per changed count."""
        while view.unread and not view.busy:
            chunk = [view.unread.pop() for _ in range(min(READ_CHUNK, len(view.unread)))]
            pipe = self.redis.pipeline(transaction=False)
            for domain in chunk:
                pipe.hget(keys.pending_domain(domain), crawlid)
            self.reads["touched"] += len(chunk)
            view.busy.update(domain for domain, count in zip(chunk, pipe.execute(), strict=True)
                             if int(count or 0) > 0)

    def _busy_domains(self, crawlid: str) -> set[str]:
        """The crawl's domains whose count is above zero: one read of every domain of the crawl."""
        # a domain that breaks the host rule can hold no task (no key can be formed for it): an older leader
        # listed it before it failed to land it
        domains = [d for d in map(as_text, self.redis.smembers(keys.crawl_domains(crawlid)))
                   if host_problem(d) is None]
        self.reads["full"] += len(domains)
        if not domains:
            return set()
        pipe = self.redis.pipeline(transaction=False)
        for domain in domains:
            pipe.hget(keys.pending_domain(domain), crawlid)
        return {domain for domain, count in zip(domains, pipe.execute(), strict=True) if int(count or 0) > 0}

    def _advance(self, sweep: _Sweep) -> bool:
        """Read up to ``scan_budget`` more entries of ``seeds``; True when the sweep has seen all of them."""
        read = 0
        while read < self.scan_budget and not (sweep.started and sweep.cursor == 0):
            sweep.cursor, entries = self.redis.zscan(keys.SEEDS, sweep.cursor,
                                                     count=min(SCAN_COUNT, self.scan_budget))
            sweep.started = True
            read += max(1, len(entries))
            for member, _score in entries:
                found = _CRAWLID.search(as_text(member))
                if found:
                    crawlid = _crawlid(found.group(1))
                    if crawlid in sweep.watched:
                        sweep.strays[crawlid] += 1
        return sweep.cursor == 0

    def _conclude(self, crawlid: str, strays: int, now: float) -> bool:
        """After a sweep: finish the crawl unless the sweep found uncounted tasks or it has work again."""
        if strays:
            logger.warning("crawl %s has %d tasks in seeds that were not counted (pushed without push_seeds)",
                           crawlid, strays)
            self.redis.hincrby(keys.PENDING_SEEDS, crawlid, strays)
            self.redis.srem(keys.FINISH_CANDIDATES, crawlid)
            return False
        if self._triage(crawlid, self._seeds_count(crawlid), now) != _VERIFY:  # pushed, dispatched or stopped
            return False
        # the declaration rests on a full read, never on the view alone (a hint may have gone to another leader)
        busy = self._busy_domains(crawlid)
        if busy or self._seeds_count(crawlid) > 0:
            self._views[crawlid] = _View(busy, now)
            return False
        if not int(self._finish(keys=[keys.crawl(crawlid)], args=[repr(now), CrawlFields.STATE, CrawlState.RUNNING,
                                                                  CrawlState.FINISHED, CrawlFields.FINISHED,
                                                                  EVENT_FIELD])):
            return False  # changed meanwhile (stopped): the next pass decides
        self._views.pop(crawlid, None)
        return self._announce(crawlid, now)

    def _announce(self, crawlid: str, now: float) -> bool:
        crawl_key = keys.crawl(crawlid)
        event = self._event(crawlid, now)
        self.send(event)
        if self.on_finished is not None:
            self.on_finished(event)
        self.redis.hset(crawl_key, EVENT_FIELD, "sent")
        self.redis.srem(keys.FINISH_CANDIDATES, crawlid)
        if self.crawl_ttl > 0:
            for key in (crawl_key, keys.crawl_domains(crawlid), keys.crawl_counted(crawlid),
                        keys.crawl_totals(crawlid)):
                self.redis.expire(key, int(self.crawl_ttl))
            expire_filter(self.redis, crawl_namespace(crawlid), self.crawl_ttl)
        logger.info("crawl %s finished", crawlid)
        return True

    def _seeds_count(self, crawlid: str) -> int:
        return int(self.redis.hget(keys.PENDING_SEEDS, crawlid) or 0)

    def _event(self, crawlid: str, now: float) -> dict[str, Any]:
        """The event: who, how long, and the exact counts (:mod:`messaging.counts`: pages and items once per
        canonical URL, ``restored`` and ``retried`` re-processings, ``failures`` by reason, ``failed_urls`` listed and
        unlisted, ``start_failure``). ``event_id`` (the crawl and its finish time, fixed when it finished) is the
        same in every copy, so a consumer that sees the event twice (a master died between producing it and marking
        it sent) can tell. A crawl finishes once per run: ``crawlfleet retry`` of a finished crawl runs it again,
        and its end is a new event (a new ``event_id``, ``retries`` one more, the counts as they are now), which
        supersedes the earlier one."""
        fields = [CrawlFields.USERID, CrawlFields.CREATED, CrawlFields.FINISHED, CrawlFields.SPIDER_TYPE,
                  CrawlFields.RETRIES]
        userid, created, finished, spider_type, retries = (
            as_text(v) if v is not None else None for v in self.redis.hmget(keys.crawl(crawlid), fields))
        finished_at = float(finished) if finished else now
        duration = max(0.0, finished_at - float(created)) if created else None
        counts = read_counts(self.redis, crawlid)
        return {"event": EVENT, "event_id": f"{crawlid}@{finished_at!r}", "crawlid": crawlid, "userid": userid or "",
                "spider_type": spider_type or "", **counts.as_dict(), "finished": finished_at,
                "duration": round(duration, 3) if duration is not None else None, "retries": int(retries or 0)}


def _crawlid(json_text: str) -> str:
    """The crawl id from its JSON string body (escapes decoded)."""
    if "\\" not in json_text:
        return json_text
    try:
        text: str = json.loads(f'"{json_text}"')
        return text
    except ValueError:
        return json_text
