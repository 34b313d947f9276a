"""The frontier without HTTP: simulated workers take and acknowledge as fast as Redis allows (issue 30).

    python -m bench.frontier [--domains 1000,100000] [--urls 1000000] [--workers 2] [--seconds 10] [--cluster]
                             [--empty N] [--old] [--json]

For each number of domains D: ``--urls`` queued URLs spread evenly over D domains and over ``--workers`` jobs are
loaded straight into the jobs' domain queues, ``<job>:domains`` and the ready indexes (the dispatcher's landing
helper, :func:`frontier.client.add_to_index`); then one process per job takes tasks through the real walk
(:class:`frontier.domain_walk.ReadyWalk`) and the real politeness step, batched as the worker's feed batches them
with an empty prefetch of 32: 16 due domains per two round trips, 2 steps each (``FrontierClient.take_domains``; the
old walk: up to 16 steps of one domain, ``FrontierClient.take_many``, after reading the queue's heads as with
robots.txt), and acknowledges them in batches of 64 (``FrontierClient.complete``), for ``--seconds`` or until its
queues are empty.
Every site's rate is 10^6 hits per 60 s, so pacing never binds: what is measured is the frontier's own cost.

Printed per D: takes/s (all workers), Redis memory per queued URL (``used_memory`` after loading minus before, over
the URLs; every node on a cluster), the p99 latency of one take (a call of the walk that returns a lease: the index
read when due domains ran out, plus one batch of steps), and Redis commands per take (INFO commandstats, calls
inside scripts included). The goal: takes/s at the largest D >= 0.8 x takes/s at the smallest. ``--old`` also runs
the round-robin walk over every domain (:class:`frontier.domain_walk.DomainWalk`, the walk before the ready index)
at the largest D, for comparison; ``--empty N`` lists N more domains per job whose queues are drained (most hosts
of a broad crawl, at any moment), which the old walk probes and the ready index never holds. ``--cluster`` runs on
the 3-node Redis Cluster of ``deploy.services``.

It starts its own Redis (``deploy.services``) under a temporary directory and stops it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from deploy import services
from frontier.client import FrontierClient, Lease, add_to_index
from frontier.config_watch import StaticSiteConfig
from frontier.domain_walk import DomainWalk, ReadyWalk
from frontier.politeness import Politeness
from messaging import keys
from messaging.clients import redis_client
from messaging.settings import load
from messaging.siteconfig import Rate
from messaging.tasks import Task, queue_score

RATE = Rate(1_000_000, 60)  # pacing never binds
TAKE_BATCH = 16  # steps per domain and batch, as spiders.worker.feed
PREFETCH = 32  # as spiders.worker.feed with an empty prefetch (CRAWLFLEET_PREFETCH): a batch takes at most this many
TAKE_GROUP = 16  # due domains per batch (FrontierClient.take_domains): the feed's min(16, room // 2)
ACK_BATCH = 64
LOAD_CHUNK = 20_000  # URLs per loading pipeline
SPIDER_TYPE = "sim"
GOAL = 0.8


def client(settings_env: dict[str, str]) -> Any:
    return redis_client(load(settings_env))


def nodes(redis: Any) -> list[Any]:
    """A client per primary (a plain Redis: itself)."""
    from messaging.scripts import is_cluster

    if not is_cluster(redis):
        return [redis]
    return [redis.get_redis_connection(node) for node in redis.get_primaries()]


def used_memory(redis: Any) -> int:
    return sum(int(node.info("memory")["used_memory"]) for node in nodes(redis))


def command_calls(redis: Any) -> int:
    return sum(int(stats["calls"]) for node in nodes(redis)
               for name, stats in node.info("commandstats").items() if name.startswith("cmdstat_"))


def flush(redis: Any) -> None:
    for node in nodes(redis):
        node.flushall()


def load_urls(redis: Any, jobs: list[str], domains: int, urls: int, empty: int = 0) -> None:
    """``urls`` tasks round robin over ``domains`` domains and over the jobs (URL n to job n % jobs: every job holds
    tasks of every domain, as the dispatcher spreads a busy domain's tasks); ``empty`` more domains per job are in
    ``<job>:domains`` with an empty queue (drained earlier, as most hosts of a broad crawl)."""
    for start in range(0, empty, LOAD_CHUNK):
        names = [f"drained{n}.test" for n in range(start, min(empty, start + LOAD_CHUNK))]
        for job in jobs:
            redis.sadd(keys.job_domains(job), *names)
    for start in range(0, urls, LOAD_CHUNK):
        per_queue: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
        for n in range(start, min(urls, start + LOAD_CHUNK)):
            domain = f"site{n % domains}.test"
            task = Task(url=f"http://{domain}/page/{n}", crawlid="sim", spider_type=SPIDER_TYPE)
            per_queue[(jobs[n % len(jobs)], domain)][task.encode()] = queue_score(100, n)
        pipe = redis.pipeline(transaction=False)
        for (job, domain), members in per_queue.items():
            pipe.zadd(keys.queue(job, domain), members)
            pipe.hincrby(keys.pending_domain(domain), "sim", len(members))
        for job in jobs:
            pipe.sadd(keys.job_domains(job), *{domain for (j, domain) in per_queue if j == job})
        pipe.execute()
        for job in jobs:  # after the queue writes, as the dispatcher's landing
            counts = {domain: len(members) for (j, domain), members in per_queue.items() if j == job}
            add_to_index(redis, job, SPIDER_TYPE, counts)


def drained(results: list[Any]) -> Any:
    """As spiders.worker.feed: the batch's last answer tells the ready index whether the queue is empty."""
    first, last = results[0], results[-1]
    if first.lease is not None:
        first.drained = last.drained or last.outcome == "empty"
    return first


def run_worker(env: dict[str, str], job: str, seconds: float, old: bool, out: Any) -> None:
    """One simulated worker: take (walk + batched steps) and acknowledge until the time is up or the queues are empty;
    sends {takes, elapsed, latencies} through ``out``."""
    redis = client(env)
    engine = FrontierClient(redis, job, SPIDER_TYPE, "10.0.0.1", Politeness(StaticSiteConfig(RATE)),
                            lease_seconds=600.0)
    extra: list[Lease] = []

    def take(domain: str) -> Any:
        # as a worker that obeys robots.txt (FrontierClient.take_many reads the queue's heads, then steps for those)
        heads = len(redis.zrange(keys.queue(job, domain), 0, TAKE_BATCH - 1))
        results = engine.take_many(domain, max(1, heads))
        extra.extend(r.lease for r in results[1:] if r.lease is not None)
        return drained(results)

    def take_group(domains: list[str]) -> list[Any]:
        firsts = []
        for results in engine.take_domains(domains, max(1, min(TAKE_BATCH, PREFETCH // len(domains)))):
            extra.extend(r.lease for r in results[1:] if r.lease is not None)
            firsts.append(drained(results))
        return firsts

    if old:
        walk: Any = DomainWalk(take, engine.domains, max_empty_backoff=1.0)
    else:
        walk = ReadyWalk(take, engine.ready, idle_poll=0.2, take_group=take_group,
                         group=TAKE_GROUP)
    latencies: list[float] = []
    leases: list[Lease] = []
    takes = 0
    started = time.perf_counter()
    deadline = started + seconds
    while time.perf_counter() < deadline:
        if extra:
            lease = extra.pop()
        else:
            asked = time.perf_counter()
            result = walk.poll()
            if result is None:
                if walk.wake_in > 0:  # nothing due: with rates this high, the queues are empty
                    break
                continue
            latencies.append(time.perf_counter() - asked)
            lease = result.lease
        takes += 1
        leases.append(lease)
        if len(leases) >= ACK_BATCH:
            engine.complete(leases)
            leases = []
    elapsed = time.perf_counter() - started
    if leases:
        engine.complete(leases)
    out.send({"takes": takes, "elapsed": elapsed, "latencies": latencies})
    out.close()


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else float("nan")


def measure(redis: Any, env: dict[str, str], domains: int, urls: int, workers: int, seconds: float,
            old: bool = False, empty: int = 0) -> dict[str, Any]:
    flush(redis)
    jobs = [f"sim{n}" for n in range(workers)]
    before = used_memory(redis)
    loaded_at = time.perf_counter()
    load_urls(redis, jobs, domains, urls, empty)
    load_seconds = time.perf_counter() - loaded_at
    memory = used_memory(redis) - before
    calls_before = command_calls(redis)
    context = multiprocessing.get_context("spawn")
    pipes, processes = [], []
    for job in jobs:
        receive, send = context.Pipe(duplex=False)
        process = context.Process(target=run_worker, args=(env, job, seconds, old, send))
        process.start()
        pipes.append(receive)
        processes.append(process)
    results = [pipe.recv() for pipe in pipes]
    for process in processes:
        process.join(30)
    calls = command_calls(redis) - calls_before - len(nodes(redis))  # minus the INFO calls
    takes = sum(r["takes"] for r in results)
    elapsed = max(r["elapsed"] for r in results)
    latencies = [value for r in results for value in r["latencies"]]
    return {"domains": domains, "empty_domains": empty, "urls": urls,
            "walk": "round-robin (old)" if old else "ready index",
            "takes": takes, "takes_per_s": round(takes / elapsed, 1),
            "memory_per_url_bytes": round(memory / urls, 1), "p99_take_ms": round(p99(latencies) * 1000, 2),
            "commands_per_take": round(calls / takes, 2) if takes else None, "load_s": round(load_seconds, 1)}


def print_row(row: dict[str, Any]) -> None:
    print(f"{row['walk']:>18}  domains {row['domains']:>7} (+{row['empty_domains']} empty)  "
          f"takes/s {row['takes_per_s']:>8}  "
          f"memory/URL {row['memory_per_url_bytes']:>6} B  p99 take {row['p99_take_ms']:>7} ms  "
          f"commands/take {row['commands_per_take']}  ({row['takes']} takes)", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domains", default="1000,100000", help="numbers of domains, comma-separated")
    parser.add_argument("--urls", type=int, default=1_000_000, help="queued URLs (each run)")
    parser.add_argument("--workers", type=int, default=2, help="simulated workers (one job and process each)")
    parser.add_argument("--seconds", type=float, default=10.0, help="longest time of each run")
    parser.add_argument("--empty", type=int, default=0, help="more domains per job, listed but drained")
    parser.add_argument("--cluster", action="store_true", help="on the 3-node Redis Cluster")
    parser.add_argument("--old", action="store_true", help="also run the round-robin walk at the largest D")
    parser.add_argument("--json", action="store_true", help="print one JSON line at the end")
    args = parser.parse_args(argv)
    counts = [int(value) for value in args.domains.split(",")]
    if not counts or min(counts) <= 0 or args.urls <= 0 or args.workers <= 0 or args.empty < 0:
        parser.error("--domains, --urls and --workers must be positive, --empty not negative")
    rows = []
    with tempfile.TemporaryDirectory(prefix="crawlfleet-bench-frontier-") as tmp:
        run_dir = Path(tmp) / "services"
        state = services.up(run_dir, services.Options(only=("redis",), redis_cluster=args.cluster, timeout=90))
        try:
            env = {"CRAWLFLEET_RUN_DIR": str(run_dir), "CRAWLFLEET_REDIS_URL": state["redis_url"],
                   "CRAWLFLEET_REDIS_CLUSTER": "1" if args.cluster else "0"}
            redis = client(env)
            for domains in counts:
                rows.append(measure(redis, env, domains, args.urls, args.workers, args.seconds,
                                    empty=args.empty))
                print_row(rows[-1])
            if args.old:
                rows.append(measure(redis, env, max(counts), args.urls, args.workers, args.seconds, old=True,
                                    empty=args.empty))
                print_row(rows[-1])
            flush(redis)
            redis.close()
        finally:
            services.down(run_dir)
    ready = [row for row in rows if row["walk"] == "ready index"]
    smallest = min(ready, key=lambda row: row["domains"])
    largest = max(ready, key=lambda row: row["domains"])
    ratio = round(largest["takes_per_s"] / smallest["takes_per_s"], 3) if smallest["takes_per_s"] else 0.0
    ok = ratio >= GOAL
    print(f"takes/s at {largest['domains']} domains / at {smallest['domains']}: {ratio} (goal >= {GOAL}) "
          f"{'ok' if ok else 'MISSED'}", flush=True)
    if args.json:
        print(json.dumps({"cluster": args.cluster, "workers": args.workers, "runs": rows, "ratio": ratio,
                          "goal": GOAL, "ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
