"""The adaptive rule (frontier.adaptive.AdaptiveRule) in simulated time: a site that slows down and recovers."""

from __future__ import annotations

import pytest

from frontier.adaptive import AdaptiveRule, Sample
from messaging.siteconfig import Rate

pytestmark = pytest.mark.unit

SPACING = Rate(120, 60).spacing  # 0.5 s


def simulate(rule: AdaptiveRule, latency_at: list[tuple[float, float]], seconds: float, error_from: float = -1,
             error_until: float = -1) -> list[tuple[float, float]]:
    """One request at a time, each sent when the spacing allows it: (send time, spacing used) per request."""
    delay, t, out = 0.0, 0.0, []
    while t < seconds:
        latency = next(value for start, value in reversed(latency_at) if t >= start)
        spacing = max(SPACING, delay)
        out.append((t, spacing))
        error = error_from <= t < error_until
        delay = rule.next_delay(delay, Sample("s.test", latency, 503 if error else 200, error), SPACING)
        t += max(spacing, latency)  # the next request leaves when its slot comes and the answer is in
    return out


def spacing_at(history: list[tuple[float, float]], t: float) -> float:
    return next(spacing for sent, spacing in reversed(history) if sent <= t)


def test_a_slow_site_is_spaced_out_at_once_and_recovers_to_its_rate() -> None:
    rule = AdaptiveRule(target_concurrency=1.0, max_delay=60.0)
    history = simulate(rule, [(0, 0.01), (60, 2.0), (120, 0.01)], 300)
    assert spacing_at(history, 59) == SPACING  # fast and healthy: the configured rate
    assert spacing_at(history, 64) >= 2 * SPACING  # within a few seconds of the slowdown, at least double
    assert spacing_at(history, 119) == pytest.approx(2.0, rel=0.01)  # spacing = latency / target concurrency
    assert spacing_at(history, 130) == SPACING  # back within seconds of the recovery (halved per response)


def test_errors_double_the_spacing_up_to_the_maximum_and_never_go_below_the_rate() -> None:
    rule = AdaptiveRule(max_delay=8.0)
    delay = 0.0
    seen = []
    for _ in range(6):
        delay = rule.next_delay(delay, Sample("s.test", 0.0, 0, error=True), SPACING)
        seen.append(delay)
    assert seen == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    # healthy again: halfway back per response, and the pace is never faster than the configured rate
    for _ in range(20):
        delay = rule.next_delay(delay, Sample("s.test", 0.001, 200), SPACING)
    assert delay < SPACING and max(SPACING, delay) == SPACING


def test_small_answers_never_make_a_site_look_faster_and_concurrency_scales_the_target() -> None:
    rule = AdaptiveRule(target_concurrency=2.0)
    assert rule.next_delay(3.0, Sample("s.test", 0.01, 404), SPACING) == 3.0
    assert rule.next_delay(3.0, Sample("s.test", 0.01, 200), SPACING) == pytest.approx(1.5025)
    assert rule.next_delay(0.0, Sample("s.test", 4.0, 301), SPACING) == 2.0  # slower: followed, whatever the status
