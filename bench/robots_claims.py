"""robots.txt claims under contention: is each host's robots.txt fetched once by the whole cluster?

    python -m bench.robots_claims [--hosts H] [--workers N] [--json]

N worker threads (each with its own Redis connection and claim token, as N worker processes have) walk the same H
hosts in their own random orders and ask :class:`frontier.robots_cache.RobotsCache` for each host's rules until
every host is known; a host's fetch is simulated (no HTTP: the protocol is what is measured) and counted. Sides,
interleaved in one run:

- ``claim``: the cache as the workers run it: one atomic check-and-claim call (``lua/robots_claim.lua``), fetches of
  0-30 ms;
- ``check_then_claim``: the protocol before it (GET the rules, then ``SET NX`` the lock; store = SET + DEL), the
  same fetches, with ``--gap-ms`` between the two calls (a worker's feed thread waits for the GIL while the
  reactor runs: in a worker the gap is real, here it is modelled): a process that missed the rules just before
  another stored them claims and fetches again;
- ``slow_renewed`` / ``slow_unrenewed``: fetches that take 3x the claim's TTL (a robots.txt that barely answers),
  with and without a thread renewing the claims every third of the TTL as the workers' fetcher does.

It prints the fetches per host (mean, most) and the hosts fetched more than once, per side. Goal: 1.0 and 0 for
``claim`` and ``slow_renewed``. It starts its own Redis with ``deploy.services`` (or uses CRAWLFLEET_REDIS_URL).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from deploy import services
from frontier.robots_cache import RobotsCache
from frontier.robots_rules import authority
from messaging import clients, keys
from messaging.domains import domain_of

LOCK_SECONDS = 0.3


class CheckThenClaim(RobotsCache):
    """The protocol before the atomic claim: read the rules, then claim the lock in a second call."""

    gap = 0.001

    def state(self, url: str) -> Any:
        robots = self.cached(url)
        if robots is not None:
            return robots
        time.sleep(self.gap)  # the feed thread descheduled between its two calls (the GIL, the reactor's turn)
        lock = keys.robots_lock(domain_of(url), authority(url))
        if self.redis.set(lock, self.token, nx=True, px=int(self.lock_seconds * 1000)):
            self.claims.add(url)
            return "claimed"
        return "pending"

    def store(self, url: str, body: str, ttl: float | None = None) -> Any:
        domain, host = domain_of(url), authority(url)
        pipe = self.redis.pipeline(transaction=False)
        pipe.set(keys.robots(domain, host), body, px=int((ttl or self.ttl) * 1000))
        pipe.delete(keys.robots_lock(domain, host))
        pipe.execute()
        self.claims.discard(url)
        return self._remember(domain, host, body)


def run_side(side: str, hosts: int, workers: int, settings: Any, seed: int) -> dict[str, Any]:
    fetches: Counter[str] = Counter()
    lock = threading.Lock()
    slow = side.startswith("slow")
    prefix = f"{side}-{seed}"
    urls = [f"http://h{n}.{prefix}.robots.bench.test/page" for n in range(hosts)]

    def fetch(robots_url: str) -> str:
        with lock:
            fetches[robots_url] += 1
        time.sleep(LOCK_SECONDS * 3 if slow else random.uniform(0.0, 0.03))
        return "User-agent: *\nDisallow: /private/\n"

    def worker(n: int) -> None:
        cls = CheckThenClaim if side == "check_then_claim" else RobotsCache
        cache = cls(clients.redis_client(settings), fetch, lock_seconds=LOCK_SECONDS, local_seconds=60.0,
                    fetch_seconds=60.0)
        stop = threading.Event()
        if side in ("slow_renewed", "claim", "check_then_claim"):
            def renew() -> None:
                while not stop.wait(LOCK_SECONDS / 3):
                    cache.renew_claims()
            threading.Thread(target=renew, daemon=True).start()
        order = urls[:]
        random.Random(seed * 1000 + n).shuffle(order)
        left = order
        while left:
            left = [url for url in left if cache.lookup(url) is None]
            if left:
                time.sleep(0.005)
        stop.set()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    counts = [fetches[url.rsplit("/", 1)[0] + "/robots.txt"] for url in urls]
    return {"hosts": hosts, "fetches": sum(counts), "per_host": round(sum(counts) / hosts, 4),
            "most": max(counts), "twice": sum(1 for c in counts if c > 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=1000, help="hosts every worker needs (H)")
    parser.add_argument("--slow-hosts", type=int, default=20, help="hosts of the slow sides")
    parser.add_argument("--workers", type=int, default=4, help="worker threads (N)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the sides, interleaved")
    parser.add_argument("--gap-ms", type=float, default=1.0, help="check_then_claim: time between its two calls")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of the figures")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-robots-") as tmp:
        run_dir = Path(tmp)
        own = "CRAWLFLEET_REDIS_URL" not in os.environ
        if own:
            os.environ["CRAWLFLEET_RUN_DIR"] = str(run_dir)
            services.up(run_dir, services.Options(only=("redis",)))
        try:
            from messaging.settings import load

            settings = load()
            CheckThenClaim.gap = args.gap_ms / 1000
            results: dict[str, list[dict[str, Any]]] = {}
            for round_no in range(args.rounds):
                for side in ("claim", "check_then_claim", "slow_renewed", "slow_unrenewed"):
                    hosts = args.slow_hosts if side.startswith("slow") else args.hosts
                    results.setdefault(side, []).append(run_side(side, hosts, args.workers, settings, round_no))
        finally:
            if own:
                services.down(run_dir)
    figures: dict[str, Any] = {"workers": args.workers, "hosts": args.hosts, "slow_hosts": args.slow_hosts,
                               "gap_ms": args.gap_ms}
    for side, runs in results.items():
        hosts = sum(r["hosts"] for r in runs)
        figures[side] = {"per_host": round(sum(r["fetches"] for r in runs) / hosts, 4),
                         "most": max(r["most"] for r in runs),
                         "twice_pct": round(100 * sum(r["twice"] for r in runs) / hosts, 2)}
        print(f"{side:18} fetches per host {figures[side]['per_host']:.4f}, most {figures[side]['most']}, "
              f"hosts fetched twice or more {figures[side]['twice_pct']:.2f} %")
    if args.json:
        print(json.dumps(figures))
    ok = figures["claim"]["most"] == 1 and figures["slow_renewed"]["most"] == 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
