"""Crawl throughput: crawlfleet (1 and 2 workers) against plain Scrapy and scrapy-redis, on one static site.

    python -m bench.crawl [--pages N] [--rounds R] [--sides S,…] [--run-dir D] [--profile] [--json]

The same spider (the fleet's ``universal`` with ``DEMO_UNIVERSAL_RULE``) with the same downloader middlewares and
item pipelines (decode, clean, extract, MongoDB) crawls the same three demo sites (``news``, ``china`` in GBK,
``blog``; ``--pages`` articles over the three, plus their home and list pages), served as static files by nginx
(:mod:`bench.crawl_site`) so that the site is not the bottleneck. Only scheduling, dedup and dispatch differ
(:mod:`bench.crawl_sides`):

- ``scrapy``: plain single-process Scrapy, its memory scheduler and ``RFPDupeFilter``;
- ``fleet_1``, ``fleet_2``: crawlfleet with 1 or 2 workers, the whole path (crawl requests through Kafka, Kafka
  monitor, master, Redis queues, workers, MongoDB), site rates raised in ZooKeeper so that politeness never binds;
- ``scrapy_redis``: scrapy-redis, 1 worker (its Redis scheduler, queue and dupefilter);
- ``scrapy_pool``: plain Scrapy with the fleet's page-work process pool (``CRAWLFLEET_PAGE_PROCESSES``), for
  comparison (not a default side);
- ``project_scrapy``, ``project_fleet_2`` (issue 35; not default sides): a plain Scrapy project's own spider
  (:mod:`bench.ownproject`, a ``CrawlSpider`` with the same link rules, storing title, author and date) under plain
  ``scrapy crawl``, and unchanged on the fleet with 2 workers (``scrapy crawl`` with the fleet's add-on), one crawl
  over the three sites; their ratio ``project_fleet2_vs_scrapy`` (``--sides project_scrapy,project_fleet_2``).

Where the page work (extraction, Markdown, metadata) runs (:func:`bench.crawl_sides.page_work_settings`): plain
Scrapy and scrapy-redis run it in their pipelines on the reactor thread, as Scrapy runs item pipelines; each
fleet worker is told how many workers share the host (``CRAWLFLEET_HOST_WORKERS``) and the registry's default
decides (a pool process when there is more than one core per worker: 1 worker on 2 cores yes, 2 workers no).
``CRAWLFLEET_PAGE_PROCESSES`` / ``CRAWLFLEET_HOST_WORKERS`` in the bench's environment override it for every side.

Every side obeys robots.txt as served (allow all but ``/private/``, ``/_demoweb/``, ``/ads/``, which the rule never
follows). The sides run interleaved, round after round (the order rotates each round), and each must fetch every
page exactly once and store every article, or the benchmark fails. Printed per side: pages/min from the first request
(the fleet: the crawl requests sent to Kafka) to the last item stored (median over rounds), the ratios, and CPU
seconds per 1,000 pages of each process group (workers, master, monitors, Redis, MongoDB, Kafka, ZooKeeper, nginx),
from ``/proc/<pid>/stat``. With ``--json`` the last line is::

    {"pages_per_min": {"scrapy": …, "fleet_1": …, "fleet_2": …, "scrapy_redis": …}, "fleet1_vs_scrapy": …,
     "fleet2_vs_scrapy": …, "fleet1_vs_scrapy_redis": …, "fleet1_vs_scrapy_pool": …, "project_fleet2_vs_scrapy": …,
     "cpu_s_per_1000_pages": {side: {group: …}}}

With ``--profile`` (issue 39) the workers' CPU is also split by step (:func:`bench.crawl_cpu.step_seconds`): the
reactor thread, the feed thread, the heartbeat thread, other threads, the page-work processes; and a *CPU budget*
is printed: milliseconds of CPU per page of every step and process group, one column per side beside plain
Scrapy's, with each side's total over Scrapy's. Where a side has no pool, its page work is on the reactor thread
and counts there. The JSON line gets ``"cpu_ms_per_page": {side: {step or group: ms, "total": ms}}`` and
``"cpu_vs_scrapy": {side: total / scrapy's total}``.

Goals (issue 26, this 2-core machine): fleet_1 >= 1.1 x scrapy, fleet_2 >= 1.8 x scrapy. Needs nginx
(``deploy/install-bench-deps.sh``, run by ``make bench``) and scrapy-redis (the ``bench`` extra). The rendered
site is cached under ``--run-dir`` (default ``$CRAWLFLEET_RUN_DIR/bench-crawl``); services run there too and are
stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from bench.crawl_cpu import STEPS
from bench.crawl_sides import SIDES, SideResult

DEFAULT_SIDES = ("scrapy", "fleet_1", "fleet_2", "scrapy_redis")
GOALS = {"fleet1_vs_scrapy": 1.1, "fleet2_vs_scrapy": 1.8}
RATIOS = {"fleet1_vs_scrapy": ("fleet_1", "scrapy"), "fleet2_vs_scrapy": ("fleet_2", "scrapy"),
          "fleet1_vs_scrapy_redis": ("fleet_1", "scrapy_redis"), "fleet1_vs_scrapy_pool": ("fleet_1", "scrapy_pool"),
          "project_fleet2_vs_scrapy": ("project_fleet_2", "project_scrapy")}
CPU_ORDER = ("workers", "master", "kafka_monitor", "redis_monitor", "redis", "mongodb", "kafka", "zookeeper", "nginx")
# The CPU budget's rows (--profile): the workers' steps in place of their total, then the other groups.
BUDGET_ORDER = (*(f"workers.{step}" for step in STEPS), *CPU_ORDER[1:])
BUDGET_LABELS = {"workers.reactor": "reactor thread", "workers.feed": "feed thread",
                 "workers.heartbeat": "heartbeat thread", "workers.threads": "other threads",
                 "workers.page_processes": "page processes"}


def side_order(sides: Sequence[str], round_no: int) -> list[str]:
    """The sides of round ``round_no`` (1-based): rotated by one each round, so no side always runs first."""
    shift = (round_no - 1) % len(sides) if sides else 0
    return [*sides[shift:], *sides[:shift]]


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if not numerator or not denominator:
        return None
    return round(numerator / denominator, 3)


def summarize(results: Iterable[SideResult]) -> dict[str, Any]:
    """The JSON summary: median pages/min per side, the ratios, median CPU seconds per 1,000 pages per group."""
    by_side: dict[str, list[SideResult]] = {}
    for result in results:
        by_side.setdefault(result.side, []).append(result)
    pages_per_min = {side: round(statistics.median(r.pages_per_min for r in runs), 1) for side, runs in by_side.items()}
    cpu: dict[str, dict[str, float]] = {}
    for side, runs in by_side.items():
        groups = sorted({group for run in runs for group in run.cpu}, key=_cpu_rank)
        cpu[side] = {group: round(statistics.median(run.cpu.get(group, 0.0) / run.pages * 1000 if run.pages else 0.0
                                                    for run in runs), 3) for group in groups}
    summary: dict[str, Any] = {"pages_per_min": pages_per_min}
    for name, (numerator, denominator) in RATIOS.items():
        summary[name] = ratio(pages_per_min.get(numerator), pages_per_min.get(denominator))
    summary["cpu_s_per_1000_pages"] = {side: {group: value for group, value in groups.items() if "." not in group}
                                       for side, groups in cpu.items()}
    if any("." in group for groups in cpu.values() for group in groups):  # --profile: the budget by step
        summary["cpu_ms_per_page"] = budget = {side: cpu_budget(groups) for side, groups in cpu.items()}
        plain = budget.get("scrapy", {}).get("total")
        summary["cpu_vs_scrapy"] = {side: ratio(costs["total"], plain) for side, costs in budget.items()}
    return summary


def cpu_budget(groups: dict[str, float]) -> dict[str, float]:
    """A side's CPU ms per page by step and group (s per 1,000 pages are ms per page), and their total: the
    workers' steps stand for the workers' total (they add up to it)."""
    steps = [group for group in groups if group.startswith("workers.")]
    kept = {group: value for group, value in groups.items()
            if not (steps and group == "workers") and ("." not in group or group in steps)}
    budget = {group: kept[group] for group in sorted(kept, key=_budget_rank)}
    budget["total"] = round(sum(budget.values()), 3)
    return budget


def _budget_rank(group: str) -> tuple[int, str]:
    return (BUDGET_ORDER.index(group) if group in BUDGET_ORDER else len(BUDGET_ORDER), group)


def _cpu_rank(group: str) -> tuple[int, str]:
    return (CPU_ORDER.index(group) if group in CPU_ORDER else len(CPU_ORDER), group)


def report(results: Sequence[SideResult], summary: dict[str, Any]) -> list[str]:
    """The human-readable figures: each run, then per side pages/min and CPU per 1,000 pages, then the ratios."""
    lines = ["", f"{'side':<13} {'round':>5} {'pages':>7} {'items':>7} {'seconds':>8} {'pages/min':>10}"]
    for r in results:
        lines.append(f"{r.side:<13} {r.round:>5} {r.pages:>7} {r.items:>7} {r.seconds:>8.1f} {r.pages_per_min:>10,.0f}")
    groups = sorted({g for cpu in summary["cpu_s_per_1000_pages"].values() for g in cpu}, key=_cpu_rank)
    lines += ["", "CPU seconds per 1,000 pages (median over rounds):",
              f"{'side':<13} {'pages/min':>10} " + " ".join(f"{g:>13}" for g in groups) + f" {'total':>8}"]
    for side, cpu in summary["cpu_s_per_1000_pages"].items():
        cells = " ".join(f"{cpu[g]:>13.2f}" if g in cpu else f"{'-':>13}" for g in groups)
        lines.append(f"{side:<13} {summary['pages_per_min'][side]:>10,.0f} {cells} {sum(cpu.values()):>8.2f}")
    if "cpu_ms_per_page" in summary:
        lines += budget_table(summary["cpu_ms_per_page"], summary["cpu_vs_scrapy"])
    lines.append("")
    for name in RATIOS:
        value = summary.get(name)
        goal = GOALS.get(name)
        shown = f"{value:.3f}" if value is not None else "n/a"
        lines.append(f"{name}: {shown}" + (f" (goal >= {goal})" if goal else ""))
    return lines


def budget_table(budget: dict[str, dict[str, float]], versus: dict[str, float | None]) -> list[str]:
    """The CPU budget (--profile): one row per step or process group, one column per side, ms of CPU per page."""
    sides = list(budget)
    rows = sorted({group for costs in budget.values() for group in costs if group != "total"}, key=_budget_rank)
    lines = ["", "CPU budget, ms of CPU per page (median over rounds; all processes of the side counted):",
             f"{'':<18}" + "".join(f"{side:>13}" for side in sides)]
    for group in rows:
        cells = "".join(f"{budget[side][group]:>13.3f}" if group in budget[side] else f"{'-':>13}" for side in sides)
        lines.append(f"{BUDGET_LABELS.get(group, group):<18}{cells}")
    lines.append(f"{'total':<18}" + "".join(f"{budget[side]['total']:>13.3f}" for side in sides))
    lines.append(f"{'x scrapy':<18}" + "".join(f"{versus[side]:>13.3f}" if versus.get(side) else f"{'-':>13}"
                                                for side in sides))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=3000, help="articles over the three sites (default 3,000)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--sides", default=",".join(DEFAULT_SIDES), help=f"comma-separated, of {', '.join(SIDES)}")
    parser.add_argument("--run-dir", type=Path, default=None,
                        help="services, logs and the rendered site (default $CRAWLFLEET_RUN_DIR/bench-crawl)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds a side may take (default: 120 + 0.2 per page, i.e. at least 300 pages/min)")
    parser.add_argument("--profile", action="store_true",
                        help="split the workers' CPU by thread and page processes; print the CPU budget per page")
    parser.add_argument("--json", action="store_true", help="print a JSON line last")
    args = parser.parse_args(argv)
    sides = [side.strip() for side in args.sides.split(",") if side.strip()]
    unknown = sorted(set(sides) - set(SIDES))
    if unknown or not sides:
        parser.error(f"unknown sides {unknown}; known: {', '.join(SIDES)}")
    if args.pages < 3:
        parser.error("--pages must be at least 3 (one article per site)")
    articles = args.pages // 3
    run_dir = args.run_dir or Path(os.environ.get("CRAWLFLEET_RUN_DIR") or Path.home() / ".crawlfleet") / "bench-crawl"
    timeout = args.timeout or 120 + 0.2 * args.pages * 1.1

    from bench.crawl_sides import CrawlBench

    def echo(text: str) -> None:
        print(text, file=sys.stderr if args.json else sys.stdout, flush=True)

    results: list[SideResult] = []
    with CrawlBench(run_dir.resolve(), articles, timeout, echo, profile=args.profile) as bench:
        for round_no in range(1, args.rounds + 1):
            for side in side_order(sides, round_no):
                result = bench.run_side(side, round_no)
                echo(f"{side}: {result.pages} pages, {result.items} items, {result.robots} robots.txt, "
                     f"{result.seconds:.1f}s, {result.pages_per_min:,.0f} pages/min")
                results.append(result)
                if result.problems:
                    echo(f"{side} failed its check: " + "; ".join(result.problems))
                    print("\n".join(report(results, summarize(results))))
                    return 1
    summary = summarize(results)
    print("\n".join(report(results, summary)))
    if args.json:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
