"""Worker weights: completions per busy minute over a sliding window (seed 4.2.1.2, formula 4-2).

The seed's weight is ``w = (n_1 + … + n_k) / k``: tasks completed in the last ``k`` minutes (k = 10 by default,
CRAWLFLEET_WEIGHT_WINDOW_MINUTES) per minute. Here the sum is divided by the number of *busy* minutes among those
``k`` (minutes in which the worker had work queued or leased, ``frontier.registry``) instead of ``k``: a worker that
ran out of work in some minutes — because it was given little, or the crawl ran dry — is not judged slower for it,
so a worker capped by what it was given still shows that it got faster as soon as it has a backlog again.

Only whole minutes count: the current minute (partial) and the minute of the worker's registration (partial) are
left out. A worker without a busy whole minute yet but with completions in those partial minutes is measured by
them: its completions since it started per minute since it started (:func:`partial_rate`) — otherwise a worker that
finished all it was given within its first minute would look new for ever, and the dispatch window, which counts
what it was given, would hold it back. A measured worker's rate is at least what it completed in the current
minute (it certainly reached that), so a worker that got faster after a slow period is given more within the
round, not at the next minute. A worker with neither has no history; it starts at the mean weight of the
workers of its spider type that have one, or at CRAWLFLEET_DISPATCH_INITIAL_RATE when none has.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from frontier.registry import WorkerRegistry


def minute_of(now: float) -> int:
    """The Redis-clock minute (minutes since the epoch) that ``now`` falls in."""
    return int(now // 60)


def window_minutes(now: float, k: int, started: float = 0.0) -> list[int]:
    """The whole minutes of the window ending before ``now``'s minute, after the start minute."""
    current = minute_of(now)
    first = max(current - k, first_whole_minute(started) if started else current - k)
    return list(range(first, current))


def first_whole_minute(started: float) -> int:
    """The first minute that a worker which started at ``started`` was present for in full."""
    return math.ceil(started / 60)


def busy_rate(done: Sequence[int], busy: Sequence[bool]) -> float | None:
    """Completions per busy minute (formula 4-2 over busy minutes); ``None`` without a busy minute."""
    counted = [n for n, was_busy in zip(done, busy, strict=True) if was_busy or n > 0]
    if not counted:
        return None
    return sum(counted) / len(counted)


def partial_rate(done: int, started: float, now: float) -> float | None:
    """Completions per minute since the worker started (for a worker without a whole busy minute yet)."""
    if done <= 0 or not started or now <= started:
        return None
    return done / max((now - started) / 60.0, 1.0 / 60.0)


def fill_missing(rates: Mapping[str, float | None], initial: float) -> dict[str, float]:
    """Workers without history get the mean of those with history (``initial`` when none has)."""
    known = [rate for rate in rates.values() if rate is not None]
    default = sum(known) / len(known) if known else initial
    return {job: (rate if rate is not None else default) for job, rate in rates.items()}


@dataclass(frozen=True)
class Measured:
    rate: float | None  # completions per busy minute; None: no history yet
    outstanding: int  # tasks handed to the job and not completed (the dispatcher's backlog bound)


def measure(registry: WorkerRegistry, started: Mapping[str, float], now: float, k: int) -> dict[str, Measured]:
    """Each job's rate over its window and its outstanding tasks, in one pipelined read."""
    minutes = window_minutes(now, k)
    partial = {f"d{minute_of(now)}"} | {f"d{minute_of(at)}" for at in started.values() if at}
    fields = [f"d{m}" for m in minutes] + [f"b{m}" for m in minutes] + ["out"]
    fields += sorted(partial - set(fields))
    column = {name: i for i, name in enumerate(fields)}
    values = registry.activity(started, fields)
    result: dict[str, Measured] = {}
    for job, row in values.items():
        first = first_whole_minute(started[job]) if started[job] else minutes[0] if minutes else 0
        keep = [m for m in minutes if m >= first]
        done = [row[column[f"d{m}"]] for m in keep]
        busy = [bool(row[column[f"b{m}"]]) for m in keep]
        rate = busy_rate(done, busy)
        if rate is None and started[job]:  # the partial minutes (joining, current) are all that is known
            joined = {f"d{minute_of(started[job])}", f"d{minute_of(now)}"}
            rate = partial_rate(sum(done) + sum(row[column[name]] for name in joined), started[job], now)
        elif rate is not None:
            # what it completed so far this minute is a rate it has certainly reached: a worker that got faster after
            # a slow period (a slow site, a fault) would otherwise be held to its slow average, and dispatch to it
            # would pause until the next minute of the Redis clock (18-50 s in a fault probe)
            rate = max(rate, float(row[column[f"d{minute_of(now)}"]]))
        result[job] = Measured(rate, row[column["out"]])
    return result
