"""The frontier client's pure parts: send slots on this process's clock, and a client without rules (pure logic)."""

from __future__ import annotations

import pytest

from frontier.client import FrontierClient, Lease, Outcome, Reservation, TakeResult

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


def test_a_client_without_rules_refuses_to_take_with_the_reason() -> None:
    client = FrontierClient(NoRedis(), "job")  # type: ignore[arg-type]  # the master's: it requeues, never takes
    with pytest.raises(RuntimeError, match="no politeness rules"):
        client.take("site.test")
    with pytest.raises(RuntimeError, match="no politeness rules"):
        client.reserve("site.test")
    assert client.lease_seconds == 600.0 and client.counts == {}
