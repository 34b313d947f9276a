"""Weights: completions per busy minute over a sliding window (seed formula 4-2)."""

from __future__ import annotations

import pytest

from frontier.weights import busy_rate, fill_missing, minute_of, partial_rate, window_minutes

pytestmark = pytest.mark.unit

T0 = 1_700_000_040.0  # a minute boundary


def test_formula_4_2_when_every_minute_was_busy() -> None:
    assert busy_rate([360] * 10, [True] * 10) == 360


def test_idle_minutes_do_not_count_against_a_worker() -> None:
    # starved for 6 of 10 minutes, it still shows its speed of 420 a minute
    done = [420, 0, 0, 420, 0, 0, 0, 420, 420, 0]
    busy = [n > 0 for n in done]
    assert busy_rate(done, busy) == 420
    # a busy minute without completions (stalled) does count
    assert busy_rate([300, 0], [True, True]) == 150


def test_no_busy_minute_is_no_history() -> None:
    assert busy_rate([0, 0, 0], [False, False, False]) is None
    assert busy_rate([], []) is None


def test_new_workers_start_at_the_mean() -> None:
    assert fill_missing({"a": 360.0, "b": 480.0, "new": None}, initial=60.0) == {"a": 360.0, "b": 480.0,
                                                                                 "new": 420.0}
    assert fill_missing({"x": None, "y": None}, initial=60.0) == {"x": 60.0, "y": 60.0}


def test_window_holds_whole_minutes_before_now_and_after_the_start() -> None:
    now = T0 + 10 * 60 + 30  # half-way through a minute
    current = minute_of(now)
    assert window_minutes(now, 10) == list(range(current - 10, current))
    # a worker that started 3.5 minutes ago: its join minute is partial, so only 3 minutes count
    assert window_minutes(now, 10, started=now - 210) == list(range(current - 3, current))
    assert window_minutes(now, 10, started=now - 10) == []


def test_a_worker_without_a_whole_busy_minute_is_measured_by_its_partial_minutes() -> None:
    # it joined 40 s ago and completed 600 tasks: 900 a minute, not "new" (which would start it at the mean)
    assert partial_rate(600, T0, T0 + 40) == pytest.approx(900.0)
    assert partial_rate(0, T0, T0 + 40) is None
    assert partial_rate(10, T0, T0) is None
