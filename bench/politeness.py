"""Politeness as a site sees it: paced hits and the adaptive delay, measured from the site's access log.

    python -m bench.politeness [--before S] [--slow S] [--after S] [--latency L] [--json]

Two ``crawlfleet worker`` processes (one spider type, one host IP: they share both throttle keys) and a master crawl
three sites of :mod:`bench.politeness_site` at once, each a crawl of its own that never runs dry:

- ``paced60.bench.test`` at 60 hits per 60 s (one a second) and ``paced240.bench.test`` at 240 per 60 s;
- ``adaptive.bench.test`` at 120 per 60 s with ``adaptive`` set, which answers ``--latency`` seconds late from
  ``--before`` seconds into the crawl for ``--slow`` seconds, then fast again for ``--after`` seconds.

Everything is measured from the site's access log (request arrival times): per paced site the hits in the busiest
1-s and 10-s windows and the 5th percentile and median of the gaps between hits (as a fraction of W/N); for the
adaptive site its spacing (median gap) before, during and after the slowdown, how long after the slowdown the gaps
at least doubled and how long after the recovery they came back within 25 % of the configured spacing. Goals
(issue 23): busiest second <= 2 at 60/60 s; p5 gap >= 0.8 x W/N; the adaptive spacing doubles within 30 s and
returns within 2 minutes. Exit status 1 when a goal is missed.

It starts its own Redis, ZooKeeper and MongoDB (``deploy.services``) under a temporary directory and stops every
process it started by PID.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path
from statistics import median
from typing import Any

from bench.politeness_site import PacedSite
from bench.throttle import max_in_window
from deploy import services
from deploy.procs import spawn, stop_pid, wait_for
from messaging import clients, keys
from messaging.settings import load
from messaging.siteconfig import Rate, SiteConfig, SitePaths, update_site, write_defaults
from messaging.tasks import CrawlFields, CrawlState, Task, push_seeds

REPO = Path(__file__).resolve().parents[1]
PACED = {"paced60.bench.test": Rate(60, 60), "paced240.bench.test": Rate(240, 60)}
ADAPTIVE = "adaptive.bench.test"
ADAPTIVE_RATE = Rate(120, 60, adaptive=True)
RULE = {"rules": [{"allow": r"/p/[0-9]+\.html$", "follow": True, "extract": {"title": "//h1"}}],
        "required": ["title"]}
START_TIMEOUT = 90.0


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in pairwise(times)]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


def paced_figures(times: list[float], rate: Rate) -> dict[str, Any]:
    between = gaps(times)
    return {"rate": f"{rate.hits}/{rate.window:g}s", "spacing_s": rate.spacing, "hits": len(times),
            "busiest_1s": max_in_window(times, 1.0), "busiest_10s": max_in_window(times, 10.0),
            "allowed_10s": int(10 / rate.spacing) + 1,
            "p5_gap_s": round(percentile(between, 0.05), 4), "median_gap_s": round(percentile(between, 0.5), 4),
            "p5_gap_ratio": round(percentile(between, 0.05) / rate.spacing, 3)}


def adaptive_figures(times: list[float], slow_at: float, recover_at: float, end: float) -> dict[str, Any]:
    def spacing(start: float, stop: float) -> float:
        inside = [t for t in times if start <= t < stop]
        return round(median(gaps(inside)), 3) if len(inside) > 2 else float("nan")

    before = spacing(slow_at - 15, slow_at)
    doubled = next((a - slow_at for a, b in pairwise(times)
                    if a >= slow_at and b - a >= 2 * before), None)
    recovered = next((a - recover_at for a, b in pairwise(times)
                      if a >= recover_at and b - a <= 1.25 * ADAPTIVE_RATE.spacing), None)
    return {"configured_spacing_s": ADAPTIVE_RATE.spacing, "spacing_before_s": before,
            "spacing_slow_s": spacing(slow_at + 5, recover_at), "spacing_after_s": spacing(recover_at + 10, end),
            "doubled_after_s": None if doubled is None else round(doubled, 2),
            "recovered_after_s": None if recovered is None else round(recovered, 2), "hits": len(times)}


def child_env(state: dict[str, Any], run_dir: Path, hosts_file: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("CRAWLFLEET_")}
    env.update(PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""), SCRAPY_SETTINGS_MODULE="spiders.settings",
               CRAWLFLEET_RUN_DIR=str(run_dir), CRAWLFLEET_REDIS_URL=state["redis_url"],
               CRAWLFLEET_ZK_HOSTS=state["zk_hosts"], CRAWLFLEET_MONGO_URI=state["mongo_uri"],
               CRAWLFLEET_MONGO_DB="politenessbench", CRAWLFLEET_HOSTS_FILE=str(hosts_file),
               CRAWLFLEET_KAFKA_BOOTSTRAP=state.get("kafka_bootstrap", "127.0.0.1:9"))
    return env


def start_crawls(redis: Any, site: PacedSite) -> None:
    for host in site.hosts:
        crawlid = host.split(".")[0]
        redis.hset(keys.crawl(crawlid), mapping={
            CrawlFields.STATE: CrawlState.RUNNING, CrawlFields.SPIDER_TYPE: "universal", CrawlFields.USERID: "bench",
            CrawlFields.URL: site.url(host), CrawlFields.CREATED: int(time.time()), CrawlFields.RULE: json.dumps(RULE),
            CrawlFields.ENQUEUED: 1})
        redis.sadd(keys.CRAWLS, crawlid)
        push_seeds(redis, [Task(url=site.url(host), crawlid=crawlid, spider_type="universal")])


def run(args: argparse.Namespace, tmp: Path, echo: Any) -> dict[str, Any]:
    site = PacedSite([*PACED, ADAPTIVE], tmp / "access.log").start()
    procs: list[Any] = []
    try:
        state = services.up(tmp / "services", services.Options(only=("redis", "zookeeper", "mongo")))
        env = child_env(state, tmp / "services", site.hosts_file(tmp / "hosts"))
        settings = load(env)
        zk = clients.zk_client(settings)
        try:
            paths = SitePaths(settings.zk_root)
            write_defaults(zk, paths, Rate(6000, 60))
            for host, rate in [*PACED.items(), (ADAPTIVE, ADAPTIVE_RATE)]:
                update_site(zk, paths, host, lambda _, r=rate: SiteConfig(rate=r.hits, window=r.window,
                                                                           adaptive=r.adaptive or None))
        finally:
            zk.stop()
            zk.close()
        ready = {}
        for name, argv in [("master", ["master", "--id", "bench-master"]),
                           *((f"w{n}", ["worker", "--spider", "universal", "--job", f"bench-{os.getpid()}-w{n}"])
                             for n in range(2))]:
            log = tmp / f"{name}.log"
            procs.append(spawn([sys.executable, "-m", "deploy.cli", *argv], log, env=env, cwd=REPO))
            ready[log] = "leading the dispatch" if name == "master" else "ready (spider type"
        for (log, text), proc in zip(ready.items(), procs, strict=True):
            wait_for(lambda log=log, text=text: text in log.read_text(errors="replace"), START_TIMEOUT,
                     f"{text!r} in {log}", interval=0.1,
                     alive=lambda proc=proc, log=log: f"exited: {log}" if proc.poll() is not None else None)
        redis = clients.redis_client(settings)
        start_crawls(redis, site)
        started = time.time()
        echo(f"crawling 3 sites with 2 workers; {ADAPTIVE} slows down to {args.latency:g} s at +{args.before:g} s")
        time.sleep(args.before)
        slow_at = time.time()
        site.set_latency(ADAPTIVE, args.latency)
        time.sleep(args.slow)
        recover_at = time.time()
        site.set_latency(ADAPTIVE, 0.0)
        time.sleep(args.after)
        end = time.time()
        redis.close()
    finally:
        for proc in reversed(procs):
            stop_pid(proc.pid, timeout=30)
        site.stop()
        services.down(tmp / "services")
    figures: dict[str, Any] = {"seconds": round(end - started, 1), "workers": 2}
    for host, rate in PACED.items():
        figures[host] = paced_figures([t for t in site.hits(host) if t < end], rate)
    figures[ADAPTIVE] = adaptive_figures([t for t in site.hits(ADAPTIVE) if t < end], slow_at, recover_at, end)
    return figures


def goals(figures: dict[str, Any]) -> dict[str, bool]:
    adaptive = figures[ADAPTIVE]
    return {
        "busiest second <= 2 at 60/60 s": figures["paced60.bench.test"]["busiest_1s"] <= 2,
        "p5 gap >= 0.8 W/N (60/60 s)": figures["paced60.bench.test"]["p5_gap_ratio"] >= 0.8,
        "p5 gap >= 0.8 W/N (240/60 s)": figures["paced240.bench.test"]["p5_gap_ratio"] >= 0.8,
        "adaptive spacing doubles within 30 s": adaptive["doubled_after_s"] is not None
        and adaptive["doubled_after_s"] <= 30,
        "adaptive spacing returns within 2 min": adaptive["recovered_after_s"] is not None
        and adaptive["recovered_after_s"] <= 120,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=float, default=20.0, help="seconds before the adaptive site slows down")
    parser.add_argument("--slow", type=float, default=20.0, help="seconds the adaptive site stays slow")
    parser.add_argument("--after", type=float, default=20.0, help="seconds after it recovers")
    parser.add_argument("--latency", type=float, default=1.5, help="the slow site's response time (seconds)")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of the figures")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-politeness-") as tmp:
        figures = run(args, Path(tmp), print)
    for host in PACED:
        f = figures[host]
        print(f"{host} {f['rate']} (W/N {f['spacing_s']:g} s): {f['hits']} hits; busiest 1 s {f['busiest_1s']}, "
              f"busiest 10 s {f['busiest_10s']} (paced: {f['allowed_10s']}); gaps p5 {f['p5_gap_s']:.3f} s "
              f"({f['p5_gap_ratio']:.2f} W/N), median {f['median_gap_s']:.3f} s")
    a = figures[ADAPTIVE]
    print(f"{ADAPTIVE} 120/60s adaptive: spacing {a['spacing_before_s']} s before, {a['spacing_slow_s']} s slow, "
          f"{a['spacing_after_s']} s after; doubled {a['doubled_after_s']} s after the slowdown, back within 25 % "
          f"{a['recovered_after_s']} s after the recovery")
    met = goals(figures)
    for goal, ok in met.items():
        print(f"  {'met ' if ok else 'MISSED'} {goal}")
    figures["goals"] = met
    if args.json:
        print(json.dumps(figures))
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
