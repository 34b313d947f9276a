"""The walk over a job's ready index, in simulated time: only due, non-empty domains are asked, fairly; a lost
index entry is repaired by the reconcile; a removal re-checks the queue (frontier/ready.py's invariant)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from itertools import pairwise

import pytest

from frontier.client import Outcome, TakeResult
from frontier.client.ready import RECONCILE_MIN_SLICE, Due, ReadyIndex
from frontier.domain_walk import ReadyWalk
from messaging.clock import ManualClock
from tests.unit.test_domain_walk import SimulatedSites

pytestmark = pytest.mark.unit


class FakeIndex:
    """``frontier.ready.ReadyIndex`` in memory, with the same ops as ``lua/ready_walk.lua`` (a zset: ties by name)."""

    def __init__(self, clock: ManualClock, sites: SimulatedSites, batch: int = 64) -> None:
        self.clock = clock
        self.sites = sites
        self.batch = batch
        self.scores: dict[str, float] = {}
        self.gauge = 0
        self.calls: Counter[str] = Counter()
        self.cursor = 0
        self.before_nonempty = lambda: None  # a hook: something lands between the removal and the re-check

    def land(self, domain: str, tasks: int, index: bool = True) -> None:
        """Tasks land in the queue, then (unless the update is lost) the domain enters the index (NX)."""
        self.sites.queues[domain] = self.sites.queues.get(domain, 0) + tasks
        self.sites.hits.setdefault(domain, [])
        if index:
            self.scores.setdefault(domain, self.clock.now())
            self.gauge += tasks

    def due(self, updates: Sequence[tuple[str, str]] = (), lost: int = 0, reopen_all: bool = False,
            limit: int | None = None, now: float | None = None) -> Due:
        self.calls["due"] += 1
        now = self.clock.now()
        if reopen_all:
            self.scores = {d: min(s, now) for d, s in self.scores.items()}
        self.gauge = max(0, self.gauge - lost)
        for domain, op in updates:
            if op == ReadyIndex.REMOVE:
                self.scores.pop(domain, None)
            elif op == ReadyIndex.ADD:
                self.scores.setdefault(domain, now)
            elif op == ReadyIndex.REOPEN:
                if domain in self.scores:
                    self.scores[domain] = min(self.scores[domain], now)
            elif domain in self.scores:
                self.scores[domain] = int(op[1:]) / 1_000_000
        ordered = sorted((score, domain) for domain, score in self.scores.items())
        due = [domain for score, domain in ordered if score <= now][: limit or self.batch]
        later = [score for score, _ in ordered if score > now]
        return Due(now, due, later[0] if later else None)

    def nonempty(self, domains: Sequence[str]) -> list[str]:
        self.before_nonempty()
        self.calls["exists"] += len(domains)
        return [domain for domain in domains if self.sites.queues.get(domain)]

    def reconcile(self, period: float, tick: float) -> int:
        known = sorted(self.sites.queues)
        count = max(RECONCILE_MIN_SLICE, math.ceil(len(known) * tick / period))
        chunk = known[self.cursor:self.cursor + count]
        self.cursor = 0 if self.cursor + count >= len(known) else self.cursor + count
        missing = [d for d in chunk if d not in self.scores and self.sites.queues.get(d)]
        for domain in missing:
            self.scores[domain] = self.clock.now()
        return len(missing)


def ready_walk(sites: SimulatedSites, clock: ManualClock, **options: float) -> tuple[ReadyWalk, FakeIndex]:
    index = FakeIndex(clock, sites)
    for domain, tasks in list(sites.queues.items()):
        if tasks:
            index.scores[domain] = clock.now()
            index.gauge += tasks
    walk = ReadyWalk(sites.take, index, clock=clock, sleep=clock.advance, **options)
    return walk, index


def test_due_domains_are_served_in_turn_oldest_due_first() -> None:
    clock = ManualClock()
    sites = SimulatedSites(clock, {"a.com": 10, "b.com": 10, "c.com": 10})
    walk, _ = ready_walk(sites, clock)
    order = []
    for _ in range(9):
        order.append(walk.next(timeout=1).domain)
        clock.advance(0.001)
    assert order == ["a.com", "b.com", "c.com"] * 3


def test_empty_domains_are_never_probed() -> None:
    """10,000 domains of which 10 have tasks: the steps asked are the tasks, plus one per domain that drains."""
    clock = ManualClock()
    queues = {f"site{i}.com": 0 for i in range(10_000)}
    queues.update({f"site{i}.com": 5 for i in range(0, 10_000, 1000)})
    sites = SimulatedSites(clock, queues)
    walk, index = ready_walk(sites, clock)
    taken = 0
    while walk.next(timeout=5.0) is not None:
        taken += 1
        clock.advance(0.001)
    assert taken == 50
    assert sites.calls == 50 + 10  # each of the 10 domains asked once more, found empty, and removed
    assert index.scores == {}
    assert index.gauge == 0


def test_a_throttled_domain_is_asked_again_only_when_the_step_said() -> None:
    clock = ManualClock()
    sites = SimulatedSites(clock, {"a.com": 50, "b.com": 50}, limit={"a.com": 1}, window=10.0)
    walk, _ = ready_walk(sites, clock)
    served = []
    for _ in range(20):
        served.append(walk.next(timeout=1).domain)
        clock.advance(0.1)
    assert served.count("a.com") == 1
    assert walk.skips[Outcome.THROTTLED] == 1  # asked once; the index kept its due time since


def test_sleeps_until_the_earliest_domain_is_due() -> None:
    clock = ManualClock()
    sites = SimulatedSites(clock, {"a.com": 10, "b.com": 10}, limit={"a.com": 1, "b.com": 1}, window=5.0)
    walk, _ = ready_walk(sites, clock, max_sleep=60.0, idle_poll=60.0)
    start = clock.now()
    assert walk.next().domain == "a.com"
    clock.advance(2.0)
    assert walk.next().domain == "b.com"
    calls = sites.calls
    assert walk.next().domain == "a.com"
    assert clock.now() == pytest.approx(start + 5.0)
    assert sites.calls - calls <= 3


def test_a_lost_index_update_is_repaired_by_the_reconcile_within_its_period() -> None:
    clock = ManualClock()
    queues = {f"site{i}.com": 0 for i in range(1000)}
    sites = SimulatedSites(clock, queues)
    walk, index = ready_walk(sites, clock, reconcile_seconds=20.0, reconcile_tick=1.0, idle_poll=1.0)
    index.land("site999.com", 3, index=False)  # the master died between the queue write and the index write
    landed = clock.now()
    result = walk.next(timeout=30.0)
    assert result is not None and result.domain == "site999.com"
    assert clock.now() - landed <= 20.0 + 1.0
    assert walk.skips["reconciled"] == 1


def test_tasks_landing_between_the_empty_step_and_the_removal_are_not_stranded() -> None:
    clock = ManualClock()
    sites = SimulatedSites(clock, {"a.com": 1})
    walk, index = ready_walk(sites, clock, reconcile_seconds=3600.0)
    assert walk.next(timeout=1).domain == "a.com"

    def land_without_index() -> None:  # the landing's queue write came before the re-check (its index add is NX)
        sites.queues["a.com"] = 2
        index.before_nonempty = lambda: None

    index.before_nonempty = land_without_index
    result = walk.poll()  # the step says empty; the removal, then the re-check finds the new tasks
    assert result is not None and result.domain == "a.com"
    assert walk.skips["readded"] == 1 and walk.skips[Outcome.EMPTY] == 1


def test_fair_share_across_fifty_domains_with_throttles() -> None:
    clock = ManualClock()
    domains = {f"site{i}.com": 1000 for i in range(50)}
    limits = {f"site{i}.com": 5 for i in range(0, 50, 5)}
    sites = SimulatedSites(clock, domains, limit=limits, window=1.0)
    walk, _ = ready_walk(sites, clock)
    served: Counter[str] = Counter()
    while clock.now() < 1_700_000_010.0:
        served[walk.next(timeout=1).domain] += 1
        clock.advance(0.01)
    unthrottled = [domain for domain in domains if domain not in limits]
    fair = sum(served[domain] for domain in unthrottled) / len(unthrottled)
    assert min(served[domain] for domain in unthrottled) >= fair * 0.8
    assert max(served[domain] for domain in unthrottled) <= fair * 1.2
    assert all(served[domain] <= 5 * 10 + 5 for domain in limits)


def test_a_reopened_domain_is_due_at_once_and_the_defaults_reopen_all() -> None:
    clock = ManualClock()
    sites = SimulatedSites(clock, {"slow.com": 50, "other.com": 50}, limit={"slow.com": 1, "other.com": 1},
                           window=120.0)
    walk, _ = ready_walk(sites, clock)
    assert {walk.poll().domain, walk.poll().domain} == {"slow.com", "other.com"}
    assert walk.poll() is None
    sites.limit["slow.com"] = 100_000
    walk.reopen("slow.com")
    result = walk.poll()
    assert result is not None and result.domain == "slow.com"
    sites.limit["other.com"] = 100_000
    walk.reopen(None)
    assert "other.com" in {walk.poll().domain for _ in range(3)}


def test_tasks_dropped_unfetched_are_handed_over_and_leave_the_gauge() -> None:
    clock = ManualClock()
    removed = []
    results = iter([TakeResult(Outcome.DISALLOWED, "x.com", clock.now(), removed=["t1", "t2"]),
                    TakeResult(Outcome.EMPTY, "x.com", clock.now())])
    sites = SimulatedSites(clock, {"x.com": 2})
    index = FakeIndex(clock, sites)
    index.land("x.com", 2)
    sites.queues["x.com"] = 0
    walk = ReadyWalk(lambda domain: next(results), index, clock=clock, sleep=clock.advance,
                     on_removed=lambda tasks, _: removed.extend(tasks))
    assert walk.poll() is None
    assert walk.poll() is None
    assert removed == ["t1", "t2"] and index.gauge == 0 and index.scores == {}


def test_a_domain_waiting_for_its_robots_txt_is_asked_again_only_after_the_wait() -> None:
    """A robots.txt-pending step runs no step script, so it has no Redis time (``now`` 0.0): its wait counts from the
    index call's time, not from zero (which would make it due at once and probe it at every batch)."""
    clock = ManualClock(1_000.0)
    sites = SimulatedSites(clock, {"a.com": 5, "b.com": 50})
    pending_at: list[float] = []

    def take(domain: str) -> TakeResult:
        if domain == "a.com" and clock.now() < 1_002.0:
            pending_at.append(clock.now())
            return TakeResult(Outcome.ROBOTS_PENDING, domain, wait=0.5)
        return sites.take(domain)

    walk, _ = ready_walk(sites, clock)
    walk.take = take
    served = []
    for _ in range(40):
        served.append(walk.next(timeout=1).domain)
        clock.advance(0.1)
    assert 4 <= len(pending_at) <= 5  # once per half second over its two seconds of waiting, not once per batch
    assert all(later - earlier >= 0.5 - 1e-9 for earlier, later in pairwise(pending_at))
    assert served.count("a.com") == 5  # then served as soon as its rules are known
