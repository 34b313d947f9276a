"""The interleaved weighted round robin of seed 4.2.1.1."""

from __future__ import annotations

from collections import Counter

import pytest

from master.wrr import InterleavedWRR

pytestmark = pytest.mark.unit


def picks(wrr: InterleavedWRR, n: int) -> list[str]:
    return [wrr.choose() for _ in range(n)]


def test_one_cycle_gives_each_worker_weight_over_gcd_picks() -> None:
    wrr = InterleavedWRR({"slave1": 360, "slave2": 420, "slave3": 480})
    assert Counter(picks(wrr, 21)) == {"slave1": 6, "slave2": 7, "slave3": 8}
    assert Counter(picks(wrr, 21 * 5)) == {"slave1": 30, "slave2": 35, "slave3": 40}


def test_the_seed_steps_give_this_sequence() -> None:
    # cw steps down from the max by the gcd; a worker is chosen while its weight is greater than cw
    wrr = InterleavedWRR({"a": 4, "b": 2, "c": 1})
    assert picks(wrr, 7) == ["a", "a", "a", "b", "a", "b", "c"]
    assert picks(wrr, 7) == ["a", "a", "a", "b", "a", "b", "c"]


def test_heavier_workers_are_interleaved_not_batched() -> None:
    wrr = InterleavedWRR({"a": 3, "b": 3})
    assert picks(wrr, 6) == ["a", "b", "a", "b", "a", "b"]


def test_update_keeps_the_position_and_new_weights_apply() -> None:
    wrr = InterleavedWRR({"a": 1, "b": 1, "c": 1})
    assert picks(wrr, 2) == ["a", "b"]
    wrr.update({"a": 1, "b": 1, "c": 1, "d": 1})
    assert picks(wrr, 3) == ["c", "d", "a"]
    wrr.update({"a": 1, "b": 3})
    assert Counter(picks(wrr, 40)) == {"a": 10, "b": 30}


def test_removed_and_weightless_members_are_never_chosen() -> None:
    wrr = InterleavedWRR({"a": 5, "b": 5, "c": 0})
    wrr.remove("a")
    assert set(picks(wrr, 10)) == {"b"}
    wrr.remove("b")
    assert wrr.choose() is None
    assert InterleavedWRR().choose() is None
