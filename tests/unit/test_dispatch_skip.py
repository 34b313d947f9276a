"""The dispatcher's skip mark: past the leading seeds of spider types without a live worker, for a while only."""

from __future__ import annotations

import pytest

from master.dispatcher import SKIP_MEMORY_SECONDS, SkipMark

pytestmark = pytest.mark.unit


def test_a_mark_holds_for_the_same_live_types_within_its_memory():
    live = frozenset({"list"})
    mark = SkipMark(1234.5, live, since=100.0)
    assert mark.holds(live, 100.0 + SKIP_MEMORY_SECONDS - 0.001)
    assert mark.start() == "(1234.5"
    assert not mark.holds(live, 100.0 + SKIP_MEMORY_SECONDS)  # forgotten: scan from the start again
    assert not mark.holds(frozenset({"list", "universal"}), 101.0)  # a new type is live: its tasks lead
