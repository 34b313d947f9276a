"""The dispatcher experiment of seed fig. 5-1, in simulated time against real Redis.

    python -m bench.dispatch_sim [--json] [--plot FILE.png] [--tasks N] [--step SECONDS]

Three simulated workers (``bench.sim_worker``) complete 360, 420 and 480 tasks per minute; 100,000 tasks wait in
``seeds``; at minute 30 the first worker speeds up to 420, at minute 50 to 480. The real dispatcher
(``master.dispatcher``, default settings: k = 10 minutes, headroom 1.2, backlog 2 minutes) runs a round every
``--step`` simulated seconds; every Redis call is real, only the clock is simulated (passed explicitly).

Printed: the tasks dispatched to each worker in every 10-minute window, and ``max_share_error``: over the windows
that start at least one full window after the last speed change (the start counts as one) and end before ``seeds``
ran dry, the largest difference between a worker's share of the dispatched tasks and its share of the total speed
(goal <= 0.03). ``--plot`` draws the cumulative tasks dispatched to each worker, like fig. 5-1. With ``--json`` the
last line is ``{"max_share_error": ..., "windows": [{"minute": ..., "dispatched": {worker: n}}, ...]}``.

Redis: set CRAWLFLEET_REDIS_URL to use a running server (its database must be empty); otherwise a private Redis is
started and stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

from bench.sim_worker import SimWorker
from master.dispatcher import DispatchConfig, Dispatcher
from messaging import keys
from messaging.clock import ManualClock
from messaging.tasks import Task, push_seeds

WINDOW = 10  # minutes
SPEEDS = {"slave1": 360.0, "slave2": 420.0, "slave3": 480.0}
CHANGES = {30: {"slave1": 420.0}, 50: {"slave1": 480.0}}  # minute -> new speeds
DOMAINS = 40


@contextlib.contextmanager
def redis_for_bench() -> Iterator[Any]:
    """A Redis client: CRAWLFLEET_REDIS_URL's server (empty database required) or a private server."""
    from messaging.clients import redis_client
    from messaging.settings import load

    if os.environ.get("CRAWLFLEET_REDIS_URL"):
        client = redis_client(load())
        if client.dbsize():
            raise SystemExit("the database of CRAWLFLEET_REDIS_URL is not empty; give an empty one")
        try:
            yield client
        finally:
            client.flushdb()
        return
    from deploy import services

    with tempfile.TemporaryDirectory(prefix="crawlfleet-bench-") as run_dir:
        state = services.up(run_dir, services.Options(only=("redis",), timeout=60))
        try:
            client = redis_client(load({"CRAWLFLEET_RUN_DIR": run_dir, "CRAWLFLEET_REDIS_URL": state["redis_url"]}))
            yield client
            client.close()
        finally:
            services.down(run_dir)


def make_tasks(count: int, crawlid: str = "fig5-1") -> list[Task]:
    return [Task(url=f"http://site{i % DOMAINS}.test/page/{i}", crawlid=crawlid, spider_type="list")
            for i in range(count)]


def simulate(redis: Any, tasks: int = 100_000, step: float = 5.0, config: DispatchConfig | None = None,
             ) -> dict[str, Any]:
    clock = ManualClock(1_700_000_000.0 - 1_700_000_000.0 % 60)  # start on a minute boundary
    start = clock.now()
    batch = make_tasks(tasks)
    for i in range(0, len(batch), 5000):
        push_seeds(redis, batch[i:i + 5000])
    epoch = int(redis.incr(keys.MASTER_EPOCH))
    dispatcher = Dispatcher(redis, epoch, config or DispatchConfig())
    workers = {job: SimWorker(redis, job, speed) for job, speed in SPEEDS.items()}
    for worker in workers.values():
        worker.register(clock.now())
    per_minute: list[dict[str, int]] = []
    dry_at: float | None = None
    minute = -1
    while True:
        elapsed = clock.now() - start
        current = int(elapsed // 60)
        if current != minute:
            minute = current
            per_minute.append(dict.fromkeys(workers, 0))
            for job, speed in CHANGES.get(minute, {}).items():
                workers[job].speed = speed
        placed = dispatcher.round(clock.now()).placed
        for job, n in placed.items():
            per_minute[minute][job] += n
        if dry_at is None and redis.zcard(keys.SEEDS) == 0:
            dry_at = elapsed
        clock.advance(step)
        for worker in workers.values():
            worker.step(clock.now(), step)
        if dry_at is not None and sum(w.completed for w in workers.values()) >= tasks:
            break
        if elapsed > 24 * 3600:
            raise RuntimeError("the simulation did not finish in a simulated day")
    return {"per_minute": per_minute, "dry_minute": (dry_at or 0) / 60, "weights": dispatcher.weights,
            "completed": {job: w.completed for job, w in workers.items()}}


def speeds_at(minute: int) -> dict[str, float]:
    speeds = dict(SPEEDS)
    for at in sorted(CHANGES):
        if at <= minute:
            speeds.update(CHANGES[at])
    return speeds


def evaluate(per_minute: list[dict[str, int]], dry_minute: float) -> dict[str, Any]:
    windows = []
    errors = []
    changes = [0, *sorted(CHANGES)]
    for first in range(0, len(per_minute), WINDOW):
        rows = per_minute[first:first + WINDOW]
        dispatched = {job: sum(row[job] for row in rows) for job in SPEEDS}
        windows.append({"minute": first, "dispatched": dispatched})
        last_change = max(c for c in changes if c <= first)
        total = sum(dispatched.values())
        if first < last_change + WINDOW or first + WINDOW > dry_minute or not total:
            continue
        speeds = speeds_at(first)
        speed_total = sum(speeds.values())
        error = max(abs(dispatched[job] / total - speeds[job] / speed_total) for job in SPEEDS)
        windows[-1]["share_error"] = round(error, 4)
        errors.append(error)
    return {"max_share_error": round(max(errors), 4) if errors else None, "windows": windows}


def plot(per_minute: list[dict[str, int]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5))
    for job in SPEEDS:
        total, series = 0, []
        for row in per_minute:
            total += row[job]
            series.append(total)
        axes.plot(range(1, len(series) + 1), series, label=job)
    for at in CHANGES:
        axes.axvline(at, color="grey", linestyle=":", linewidth=1)
    axes.set_xlabel("time (minutes)")
    axes.set_ylabel("tasks dispatched (cumulative)")
    axes.set_title("Dispatch by dynamic-feedback weighted round robin (seed fig. 5-1)")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print a JSON line last")
    parser.add_argument("--plot", metavar="FILE.png", help="draw the cumulative dispatch per worker")
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--step", type=float, default=5.0, help="simulated seconds per step")
    args = parser.parse_args(argv)
    with redis_for_bench() as redis:
        run = simulate(redis, args.tasks, args.step)
    report = evaluate(run["per_minute"], run["dry_minute"])
    print(f"{'minutes':>9} " + " ".join(f"{job:>8}" for job in SPEEDS) + "   share error")
    for window in report["windows"]:
        first = window["minute"]
        cells = " ".join(f"{window['dispatched'][job]:>8}" for job in SPEEDS)
        error = window.get("share_error")
        print(f"{first:>4}-{first + WINDOW:<4} {cells}   {error if error is not None else '(not judged)'}")
    shares = [w["dispatched"]["slave1"] / max(1, sum(w["dispatched"].values())) for w in report["windows"]]
    print("slave1 share per window: " + ", ".join(f"{s:.3f}" for s in shares))
    print(f"seeds ran dry at minute {run['dry_minute']:.1f}; completed {run['completed']}")
    print(f"max_share_error: {report['max_share_error']} (goal <= 0.03)")
    if args.plot:
        plot(run["per_minute"], args.plot)
        print(f"plot: {args.plot}")
    if args.json:
        print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
