"""A worker's fair walk over its domain queues (seed 4.3.1.1, "入队与出队"): round robin, skipping closed domains.

Each pass starts at the domain after the one served last, so no domain starves and none is always first. A domain
that the politeness step refused is skipped without asking Redis again until it can open: a throttled or blocked
domain for the wait the step reported (the earliest moment its windows or its block allow a hit), an empty queue
for a back-off that doubles while it stays empty (new tasks are noticed within ``max_empty_backoff``). When every
domain is closed, :meth:`DomainWalk.next` sleeps until the earliest one opens instead of spinning; :meth:`poll` is
the non-blocking form for event loops (Scrapy's scheduler), with :attr:`DomainWalk.wake_in` telling when to ask
again. Every skip is counted by reason in :attr:`DomainWalk.skips` (the steps it asked for are also counted in
the cluster's stats by the politeness engine).

A site's config that changes (rate, window, burst, blacklist: :class:`frontier.config_watch.SiteConfigWatch` calls its
listeners) must not wait for a wait computed under the old one: :meth:`DomainWalk.reopen` (thread-safe, for the
watch's thread) has the next pass ask the step again for that domain (every domain for a change of the defaults or
of a site the walk does not know by that name). A Retry-After block is never shortened (``lua/block.lua``), and a
longer one is what the step reports when asked, so blocks need no such call.

The walk only needs a ``take(domain) -> TakeResult`` (:meth:`frontier.client.FrontierClient.take`) and the list of
domains (``FrontierClient.domains``, refreshed every ``refresh_seconds``); time is an injectable clock (local, since
waits are durations), so the walk is tested in simulated time.

**The ready walk** (:class:`ReadyWalk`, what workers use): the same contract, but the domains come from the job's
ready index (:mod:`frontier.client.ready`): one call per batch of *due* domains, oldest due first, which also writes
back what the batch's steps said (taken: due again now, behind the others; throttled, blocked, robots pending: due
when the step says; empty: removed, then re-checked). Empty and closed domains cost nothing, so the cost of a take no
longer grows with the number of domains. A slice of the reconcile (:meth:`frontier.client.ReadyIndex.reconcile`) runs
every ``reconcile_tick`` seconds, so a domain whose index entry was lost is walked again within
``reconcile_seconds``. :class:`DomainWalk` (the round robin over every domain) stays for the benchmarks' comparison.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from typing import Any

from frontier.client import Outcome, ReadyIndex, TakeResult
from messaging.clock import Clock, MonotonicClock  # waits are durations: they need no shared time
from messaging.tasks import Task


class _Walk:
    clock: Clock
    sleep: Callable[[float], None]
    max_sleep: float
    wake_in: float

    def poll(self) -> TakeResult | None:
        raise NotImplementedError

    def next(self, timeout: float | None = None) -> TakeResult | None:
        """The next task, sleeping while every domain is closed; ``None`` when ``timeout`` seconds passed first."""
        deadline = None if timeout is None else self.clock.now() + timeout
        while True:
            result = self.poll()
            if result is not None:
                return result
            pause = min(self.wake_in, self.max_sleep)
            if deadline is not None:
                remaining = deadline - self.clock.now()
                if remaining <= 0:
                    return None
                pause = min(pause, remaining)
            if pause > 0:
                self.sleep(pause)


class DomainWalk(_Walk):
    def __init__(
        self,
        take: Callable[[str], TakeResult],
        domains: Callable[[], Iterable[str]],
        clock: Clock | None = None,
        sleep: Callable[[float], None] = time.sleep,
        refresh_seconds: float = 1.0,
        min_empty_backoff: float = 0.05,
        max_empty_backoff: float = 1.0,
        max_sleep: float = 1.0,
        on_removed: Callable[[list[Task], str], None] | None = None,
    ) -> None:
        self.take = take
        self.domains = domains
        self.clock = clock or MonotonicClock()
        self.sleep = sleep
        self.refresh_seconds = refresh_seconds
        self.min_empty_backoff = min_empty_backoff
        self.max_empty_backoff = max_empty_backoff
        self.max_sleep = max_sleep
        self.on_removed = on_removed  # tasks dropped by the step (robots, blacklist) and their queue: the caller
        # completes them
        self.skips: Counter[str] = Counter()  # by reason: an outcome of the step, or "waiting" (known closed)
        self.wake_in = 0.0  # after a fruitless poll: seconds until the earliest domain may open
        self._ring: list[str] = []
        self._cursor = 0
        self._ready_at: dict[str, float] = {}
        self._empty_backoff: dict[str, float] = {}
        self._refreshed_at: float | None = None
        self._reopen: set[str | None] = set()  # domains to ask again at the next pass (None: all); any thread
        self._reopen_lock = threading.Lock()

    def reopen(self, domain: str | None = None) -> None:
        """Forget when ``domain`` (``None``: every domain) was expected to open: its site config changed. Safe to
        call from any thread; the next :meth:`poll` asks the step again."""
        with self._reopen_lock:
            self._reopen.add(domain)

    def _apply_reopen(self) -> None:
        with self._reopen_lock:
            wanted, self._reopen = self._reopen, set()
        if not wanted:
            return
        if None in wanted or not wanted <= set(self._ready_at) | set(self._ring):
            self._ready_at.clear()
            self._empty_backoff.clear()
            self.skips["reopened"] += 1
            return
        for domain in (d for d in wanted if d is not None):  # None is not among them (above)
            self._ready_at.pop(domain, None)
            self._empty_backoff.pop(domain, None)
        self.skips["reopened"] += len(wanted)

    def refresh(self) -> None:
        """Re-read the domain list: new domains join the end of the ring, vanished ones leave it."""
        current = set(self.domains())
        served = self._ring[self._cursor - 1] if self._ring else None
        ring = [domain for domain in self._ring if domain in current]
        ring.extend(sorted(current.difference(ring)))
        self._ring = ring
        self._cursor = (ring.index(served) + 1) % len(ring) if served in current and ring else 0
        for domain in set(self._ready_at) - current:
            self._ready_at.pop(domain, None)
            self._empty_backoff.pop(domain, None)
        self._refreshed_at = self.clock.now()

    def poll(self) -> TakeResult | None:
        """One pass over the domains from the one after the last served: the first task taken, or ``None``."""
        now = self.clock.now()
        self._apply_reopen()
        if self._refreshed_at is None or now - self._refreshed_at >= self.refresh_seconds:
            self.refresh()
        count = len(self._ring)
        earliest: float | None = None
        for step in range(count):
            index = (self._cursor + step) % count
            domain = self._ring[index]
            ready_at = self._ready_at.get(domain, 0.0)
            if ready_at > now:
                self._skip("waiting")
                earliest = ready_at if earliest is None else min(earliest, ready_at)
                continue
            result = self.take(domain)
            now = self.clock.now()
            if result.removed and self.on_removed is not None:
                self.on_removed(result.removed, domain)
            if result.outcome == Outcome.TAKEN:
                self._ready_at.pop(domain, None)
                self._empty_backoff.pop(domain, None)
                self._cursor = (index + 1) % count
                self.wake_in = 0.0
                return result
            ready_at = self._closed_until(domain, result, now)
            earliest = ready_at if earliest is None else min(earliest, ready_at)
        self.wake_in = self.max_empty_backoff if earliest is None else max(0.0, earliest - now)
        return None

    def _closed_until(self, domain: str, result: TakeResult, now: float) -> float:
        self._skip(result.outcome)
        if result.outcome in Outcome.WAITING:
            ready_at = now + result.wait
        elif result.outcome in (Outcome.EMPTY, Outcome.BLACKLISTED):
            backoff = self._empty_backoff.get(domain, self.min_empty_backoff / 2) * 2
            backoff = min(max(backoff, self.min_empty_backoff), self.max_empty_backoff)
            self._empty_backoff[domain] = backoff
            ready_at = now + backoff
        else:  # disallowed URLs were removed: the domain may have allowed ones next
            ready_at = now
        self._ready_at[domain] = ready_at
        return ready_at

    def _skip(self, reason: str) -> None:
        self.skips[reason] += 1


class ReadyWalk(_Walk):
    """The walk over the job's ready index (:mod:`frontier.client.ready`): only due, non-empty domains are asked."""

    def __init__(
        self,
        take: Callable[[str], TakeResult],
        index: ReadyIndex | Any,
        clock: Clock | None = None,
        sleep: Callable[[float], None] = time.sleep,
        idle_poll: float = 1.0,
        max_sleep: float = 1.0,
        reconcile_seconds: float = 60.0,
        reconcile_tick: float = 1.0,
        max_batches: int = 4,
        on_removed: Callable[[list[Task], str], None] | None = None,
        take_group: Callable[[list[str]], list[TakeResult]] | None = None,
        group: int = 1,
    ) -> None:
        self.take = take
        self.take_group = take_group  # steps for several due domains in one go (FrontierClient.take_domains), if given
        self.group = group  # due domains per take_group call (the caller may change it between polls)
        self.index = index
        self.clock = clock or MonotonicClock()
        self.sleep = sleep
        self.idle_poll = idle_poll  # an empty index is read again this often (new tasks are noticed by then)
        self.max_sleep = max_sleep
        self.reconcile_seconds = reconcile_seconds
        self.reconcile_tick = reconcile_tick
        self.max_batches = max_batches  # due batches asked per poll before returning (the caller's loop goes on)
        self.on_removed = on_removed
        self.skips: Counter[str] = Counter()
        self.wake_in = 0.0
        self.lost = 0  # tasks taken or dropped from the queues since the last index call (the gauges go down)
        self._due: deque[str] = deque()
        self._taken: deque[TakeResult] = deque()  # taken by a group call, handed out one per poll
        self._updates: list[tuple[str, str]] = []
        self._next_reconcile: float | None = None
        self._index_now = 0.0  # Redis time of the last index call
        self._reopen: set[str | None] = set()
        self._reopen_lock = threading.Lock()

    def reopen(self, domain: str | None = None) -> None:
        """The site config of ``domain`` (``None``: the defaults) changed: it is due now at the next index call.
        Safe to call from any thread."""
        with self._reopen_lock:
            self._reopen.add(domain)

    def poll(self) -> TakeResult | None:
        """Steps for the due domains, oldest due first: the first task taken, or ``None`` (:attr:`wake_in` says
        when to ask again)."""
        if self._taken:
            return self._taken.popleft()
        self._reconcile()
        for _ in range(self.max_batches):
            if not self._due and not self._fetch():
                return None
            while self._due:
                if self.take_group is not None and self.group > 1:
                    domains = [self._due.popleft() for _ in range(min(self.group, len(self._due)))]
                    results = self.take_group(domains)
                else:
                    domains = [self._due.popleft()]
                    results = [self.take(domains[0])]
                for domain, result in zip(domains, results, strict=True):
                    self._learn(domain, result)
                if self._taken:
                    self.wake_in = 0.0
                    return self._taken.popleft()
        self.wake_in = 0.0  # more may be due: the caller polls again at once
        return None

    def _learn(self, domain: str, result: TakeResult) -> None:
        """What a step said about ``domain`` goes to the index at the next call; a lease joins ``_taken``."""
        if result.removed:
            self.lost += len(result.removed)
            if self.on_removed is not None:
                self.on_removed(result.removed, domain)
        if result.outcome != Outcome.TAKEN:
            self._closed(domain, result)
            return
        self.lost += 1
        # due again now, behind every domain already due (fair), or when the batch's refusal said; drained:
        # dropped (and re-checked, as after an empty step)
        self._updates.append((domain, ReadyIndex.REMOVE if result.drained else self._reopens_at(result)))
        self._taken.append(result)

    def _closed(self, domain: str, result: TakeResult) -> None:
        self.skips[result.outcome] += 1
        if result.outcome in Outcome.WAITING:
            self._updates.append((domain, self._reopens_at(result)))
        elif result.outcome in (Outcome.EMPTY, Outcome.BLACKLISTED):
            self._updates.append((domain, ReadyIndex.REMOVE))
        # disallowed URLs were removed: it stays due and may have allowed ones next

    def _reopens_at(self, result: TakeResult) -> str:
        """The index op that makes the domain due when the step said: its wait counts from the step's Redis time, or,
        when no step script ran (robots.txt pending or unreachable: no Redis time), from the last index call's.
        Counted from zero, such a wait would be long past and the domain probed again at every batch."""
        return ReadyIndex.set_op((result.now or self._index_now) + result.wait)

    def _fetch(self) -> bool:
        """One index call: write back the updates, read the due domains; False (and :attr:`wake_in`) when none."""
        with self._reopen_lock:
            reopened, self._reopen = self._reopen, set()
        updates, self._updates = self._updates, []
        updates += [(domain, ReadyIndex.REOPEN) for domain in reopened if domain is not None]
        lost, self.lost = self.lost, 0
        try:
            due = self.index.due(updates, lost=lost, reopen_all=None in reopened)
            emptied = [domain for domain, op in updates if op == ReadyIndex.REMOVE]
            back = self.index.nonempty(emptied) if emptied else []
            if back:  # tasks landed between the step and the removal: put them back (frontier.client.ready, invariant)
                self.skips["readded"] += len(back)
                due = self.index.due([(domain, ReadyIndex.ADD) for domain in back])
        except Exception:
            self._updates = updates + self._updates  # applied again at the next call (every op is idempotent)
            self.lost += lost
            with self._reopen_lock:
                self._reopen |= reopened
            raise
        self._index_now = due.now
        self._due.extend(due.domains)
        if due.domains:
            return True
        self.wake_in = self.idle_poll if due.next_due is None else min(self.idle_poll, max(0.0, due.next_due - due.now))
        return False

    def _reconcile(self) -> None:
        now = self.clock.now()
        if self._next_reconcile is None:
            self._next_reconcile = now + self.reconcile_tick
        elif now >= self._next_reconcile:
            self._next_reconcile = now + self.reconcile_tick
            added = self.index.reconcile(self.reconcile_seconds, self.reconcile_tick)
            if added:
                self.skips["reconciled"] += added
