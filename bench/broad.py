"""Broad crawl: cost per page against the number of sites — plain Scrapy, crawlfleet with 1 and 2 workers.

    python -m bench.broad [--hosts 10,100,1000,5000] [--pages 20000 | --pages-per-host 5] [--rounds R] [--sides S,…]
                          [--split] [--json]

For each H of ``--hosts``: one nginx serves ``--pages`` pages over H hosts on distinct loopback addresses, every page
linking two or three pages of other hosts (:mod:`bench.broad_site`); the sides crawl it from page 0 with one
universal rule (follow every page of the site's hosts, an item per page), interleaved round after round, on
``bench.crawl``'s machinery (:class:`bench.crawl_sides.CrawlBench`: the services, the same spider, middlewares and
pipelines, the checks that every page was fetched exactly once and stored, CPU per process group from ``/proc``).
Printed per H and side: pages/min and the ratios to plain Scrapy; CPU seconds per 1,000 pages of each process group;
for the fleet, Redis commands per page (``INFO commandstats`` over the side, reset at its start: it counts the
commands Lua scripts call as well as the calls themselves) with the largest ones, the oldest heartbeat age and the
largest feed lag seen (sampled every half second), workers the master retired (``stats:master:worker_left``); and
robots.txt fetches per host; with ``--split``, every command of a fleet side filed by the script or key it came
from (:mod:`bench.redis_split`, Redis's ``MONITOR``). With ``--json`` the last line is one JSON object: ``{"hosts":
{H: {…}}, "goals": {…}}``.

Goals (issue 30, this 2-core machine): Redis commands per page at the largest H <= 1.3 x at the smallest; master and
Redis monitor CPU per page at the largest H <= 2 x at the smallest; no worker retired; robots.txt once per host;
fleet_2 >= 1.6 x scrapy. Services and nginx run under ``--run-dir`` (default ``$CRAWLFLEET_RUN_DIR/bench-broad``) and
are stopped at the end. Needs nginx (``make bench`` installs it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
from collections import Counter
from datetime import UTC
from pathlib import Path
from typing import Any

from bench.broad_site import BROAD_RULE, BroadSite
from bench.crawl import side_order, summarize
from bench.crawl_sides import CrawlBench, SideResult
from bench.crawl_site import ROBOTS, check_fetches, read_access_log
from bench.redis_split import CommandSplit
from bench.redis_split import report as split_report
from frontier.registry import WorkerRegistry
from messaging.clients import as_text
from messaging.clock import RedisClock
from messaging.stats import Stats

SIDES = ("scrapy", "fleet_1", "fleet_2")
TOP_COMMANDS = 8
SAMPLE_SECONDS = 0.5


class HeartbeatWatch:
    """A thread sampling, every half second, the oldest heartbeat age and the largest feed lag of the workers."""

    def __init__(self, redis: Any) -> None:
        self.registry = WorkerRegistry(redis)
        self.clock = RedisClock(redis)
        self.ages: list[float] = []
        self.lags: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat-watch", daemon=True)

    def __enter__(self) -> HeartbeatWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            try:
                health = self.registry.health(self.clock.now(), ttl=1e9, slow_after=1e9)
            except Exception:  # Redis restarting between sides: skip the sample
                continue
            if health:
                self.ages.append(max(h.beat_age for h in health.values()))
                self.lags.append(max((h.lag or 0.0) for h in health.values()))


class BroadBench(CrawlBench):
    """:class:`CrawlBench` on the broad site, with the fleet's Redis and heartbeat figures."""

    rule = BROAD_RULE

    def __init__(self, run_dir: Path, hosts: int, pages: int, timeout: float, echo: Any = print,
                 split: bool = False) -> None:
        super().__init__(run_dir, 1, timeout, echo)
        self.site = BroadSite(run_dir / "site", hosts, pages)  # type: ignore[assignment]
        self.extra: dict[tuple[str, int], dict[str, Any]] = {}
        self.split = split  # file every Redis command of a fleet side by source (bench.redis_split)
        self._watch: HeartbeatWatch | None = None
        self._split: CommandSplit | None = None

    def crawls(self, side: str, round_no: int) -> dict[str, str]:
        return {f"r{round_no}-{side}-broad": self.site.start_url()}  # type: ignore[attr-defined]

    def run_side(self, side: str, round_no: int) -> SideResult:
        self._redis.config_resetstat()
        self._watch = HeartbeatWatch(self._redis) if side.startswith("fleet_") else None
        if self._watch is None:
            return super().run_side(side, round_no)
        self._split = CommandSplit(self.state["redis_url"]) if self.split else None
        with self._watch:
            if self._split is None:
                return super().run_side(side, round_no)
            with self._split:
                return super().run_side(side, round_no)

    def _measure(self, side: str, round_no: int, crawls: dict[str, str], offset: int,
                 submitted: float | None) -> SideResult:
        """Every page exactly once and an item per page (the start page aside), plus this benchmark's figures."""
        commands = {name.removeprefix("cmdstat_"): int(stat["calls"])
                    for name, stat in self._redis.info("commandstats").items()}
        split = self._split
        if split is not None:
            split.__exit__()  # the side's commands only, not this measure's
        left = Stats(self._redis, "master").value("worker_left", "lifetime")
        fetches = read_access_log(self.site.access_log, offset)
        check = check_fetches(fetches, self.site.expected())
        robots = Counter(fetch.host for fetch in fetches if fetch.path == ROBOTS)
        problems = list(check.problems)
        items = sum(self._mongo[crawlid].count_documents({}) for crawlid in crawls)
        if items < check.pages - len(crawls):
            problems.append(f"{items} items stored for {check.pages} pages")
        newest = [doc["stored_at"].replace(tzinfo=UTC).timestamp() for crawlid in crawls
                  for doc in self._mongo[crawlid].find({}, {"stored_at": 1}).sort("stored_at", -1).limit(1)]
        first_fetch = min((fetch.at for fetch in fetches), default=0.0)
        started = submitted if submitted is not None else first_fetch
        watch = self._watch
        self.extra[side, round_no] = {
            "redis_commands": commands, "workers_retired": left, "robots": robots,
            "heartbeat_age_max": round(max(watch.ages), 2) if watch and watch.ages else None,
            "feed_lag_max": round(max(watch.lags), 2) if watch and watch.lags else None,
            "split": split.table(check.pages) if split is not None else None,
        }
        return SideResult(side, round_no, check.pages, items, check.robots, started,
                          max(max(newest, default=0.0), started), problems=tuple(problems))


def side_figures(result: SideResult, extra: dict[str, Any], hosts: int) -> dict[str, Any]:
    robots: Counter[str] = extra["robots"]
    figures: dict[str, Any] = {
        "robots_per_host_mean": round(sum(robots.values()) / hosts, 3),
        "hosts_robots_more_than_once": sum(1 for n in robots.values() if n > 1),
    }
    if result.side.startswith("fleet_"):
        commands: dict[str, int] = extra["redis_commands"]
        pages = max(result.pages, 1)
        figures.update(
            redis_commands_per_page=round(sum(commands.values()) / pages, 2),
            top_commands_per_page={name: round(calls / pages, 2)
                                   for name, calls in Counter(commands).most_common(TOP_COMMANDS)},
            commands_per_page={name: round(calls / pages, 3) for name, calls in Counter(commands).most_common()},
            heartbeat_age_max=extra["heartbeat_age_max"], feed_lag_max=extra["feed_lag_max"],
            workers_retired=extra["workers_retired"])
        if extra.get("split") is not None:
            figures["split"] = extra["split"]
    return figures


def run_hosts(hosts: int, args: argparse.Namespace, sides: list[str], echo: Any) -> dict[str, Any]:
    run_dir = (args.run_dir or Path(os.environ.get("CRAWLFLEET_RUN_DIR") or Path.home() / ".crawlfleet")
               / "bench-broad").resolve() / f"h{hosts}"
    pages = hosts * args.pages_per_host if args.pages_per_host else args.pages
    timeout = args.timeout or 180 + 0.2 * pages * 1.1
    results: list[SideResult] = []
    figures: dict[str, list[dict[str, Any]]] = {}
    with BroadBench(run_dir, hosts, pages, timeout, echo, split=args.split) as bench:
        for round_no in range(1, args.rounds + 1):
            for side in side_order(sides, round_no):
                result = bench.run_side(side, round_no)
                echo(f"H={hosts} {side}: {result.pages} pages, {result.items} items, {result.robots} robots.txt, "
                     f"{result.seconds:.1f}s, {result.pages_per_min:,.0f} pages/min")
                if result.problems:
                    raise SystemExit(f"H={hosts} {side} failed its check: " + "; ".join(result.problems))
                results.append(result)
                figures.setdefault(side, []).append(side_figures(result, bench.extra[side, round_no], hosts))
    summary = summarize(results)
    summary["sides"] = {side: _median_figures(runs) for side, runs in figures.items()}
    return summary


def _median_figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each number over rounds (the first round's other values)."""
    merged = dict(runs[0])
    for name, value in runs[0].items():
        if isinstance(value, int | float) and all(isinstance(run.get(name), int | float) for run in runs):
            merged[name] = statistics.median(run[name] for run in runs)
    return merged


def goals(by_hosts: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The issue's goals between the smallest and the largest H measured."""
    low, high = min(by_hosts), max(by_hosts)
    result: dict[str, Any] = {"between": [low, high]}
    for side in ("fleet_2", "fleet_1"):
        a, b = by_hosts[low]["sides"].get(side), by_hosts[high]["sides"].get(side)
        if a and b:
            result["redis_commands_per_page_ratio"] = _ratio(b["redis_commands_per_page"],
                                                             a["redis_commands_per_page"])
            cpu_low = by_hosts[low]["cpu_s_per_1000_pages"][side]
            cpu_high = by_hosts[high]["cpu_s_per_1000_pages"][side]
            for group in ("master", "redis_monitor"):
                result[f"{group}_cpu_per_page_ratio"] = _ratio(cpu_high.get(group), cpu_low.get(group))
            break
    sides = [figures for summary in by_hosts.values() for figures in summary["sides"].values()]
    result["workers_retired"] = sum(s.get("workers_retired", 0) for s in sides)
    result["hosts_robots_more_than_once"] = sum(s["hosts_robots_more_than_once"] for s in sides)
    result["fleet2_vs_scrapy"] = {h: summary.get("fleet2_vs_scrapy") for h, summary in by_hosts.items()}
    return result


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return round(numerator / denominator, 3) if numerator and denominator else None


def report(by_hosts: dict[int, dict[str, Any]], summary: dict[str, Any]) -> list[str]:
    lines = []
    for hosts, figures in by_hosts.items():
        lines += ["", f"=== H = {hosts} hosts"]
        groups = sorted({g for cpu in figures["cpu_s_per_1000_pages"].values() for g in cpu})
        lines.append(f"{'side':<9} {'pages/min':>10} " + " ".join(f"{g:>13}" for g in groups)
                     + "  (CPU s / 1,000 pages)")
        for side, cpu in figures["cpu_s_per_1000_pages"].items():
            cells = " ".join(f"{cpu[g]:>13.2f}" if g in cpu else f"{'-':>13}" for g in groups)
            lines.append(f"{side:<9} {figures['pages_per_min'][side]:>10,.0f} {cells}")
        lines.append(f"fleet1_vs_scrapy {figures.get('fleet1_vs_scrapy')}  fleet2_vs_scrapy "
                     f"{figures.get('fleet2_vs_scrapy')}")
        for side, extra in figures["sides"].items():
            lines.append(f"{side}: robots.txt per host {extra['robots_per_host_mean']}, hosts fetched more than once "
                         f"{extra['hosts_robots_more_than_once']}")
            if "redis_commands_per_page" in extra:
                lines.append(f"  Redis commands per page {extra['redis_commands_per_page']}: "
                             + ", ".join(f"{k} {v}" for k, v in extra["top_commands_per_page"].items()))
                lines.append(f"  oldest heartbeat {extra['heartbeat_age_max']} s, largest feed lag "
                             f"{extra['feed_lag_max']} s, workers retired {extra['workers_retired']}")
            if extra.get("split"):
                lines += split_report(extra["split"], extra["redis_commands_per_page"])
    lines += ["", "goals: " + json.dumps(summary)]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", default="10,100,1000,5000", help="comma-separated numbers of hosts")
    parser.add_argument("--pages", type=int, default=20_000, help="pages in all, over the hosts (default 20,000)")
    parser.add_argument("--pages-per-host", type=int, default=0,
                        help="pages per host instead of --pages in all (issue 39: 5 at every H)")
    parser.add_argument("--split", action="store_true",
                        help="file every Redis command of a fleet side by script or key (MONITOR: slows Redis)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--sides", default=",".join(SIDES), help=f"comma-separated, of {', '.join(SIDES)}")
    parser.add_argument("--run-dir", type=Path, default=None)
    parser.add_argument("--timeout", type=float, default=None, help="seconds a side may take")
    parser.add_argument("--json", action="store_true", help="print a JSON line last")
    args = parser.parse_args(argv)
    hosts_list = [int(h) for h in args.hosts.split(",") if h.strip()]
    sides = [side.strip() for side in args.sides.split(",") if side.strip()]
    too_many = [h for h in hosts_list if h > args.pages and not args.pages_per_host]
    if not hosts_list or any(h < 2 for h in hosts_list) or too_many or set(sides) - set(SIDES) or not sides:
        parser.error(f"--hosts: numbers from 2 to --pages; --sides of {', '.join(SIDES)}")

    def echo(text: str) -> None:
        print(text, file=sys.stderr if args.json else sys.stdout, flush=True)

    by_hosts = {hosts: run_hosts(hosts, args, sides, echo) for hosts in hosts_list}
    summary = goals(by_hosts)
    print("\n".join(report(by_hosts, summary)))
    if args.json:
        print(json.dumps({"hosts": {str(h): s for h, s in by_hosts.items()}, "goals": summary}, default=_plain))
    return 0


def _plain(value: Any) -> Any:
    return dict(value) if isinstance(value, Counter) else as_text(value)


if __name__ == "__main__":
    sys.exit(main())
