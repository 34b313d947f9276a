"""bench.recrawl's figures from the changing site's log (pure functions)."""

from __future__ import annotations

import pytest

from bench.recrawl import figures, new_article_lags, revisits, staleness

pytestmark = pytest.mark.unit


def test_staleness_counts_from_the_first_change_after_a_fetch_to_the_next_fetch() -> None:
    state = {"now": 100.0, "pages": {
        # fetched at 0, 50; changes at 10 and 20 (lagging from 10 to 50: 40²/2) and 70 (from 70 to 100: 30²/2)
        "/a/0.html": {"fetches": [[0.0, 200, 0], [50.0, 200, 2]], "changes": [10.0, 20.0, 70.0], "published": 0.0},
        # never changes: observed 80 s, never stale
        "/a/1.html": {"fetches": [[20.0, 200, 0], [60.0, 304, 0]], "changes": [], "published": 0.0},
        "/a/2.html": {"fetches": [], "changes": [5.0], "published": 0.0},  # never fetched: not counted
    }, "list_fetches": [0.0, 30.0, 90.0], "counts": {"200": 3, "304": 1, "list": 3}}
    assert staleness(state) == (800.0 + 450.0, 180.0)
    assert revisits(state) == (2 + 2, 100 + 80 + 100)
    assert figures(state)["mean_staleness_site_min"] == round(1250 / 180 / 60, 3)


def test_new_articles_are_measured_against_the_list_interval_around_them() -> None:
    state = {"now": 100.0, "list_fetches": [0.0, 40.0, 90.0], "pages": {
        "/a/0.html": {"fetches": [[1.0, 200, 0]], "changes": [], "published": 0.0},  # there from the start
        "/a/1.html": {"fetches": [[42.0, 200, 0]], "changes": [], "published": 30.0},  # found at 40: gap 40
        "/a/2.html": {"fetches": [[95.0, 200, 0]], "changes": [], "published": 41.0},  # found at 90: gap 50
    }, "counts": {}}
    assert sorted(new_article_lags(state)) == [(12.0, 40.0), (54.0, 50.0)]
    result = figures(state)
    assert (result["new_articles"], result["new_within_list_interval"]) == (2, 1)
    assert result["worst_new_lag_vs_interval"] == 1.08
