"""When the worker's lease upkeep asks a domain for expired leases (pure logic: the engine is a recorder)."""

from __future__ import annotations

from typing import Any

import pytest

from spiders.worker.leases import LeaseKeeper

pytestmark = pytest.mark.unit


def test_a_domain_taken_from_after_its_check_is_checked_again_a_lease_later() -> None:
    asked: list[list[str]] = []

    class Engine:
        def requeue_expired_many(self, domains: list[str]) -> list[list[Any]]:
            asked.append(list(domains))
            return [[] for _ in domains]

        class ready:  # the client's ready index, as an attribute
            @staticmethod
            def requeued(counts: dict[str, int]) -> None:
                assert not counts

    keeper = LeaseKeeper(Engine(), 6.0)  # type: ignore[arg-type]
    keeper.attempted(["a", "b"], 0.0)
    keeper.attempted(["b"], 6.5)  # b taken from again: its new lease may expire from 12.5 on
    keeper.requeue_expired(7.0)
    assert asked == [["a", "b"]]
    keeper.requeue_expired(13.0)  # a is forgotten; b's takes up to 7.0 are covered only from 14.0
    assert asked == [["a", "b"]]
    keeper.requeue_expired(14.0)
    assert asked == [["a", "b"], ["b"]]
    keeper.requeue_expired(100.0)
    assert len(asked) == 2
