"""Paced hits in the politeness step, on real Redis in simulated time (explicit ``now``): spacing, burst, the window
as an upper bound, live rate changes, and the reservations of requests that go out without a lease's slot."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest

from bench.throttle import max_in_window
from frontier.client import FrontierClient, Outcome
from frontier.config_watch import StaticSiteConfig
from frontier.politeness import Politeness
from messaging import keys
from messaging.siteconfig import Rate, SiteConfig
from messaging.tasks import Task, queue_score

pytestmark = pytest.mark.integration

T0 = 1_700_000_000.0
DOMAIN = "paced.test"
IP1, IP2 = "10.2.0.1", "10.2.0.2"


@pytest.fixture(params=["single", pytest.param("cluster", marks=pytest.mark.cluster)])
def svc(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue("cf" if request.param == "single" else "cf_cluster")


def push(redis: Any, job: str, count: int) -> None:
    tasks = [Task(url=f"http://{DOMAIN}/{job}/{n}", crawlid="c", spider_type="list") for n in range(count)]
    redis.zadd(keys.queue(job, DOMAIN), {t.encode(): queue_score(100, n) for n, t in enumerate(tasks)})
    redis.sadd(keys.job_domains(job), DOMAIN)


def run(engines: list[FrontierClient], start: float, seconds: float, step: float = 0.01) -> list[float]:
    """Every engine asks as often as it can (every ``step`` of simulated time); the slots of the hits taken."""
    slots: list[float] = []
    t = start
    while t < start + seconds:
        for engine in engines:
            result = engine.take(DOMAIN, now=t)
            if result.outcome == Outcome.TAKEN:
                assert result.lease.not_before >= t - 1e-6
                assert result.lease.not_before - t <= engine.politeness.horizon + 1e-6
                slots.append(result.lease.not_before)
        t += step
    return sorted(slots)


def test_a_rate_is_spaced_evenly_across_workers(svc: Any) -> None:
    redis = svc.redis()
    rates = StaticSiteConfig(Rate(60, 60))  # one a second
    engines = [FrontierClient(redis, f"j{n}", "list", ip, Politeness(rates)) for n, ip in enumerate((IP1, IP1, IP2))]
    for engine in engines:
        push(redis, engine.job, 200)
    slots = run(engines[:2], T0, 30)  # two workers of one host: one type window, one IP window
    gaps = [b - a for a, b in pairwise(slots)]
    assert len(slots) >= 29 and min(gaps) >= 1.0 - 1e-6
    assert max_in_window(slots, 1.0) == 1 and max_in_window(slots, 60.0) <= 60
    # the third worker (another host, same spider type) shares the type bucket: still one a second in all
    more = run(engines, T0 + 40, 20)
    assert min(b - a for a, b in pairwise(more)) >= 1.0 - 1e-6


def test_a_burst_goes_out_at_once_then_the_spacing_holds(svc: Any) -> None:
    redis = svc.redis()
    engine = FrontierClient(redis, "j", "list", IP1, Politeness(StaticSiteConfig(Rate(60, 60, burst=5)), horizon=0))
    push(redis, "j", 100)
    assert [engine.take(DOMAIN, now=T0).outcome for _ in range(6)] == [Outcome.TAKEN] * 5 + [Outcome.THROTTLED]
    slots = run([engine], T0 + 0.5, 10)
    assert [s - T0 for s in slots[:3]] == pytest.approx([1.0, 2.0, 3.0], abs=0.02)  # one token a second
    # after a quiet spell of 5 s the burst is back
    later = T0 + 30
    assert [engine.take(DOMAIN, now=later).outcome for _ in range(6)] == [Outcome.TAKEN] * 5 + [Outcome.THROTTLED]


def test_the_sliding_window_stays_the_upper_bound(svc: Any) -> None:
    redis = svc.redis()
    # a burst as large as the window's allowance: the window is what stops the hits
    engine = FrontierClient(redis, "j", "list", IP1, Politeness(StaticSiteConfig(Rate(10, 10, burst=50)), horizon=0))
    push(redis, "j", 100)
    slots = run([engine], T0, 40, step=0.05)
    assert max_in_window(slots, 10.0) == 10  # both hold: at most 10 in any 10 s (they come in bursts of 10)


def test_a_raised_rate_applies_at_the_next_step_and_a_lowered_one_too(svc: Any) -> None:
    redis = svc.redis()
    sites = {DOMAIN: SiteConfig(rate=2, window=120)}  # one hit a minute
    rates = StaticSiteConfig(Rate(10, 60), sites)
    engine = FrontierClient(redis, "j", "list", IP1, Politeness(rates))
    push(redis, "j", 100)
    assert engine.take(DOMAIN, now=T0).outcome == Outcome.TAKEN
    closed = engine.take(DOMAIN, now=T0 + 1)
    assert closed.outcome == Outcome.THROTTLED and closed.wait == pytest.approx(58.0)
    rates.sites = {DOMAIN: SiteConfig(rate=100_000, window=60)}
    assert engine.take(DOMAIN, now=T0 + 1.5).outcome == Outcome.TAKEN  # no wait under the old rate
    rates.sites = {DOMAIN: SiteConfig(rate=6, window=60)}  # lowered: one every 10 s
    slots = run([engine], T0 + 2, 40)
    assert slots[0] == pytest.approx(T0 + 11.5)
    assert all(b - a >= 10 - 1e-6 for a, b in pairwise(slots))


def test_both_keys_keep_their_own_spacing(svc: Any) -> None:
    redis = svc.redis()
    rates = StaticSiteConfig(Rate(60, 60))
    same_type = FrontierClient(redis, "a", "list", IP2, Politeness(rates, horizon=0))
    same_ip = FrontierClient(redis, "b", "universal", IP1, Politeness(rates, horizon=0))
    other = FrontierClient(redis, "c", "universal", IP2, Politeness(rates, horizon=0))
    first = FrontierClient(redis, "d", "list", IP1, Politeness(rates, horizon=0))
    for engine in (same_type, same_ip, other, first):
        push(redis, engine.job, 5)
    assert first.take(DOMAIN, now=T0).outcome == Outcome.TAKEN
    assert same_type.take(DOMAIN, now=T0 + 0.5).outcome == Outcome.THROTTLED
    assert same_ip.take(DOMAIN, now=T0 + 0.5).outcome == Outcome.THROTTLED
    assert other.take(DOMAIN, now=T0 + 0.5).outcome == Outcome.TAKEN


def test_a_fast_sites_slack_is_a_share_of_its_window_and_its_window_stays_exact(svc: Any) -> None:
    """CRAWLFLEET_PACE_SLACK_SHARE: 100 hits per 10 s (a fifth of the spacing is 20 ms, the floor 50 ms) get a slack
    of 1 % of the window plus the way out, 0.1 + 0.1 s, for leases and reservations alike, and the window is checked
    that much wider: even when every hit of a burst leaves as late as its slack allows, no 10 s hold more than 100."""
    redis = svc.redis()
    rates = StaticSiteConfig(Rate(100, 10, burst=100))  # the window binds: bursts of 100
    engine = FrontierClient(redis, "j", "list", IP1, Politeness(rates, horizon=0, slack=0.05, slack_share=0.01))
    push(redis, "j", 400)
    assert engine.take(DOMAIN, now=T0).lease.slack == pytest.approx(0.2)
    assert engine.reserve(DOMAIN, now=T0).slack == pytest.approx(0.2)
    slots = [T0, T0, *run([engine], T0, 25, step=0.05)]
    assert slots[100] == pytest.approx(T0 + 10 + 0.2)  # the 101st hit: a window and a slack after the first
    late = [slot + 0.2 if slot < T0 + 1 else slot for slot in slots]  # the first burst leaves 0.2 s late
    assert len(slots) >= 250 and max_in_window(late, 10.0) == 100
    # without the share the slack is the floor, 50 ms: a request 0.1 s late would have to reserve again
    push(redis, "k", 1)
    floor_only = FrontierClient(redis, "k", "list", IP2, Politeness(rates, slack=0.05))
    assert floor_only.take(DOMAIN, now=T0 + 100).lease.slack == pytest.approx(0.05)


def test_a_missed_slot_is_withdrawn_and_a_follow_up_gets_its_own(svc: Any) -> None:
    redis = svc.redis()
    engine = FrontierClient(redis, "j", "list", IP1, Politeness(StaticSiteConfig(Rate(60, 60))))
    push(redis, "j", 5)
    lease = engine.take(DOMAIN, now=T0).lease
    assert lease.not_before == pytest.approx(T0) and lease.slack == pytest.approx(0.2)  # a fifth of 1 s
    assert redis.zscore(keys.throttle_type("list", DOMAIN), lease.hit) == pytest.approx(T0 * 1e6)
    # the request could not leave before T0 + 3: its hit is withdrawn and the next slot is its own
    again = engine.reserve(DOMAIN, lease.hit, now=T0 + 3)
    assert again.not_before == pytest.approx(T0 + 3)
    assert redis.zscore(keys.throttle_type("list", DOMAIN), lease.hit) is None
    assert redis.zcard(keys.throttle_type("list", DOMAIN)) == 1 == redis.zcard(keys.throttle_ip(IP1, DOMAIN))
    # a follow-up (a redirect) reserved right after waits its turn, far beyond the horizon if it must
    follow = engine.reserve(DOMAIN, now=T0 + 3)
    assert follow.not_before == pytest.approx(T0 + 4)
    assert follow.recorded and redis.zcard(keys.throttle_type("list", DOMAIN)) == 2
    engine.block(DOMAIN, 30, now=T0 + 3)
    blocked = engine.reserve(DOMAIN, now=T0 + 3)
    assert blocked.not_before == pytest.approx(T0 + 33)  # not before the block ends...
    assert not blocked.recorded and redis.zcard(keys.throttle_type("list", DOMAIN)) == 2  # ...and beyond the horizon
    assert engine.reserve(DOMAIN, now=T0 + 32.5).recorded


def test_the_shared_adaptive_delay_follows_the_rule_and_spaces_an_adaptive_site(svc: Any) -> None:
    from frontier.adaptive import AdaptiveDelay, AdaptiveRule, Sample

    redis = svc.redis()
    rule = AdaptiveRule(target_concurrency=1.0, max_delay=30.0)
    shared = AdaptiveDelay(redis, rule)
    samples = [Sample(DOMAIN, 0.01), Sample(DOMAIN, 2.5), Sample(DOMAIN, 0.02, 404), Sample(DOMAIN, 0.0, 0, True),
               Sample(DOMAIN, 0.3, 503, True), Sample(DOMAIN, 0.05)]
    expected, delay = [], 0.0
    for sample in samples:
        delay = rule.next_delay(delay, sample, 1.0)
        expected.append(delay)
    got = [shared.record([sample], {DOMAIN: 1.0}, now=T0 + n)[DOMAIN] for n, sample in enumerate(samples)]
    assert got == pytest.approx(expected, abs=1e-5)  # the Lua is the rule, sample by sample
    state = shared.state(DOMAIN)
    assert state.delay == pytest.approx(expected[-1], abs=1e-5) and state.errors == 0 and state.at == T0 + 5

    # the step spaces an adaptive site max(W/N, delay) apart; a site that is not adaptive ignores the delay
    adaptive = StaticSiteConfig(Rate(60, 60), {DOMAIN: SiteConfig(adaptive=True)})
    engine = FrontierClient(redis, "j", "list", IP1, Politeness(adaptive, horizon=0))
    plain = FrontierClient(redis, "k", "universal", IP2, Politeness(StaticSiteConfig(Rate(60, 60)), horizon=0))
    push(redis, "j", 10)
    push(redis, "k", 10)
    assert engine.take(DOMAIN, now=T0 + 100).outcome == Outcome.TAKEN
    refused = engine.take(DOMAIN, now=T0 + 100.5)
    assert refused.outcome == Outcome.THROTTLED and refused.wait == pytest.approx(expected[-1] - 0.5, abs=1e-4)
    assert plain.take(DOMAIN, now=T0 + 100).outcome == Outcome.TAKEN
    assert plain.take(DOMAIN, now=T0 + 101).outcome == Outcome.TAKEN  # one a second: the delay is not its own


def test_windows_keep_an_expiry_through_withdrawals_and_shed_hits_that_left_them(svc: Any) -> None:
    """Issue 39: a window is no longer trimmed nor its expiry set on every hit (pace.lua): a window a withdrawal
    emptied (deleted, expiry and all) gets its expiry back with the next hit, and hits that left it go every 32."""
    redis = svc.redis()
    engine = FrontierClient(redis, "j", "list", IP1, Politeness(StaticSiteConfig(Rate(60, 60))))
    push(redis, "j", 200)
    windows = [keys.throttle_type("list", DOMAIN), keys.throttle_ip(IP1, DOMAIN)]
    buckets = [keys.pace_type("list", DOMAIN), keys.pace_ip(IP1, DOMAIN)]
    lease = engine.take(DOMAIN, now=T0).lease
    assert all(redis.pttl(key) > 0 for key in windows + buckets)
    again = engine.reserve(DOMAIN, lease.hit, now=T0 + 3)  # the only hit withdrawn: both windows were deleted
    assert again.recorded and all(redis.zcard(key) == 1 and redis.pttl(key) > 0 for key in windows)
    hits = {lease.hit, again.hit}
    for second in range(4, 130):
        result = engine.take(DOMAIN, now=T0 + second)
        assert result.outcome == Outcome.TAKEN
        hits.add(result.lease.hit)
    assert len(hits) == 128  # every hit's member is unique
    for key in windows:  # at most 61 hits in the window (60 s and the slack), and fewer than 32 that left it
        assert redis.zcount(key, (T0 + 129 - 60.2) * 1e6, "+inf") == 61 and redis.zcard(key) < 61 + 32
        assert redis.pttl(key) > 0
