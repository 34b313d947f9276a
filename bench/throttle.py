"""Cluster-wide throttles under load: do four worker processes keep both windows of one domain, and fill them?

    python -m bench.throttle [--limit R] [--window W] [--windows N] [--cluster] [--json]

Four :mod:`bench.politeness_worker` processes — 2 host IP identities x 2 spider types — pull from their own queues
of one domain, whose site config in ZooKeeper allows R hits per W seconds (applied, as always, to each of the
domain's throttle windows: ``<spider_type>:{d}:throttle`` and ``<ip>:{d}:throttle``). The workers start together at
a Redis time and work for N windows. Every hit is logged with the Redis time of its step, so the windows are checked
from the outside:

- ``max_hits_in_any_window``: per throttle key, the most hits whose times lie within W of each other (an exact
  sliding window: for each hit, the hits in [t, t + W)); must be <= R. ``violations`` counts the hits that found
  R or more earlier hits of the same key within W.
- ``utilization`` = hits during the run / hits allowed during the run. *Allowed* is the capacity of the layout:
  every hit counts in one type window and one IP window, so 2 types x 2 IPs can take at most
  min(types, IPs) x R hits per W (and any greedy schedule that leaves no worker able to take reaches it); over the
  run of N windows, allowed = min(types, IPs) x R x N. Hits of the first window can all happen at its start, so
  the run is whole windows and nothing is pro-rated.

It starts its own Redis (``--cluster``: a 3-master Redis Cluster) and ZooKeeper with ``deploy.services`` and stops
them at the end; with CRAWLFLEET_REDIS_URL set it uses that run instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from deploy import services
from deploy.procs import spawn, stop_pid, wait_for
from messaging import clients, keys, spider_types
from messaging.clock import RedisClock
from messaging.settings import load
from messaging.siteconfig import SiteConfig, SitePaths, update_site
from messaging.tasks import Task, queue_score

DOMAIN = "throttle.bench.test"
IPS = ("10.0.0.1", "10.0.0.2")
SPIDER_TYPES = spider_types.NAMES
REPO = Path(__file__).resolve().parents[1]


def max_in_window(times: list[float], window: float) -> int:
    """The most hits whose times lie within ``window`` of each other (for each hit, the hits in [t, t + window))."""
    times = sorted(times)
    best, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= window:
            start += 1
        best = max(best, end - start + 1)
    return best


def violations(times: list[float], window: float, limit: int) -> int:
    """Hits that found ``limit`` or more earlier hits within ``window`` (each one broke the limit)."""
    times = sorted(times)
    count, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= window:
            start += 1
        if end - start >= limit:  # limit or more earlier hits within the window
            count += 1
    return count


def seed_queues(redis: object, tasks_per_queue: int) -> list[tuple[str, str, str]]:
    jobs = []
    for ip in IPS:
        for spider_type in SPIDER_TYPES:
            job = f"bench-{spider_type}-{ip.rsplit('.', 1)[1]}"
            members = {Task(url=f"http://{DOMAIN}/{job}/{n}", crawlid="bench", spider_type=spider_type).encode():
                       queue_score(100, n % 1024) for n in range(tasks_per_queue)}
            redis.zadd(keys.queue(job, DOMAIN), members)  # type: ignore[attr-defined]
            redis.sadd(keys.job_domains(job), DOMAIN)  # type: ignore[attr-defined]
            jobs.append((job, spider_type, ip))
    return jobs


def run(env: dict[str, str], limit: int, window: float, windows: int, log_dir: Path) -> dict[str, object]:
    settings = load(env)
    redis = clients.redis_client(settings)
    zk = clients.zk_client(settings)
    procs = []
    try:
        update_site(zk, SitePaths(settings.zk_root), DOMAIN,
                    lambda _: SiteConfig(rate=limit, window=window, blacklisted=False))
        jobs = seed_queues(redis, limit * windows * 2 + 10)
        env = {**env, "CRAWLFLEET_ROBOTSTXT_OBEY": "0"}  # nothing to fetch robots.txt from: measure throttles only
        start_at = RedisClock(redis).now() + 5.0  # time for four interpreters to start and read ZooKeeper
        end_at = start_at + window * windows
        for job, spider_type, ip in jobs:
            argv = [sys.executable, "-m", "bench.politeness_worker", "--job", job, "--spider-type", spider_type,
                    "--ip", ip, "--start-at", repr(start_at), "--end-at", repr(end_at)]
            procs.append((spawn(argv, log_dir / f"{job}.log", env=env, cwd=REPO), log_dir / f"{job}.log"))
        for proc, _ in procs:
            wait_for(lambda proc=proc: proc.poll() is not None, window * windows + 60, f"worker {proc.pid} to end")
        hits = []
        for _, log in procs:
            for line in log.read_text().splitlines():
                if line.startswith("{"):
                    hits.append(json.loads(line))
    finally:
        for proc, _ in procs:
            stop_pid(proc.pid)
        zk.stop()
        zk.close()
        redis.close()

    by_key: dict[str, list[float]] = defaultdict(list)
    for hit in hits:
        by_key[keys.throttle_type(hit["spider_type"], DOMAIN)].append(hit["hit"])
        by_key[keys.throttle_ip(hit["ip"], DOMAIN)].append(hit["hit"])
    maxima = {key: max_in_window(times, window) for key, times in sorted(by_key.items())}
    broken = sum(violations(times, window, limit) for times in by_key.values())
    in_run = sum(1 for hit in hits if start_at <= hit["hit"] < end_at)
    allowed = min(len(IPS), len(SPIDER_TYPES)) * limit * windows
    return {"limit": limit, "window_s": window, "windows": windows, "hits": in_run, "allowed": allowed,
            "max_hits_in_any_window": maxima, "violations": broken, "utilization": round(in_run / allowed, 4)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=10, help="hits allowed per window (R)")
    parser.add_argument("--window", type=float, default=2.0, help="window in seconds (W)")
    parser.add_argument("--windows", type=int, default=4, help="run length in windows (>= 3)")
    parser.add_argument("--cluster", action="store_true", help="use a 3-master Redis Cluster")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of the figures")
    args = parser.parse_args(argv)
    if args.windows < 3:
        parser.error("--windows must be at least 3")

    with tempfile.TemporaryDirectory(prefix="bench-throttle-") as tmp:
        run_dir = Path(tmp)
        own_services = "CRAWLFLEET_REDIS_URL" not in os.environ
        env = {name: value for name, value in os.environ.items()}
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        if own_services:
            env["CRAWLFLEET_RUN_DIR"] = str(run_dir)
            services.up(run_dir, services.Options(redis_cluster=args.cluster, only=("redis", "zookeeper")))
        try:
            figures = run(env, args.limit, args.window, args.windows, run_dir)
        finally:
            if own_services:
                services.down(run_dir)

    print(f"{len(IPS)} IPs x {len(SPIDER_TYPES)} spider types, {figures['limit']} hits per {figures['window_s']}s "
          f"for {figures['windows']} windows{' on a Redis Cluster' if args.cluster else ''}")
    for key, most in figures["max_hits_in_any_window"].items():  # type: ignore[union-attr]
        print(f"  {key:40} max hits in any {figures['window_s']}s window: {most}")
    print(f"violations: {figures['violations']}")
    print(f"utilization: {figures['utilization']:.3f} ({figures['hits']} hits of {figures['allowed']} allowed)")
    if args.json:
        print(json.dumps(figures))
    return 0 if figures["violations"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
