"""The frontier client's pure parts: send slots on this process's clock, and a client without rules (pure logic)."""

from __future__ import annotations

import pytest

from frontier.client import FrontierClient, Lease, Outcome, Reservation, TakeResult
from messaging.clock import RedisTimeMap

pytestmark = pytest.mark.unit


class NoRedis:
    """Scripts are bound (their SHA computed here), never run: nothing is asked of Redis."""

    def register_script(self, source: str) -> object:
        return object()


def test_a_slot_on_the_redis_clock_becomes_one_on_this_process_clock() -> None:
    lease = Lease("site.test", "{}", deadline=1_000.0, not_before=105.5, slack=0.2, hit="h1")
    taken = TakeResult(Outcome.TAKEN, "site.test", now=100.0, lease=lease)
    slot = taken.send_slot(local_now=7.0, ip="10.0.0.9")
    assert (slot.domain, slot.send_at, slot.slack, slot.hit, slot.ip) == ("site.test", 12.5, 0.2, "h1", "10.0.0.9")
    # a slot already past on the Redis clock goes out at once, not in the past
    assert Reservation("site.test", now=100.0, not_before=99.0, slack=0.1, hit="h2").send_slot(7.0).send_at == 7.0


def test_slots_are_mapped_with_the_fastest_reply_not_with_the_late_one_that_carried_them() -> None:
    """Issue 37, item 7: a reply read 0.25 s after its Redis time (a busy feed thread) used to put its slot 0.25 s
    late on this clock, and a request 'on time' then reached the site a quarter second after its hit was counted.
    With the offset of the fastest recent replies the slot is where the Redis clock put it, and a slot that passed
    while the reply travelled is in the past: the sender reserves again instead of sending late."""
    times = RedisTimeMap(memory=16.0)
    assert times.offset is None and times.stale(0.0)
    times.observe(redis_now=1_000.0, local_now=5.002)  # a fast reply: the clocks are 995 s apart, give or take 2 ms
    times.observe(redis_now=1_001.0, local_now=6.250)  # a slow one
    assert times.offset == pytest.approx(-994.998) and not times.stale(6.25)
    lease = Lease("site.test", "{}", deadline=2_000.0, not_before=1_001.1, slack=0.2, hit="h1")
    slot = TakeResult(Outcome.TAKEN, "site.test", now=1_001.0, lease=lease).send_slot(6.250, offset=times.offset)
    assert slot.send_at == pytest.approx(6.102)  # the reply's own offset would say 6.35
    past = Reservation("site.test", now=1_001.0, not_before=1_001.0, slack=0.1, hit="h2")
    assert past.send_slot(6.250, offset=times.offset).send_at == pytest.approx(6.002)  # missed: before now
    # the minimum is remembered for ``memory`` seconds of this clock only (the two clocks may drift apart)
    times.observe(redis_now=1_030.0, local_now=35.010)
    assert times.offset == pytest.approx(-994.99) and times.stale(35.010 + 8.0)


def test_a_client_without_rules_refuses_to_take_with_the_reason() -> None:
    client = FrontierClient(NoRedis(), "job")  # type: ignore[arg-type]  # the master's: it requeues, never takes
    with pytest.raises(RuntimeError, match="no politeness rules"):
        client.take("site.test")
    with pytest.raises(RuntimeError, match="no politeness rules"):
        client.reserve("site.test")
    assert client.lease_seconds == 600.0 and client.counts == {}
