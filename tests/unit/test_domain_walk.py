"""The fair domain walk in simulated time: round robin, skips, sleeping until the earliest domain opens."""

from __future__ import annotations

from collections import Counter

import pytest

from frontier.client import Lease, Outcome, TakeResult
from frontier.domain_walk import DomainWalk
from messaging.clock import ManualClock
from messaging.tasks import Task

pytestmark = pytest.mark.unit


class SimulatedSites:
    """Per-domain queues and exact sliding windows of ``limit`` hits per ``window`` seconds, on a ManualClock."""

    def __init__(self, clock: ManualClock, tasks: dict[str, int], limit: dict[str, int] | None = None,
                 window: float = 1.0) -> None:
        self.clock = clock
        self.queues = dict(tasks)
        self.limit = limit or {}
        self.window = window
        self.hits: dict[str, list[float]] = {domain: [] for domain in tasks}
        self.blocked_until: dict[str, float] = {}
        self.calls = 0

    def take(self, domain: str) -> TakeResult:
        self.calls += 1
        now = self.clock.now()
        if self.blocked_until.get(domain, 0.0) > now:
            return TakeResult(Outcome.BLOCKED, domain, now, wait=self.blocked_until[domain] - now)
        if not self.queues.get(domain):
            return TakeResult(Outcome.EMPTY, domain, now)
        recent = [t for t in self.hits[domain] if now - t < self.window]
        limit = self.limit.get(domain)
        if limit is not None and len(recent) >= limit:
            return TakeResult(Outcome.THROTTLED, domain, now, wait=recent[len(recent) - limit] + self.window - now)
        self.hits[domain].append(now)
        self.queues[domain] -= 1
        task = Task(url=f"http://{domain}/{self.queues[domain]}", crawlid="c", spider_type="list")
        return TakeResult(Outcome.TAKEN, domain, now, lease=Lease(domain, task.encode(), now + 60))


def walk_for(sites: SimulatedSites, clock: ManualClock, **options: float) -> tuple[DomainWalk, list[float]]:
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.advance(seconds)

    walk = DomainWalk(sites.take, lambda: list(sites.queues), clock=clock, sleep=sleep, **options)
    return walk, sleeps


def test_round_robin_serves_each_domain_in_turn() -> None:
    clock = ManualClock()
    sites = SimulatedSites(clock, {"a.com": 10, "b.com": 10, "c.com": 10})
    walk, _ = walk_for(sites, clock)
    order = [walk.next(timeout=1).domain for _ in range(9)]
    assert order == ["a.com", "b.com", "c.com"] * 3


def test_no_domain_is_always_first_after_a_refresh() -> None:
    clock = ManualClock()
    sites = SimulatedSites(clock, {"a.com": 100, "b.com": 100, "c.com": 100})
    walk, _ = walk_for(sites, clock, refresh_seconds=0.0)  # re-read the list before every pass
    firsts = Counter()
    for _ in range(30):
        firsts[walk.poll().domain] += 1
        clock.advance(0.01)
    assert firsts == {"a.com": 10, "b.com": 10, "c.com": 10}


def test_throttled_domain_is_skipped_until_it_opens_and_skips_are_counted() -> None:
    clock = ManualClock()
    sites = SimulatedSites(clock, {"a.com": 50, "b.com": 50, "c.com": 50}, limit={"a.com": 1}, window=10.0)
    walk, _ = walk_for(sites, clock)
    served = []
    for _ in range(20):
        served.append(walk.next(timeout=1).domain)
        clock.advance(0.1)
    assert served.count("a.com") == 1  # 2 s of simulated time, 1 hit per 10 s
    assert served.count("b.com") >= 9 and served.count("c.com") >= 9
    assert walk.skips[Outcome.THROTTLED] == 1  # Redis was asked once; afterwards the walk knew the wait
    assert walk.skips["waiting"] >= 8  # every other pass starts at a.com and passes it over


def test_sleeps_until_the_earliest_domain_opens_without_spinning() -> None:
    clock = ManualClock()
    sites = SimulatedSites(clock, {"a.com": 10, "b.com": 10}, limit={"a.com": 1, "b.com": 1}, window=5.0)
    walk, sleeps = walk_for(sites, clock, max_sleep=60.0)
    start = clock.now()
    assert walk.next().domain == "a.com"
    clock.advance(2.0)
    assert walk.next().domain == "b.com"
    calls_before = sites.calls
    result = walk.next()
    assert result.domain == "a.com"
    assert clock.now() == pytest.approx(start + 5.0)  # a's window opened exactly then
    assert sleeps[-1] == pytest.approx(3.0)  # one sleep, not a spin of small ones
    assert sites.calls - calls_before <= 3  # both refused once, then a taken


def test_blocked_domain_waits_for_the_block_to_end() -> None:
    clock = ManualClock()
    sites = SimulatedSites(clock, {"a.com": 10, "b.com": 0})
    sites.blocked_until["a.com"] = clock.now() + 30.0
    walk, _ = walk_for(sites, clock, max_sleep=60.0)
    assert walk.next(timeout=29.0) is None
    assert walk.next(timeout=2.0).domain == "a.com"
    assert walk.skips[Outcome.BLOCKED] >= 1


def test_empty_domains_back_off_and_new_tasks_are_noticed() -> None:
    clock = ManualClock()
    sites = SimulatedSites(clock, {"a.com": 0, "b.com": 0})
    walk, _ = walk_for(sites, clock, max_empty_backoff=1.0)
    assert walk.next(timeout=10.0) is None
    # per domain: the doublings 0.05 .. 0.8 s (5 calls), then one call per second (10), not a spin
    assert sites.calls <= 2 * (5 + 10 + 1)
    sites.queues["b.com"] = 1
    asked_at = clock.now()
    assert walk.next(timeout=5.0).domain == "b.com"
    assert clock.now() - asked_at <= 1.0


def test_new_domains_join_the_ring_on_refresh() -> None:
    clock = ManualClock()
    sites = SimulatedSites(clock, {"a.com": 10})
    walk, _ = walk_for(sites, clock, refresh_seconds=0.5)
    assert walk.next(timeout=1).domain == "a.com"
    sites.queues["b.com"] = 10
    sites.hits["b.com"] = []
    clock.advance(1.0)
    assert {walk.next(timeout=1).domain for _ in range(4)} == {"a.com", "b.com"}


def test_removed_tasks_are_handed_to_the_caller() -> None:
    clock = ManualClock()
    removed: list[Task] = []
    dropped = [Task(url="http://x.com/private", crawlid="c", spider_type="list")]
    results = iter([TakeResult(Outcome.DISALLOWED, "x.com", removed=dropped),
                    TakeResult(Outcome.EMPTY, "x.com")])
    walk = DomainWalk(lambda domain: next(results), lambda: ["x.com"], clock=clock, sleep=clock.advance,
                      on_removed=lambda tasks, _: removed.extend(tasks))
    assert walk.poll() is None
    assert walk.wake_in == 0.0  # disallowed URLs were dropped: ask again at once
    assert walk.poll() is None
    assert removed == dropped


def test_fair_share_across_fifty_domains_with_throttles() -> None:
    clock = ManualClock()
    domains = {f"site{i}.com": 1000 for i in range(50)}
    limits = {f"site{i}.com": 5 for i in range(0, 50, 5)}  # every fifth domain: 5 hits per second
    sites = SimulatedSites(clock, domains, limit=limits, window=1.0)
    walk, _ = walk_for(sites, clock)
    served: Counter[str] = Counter()
    while clock.now() < 1_700_000_010.0:  # 10 s; one task per 10 ms of processing
        result = walk.next(timeout=1)
        served[result.domain] += 1
        clock.advance(0.01)
    unthrottled = [domain for domain in domains if domain not in limits]
    fair = sum(served[domain] for domain in unthrottled) / len(unthrottled)
    assert min(served[domain] for domain in unthrottled) >= fair / 2
    assert max(served[domain] for domain in unthrottled) <= fair * 1.5
    assert all(served[domain] <= 5 * 10 + 5 for domain in limits)


def test_a_changed_site_is_asked_again_at_once_not_after_the_old_wait() -> None:
    clock = ManualClock()
    sites = SimulatedSites(clock, {"slow.com": 50, "other.com": 0}, limit={"slow.com": 2}, window=120.0)
    walk, _ = walk_for(sites, clock)
    assert [walk.poll().domain for _ in range(2)] == ["slow.com", "slow.com"]
    assert walk.poll() is None  # throttled under the old rate for two minutes
    clock.advance(1.0)
    calls = sites.calls
    assert walk.poll() is None and sites.calls == calls + 1  # only the empty domain was asked: slow.com waits
    sites.limit["slow.com"] = 100_000  # the site's rate was raised; the config watch tells the walk
    walk.reopen("slow.com")
    result = walk.poll()
    assert result is not None and result.domain == "slow.com" and walk.skips["reopened"] == 1
    # a change of the defaults (None), or of a name the walk does not know, reopens every domain
    sites.limit["slow.com"] = 3  # lowered again: closed for the window
    assert walk.poll() is None
    walk.reopen("unknown.example")
    calls = sites.calls
    walk.poll()
    assert sites.calls == calls + 2
