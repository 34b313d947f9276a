"""Dispatch throughput: tasks moved from ``seeds`` into worker queues per second, against real Redis.

    python -m bench.dispatch [--json] [--tasks N] [--workers N] [--domains N] [--batch N]

``--tasks`` tasks (default 200,000, over ``--domains`` domains) wait in ``seeds``; ``--workers`` workers of one spider
type are registered with a measured history fast enough that no cap binds; the dispatcher's rounds (stage, land,
settle per batch — the crash-safe path, with the weighted round robin, the budgets and the per-crawl counts) run
until ``seeds`` is empty, each task checked against its site's share of the queues (a rate that never binds).
Printed: tasks per second (goal >= 10,000). With ``--json`` the last line is ``{"dispatch_per_s": ...}``. Redis: as
in ``bench.dispatch_sim`` (CRAWLFLEET_REDIS_URL with an empty database, or a private server).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from bench.dispatch_sim import redis_for_bench
from frontier.config_watch import StaticSiteConfig
from frontier.registry import WorkerInfo, WorkerRegistry, record_completion
from master.dispatcher import DispatchConfig, Dispatcher
from messaging import keys
from messaging.siteconfig import Rate
from messaging.tasks import Task, push_seeds

NOW = 1_700_000_000.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print a JSON line last")
    parser.add_argument("--tasks", type=int, default=200_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--domains", type=int, default=200)
    parser.add_argument("--batch", type=int, default=1000)
    args = parser.parse_args(argv)
    with redis_for_bench() as redis:
        tasks = [Task(url=f"http://site{i % args.domains}.test/item/{i}", crawlid=f"c{i % 3}", spider_type="list")
                 for i in range(args.tasks)]
        for i in range(0, len(tasks), 10_000):
            push_seeds(redis, tasks[i:i + 10_000])
        registry = WorkerRegistry(redis)
        for w in range(args.workers):
            job = f"bench-{w}"
            registry.register(WorkerInfo(job, "list", "127.0.0.1", "bench", w), now=NOW - 3600)
            for minute in range(1, 11):  # a history of ~args.tasks completions per minute: no cap binds
                record_completion(redis, job, args.tasks * (w + 1), NOW - minute * 60)
        # site shares checked for every task, as the master does, at a rate that never binds (master.shares)
        dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), DispatchConfig(batch=args.batch),
                                sites=StaticSiteConfig(Rate(10**9, 60)))
        started = time.perf_counter()
        moved = rounds = 0
        while redis.zcard(keys.SEEDS):
            moved += dispatcher.round(NOW).total
            rounds += 1
        elapsed = time.perf_counter() - started
        queued = sum(redis.zcard(keys.queue(f"bench-{w}", f"site{d}.test"))
                     for w in range(args.workers) for d in range(args.domains))
    rate = moved / elapsed
    print(f"{moved} tasks dispatched in {elapsed:.2f}s over {rounds} rounds ({queued} in worker queues): "
          f"{rate:,.0f} dispatches/s (goal >= 10,000)")
    if args.json:
        print(json.dumps({"dispatch_per_s": round(rate, 1)}))
    return 0 if moved == args.tasks == queued else 1


if __name__ == "__main__":
    sys.exit(main())
