"""Soak: the fleet's memory over a long crawl, with 1 and with 2 workers.

    python -m bench.soak [--pages 300000] [--workers 1,2] [--interval 5] [--run-dir D] [--plot docs/soak.png]
                         [--json-out FILE] [--json]

The crawl of ``bench.crawl`` (:class:`bench.crawl_sides.CrawlBench`: the three generated demo sites served by nginx,
``--pages`` articles over the three, the fleet's whole path from Kafka to MongoDB), long: for each worker count a
side runs the Kafka monitor, the Redis monitor, the master, the workers (each with its page-work processes when the
host gives them some) and a manager whose pages (the crawls, the fleet, ``/metrics``, a crawl's page) are read all
along, as an operator's browser would. Every few seconds the resident memory of every one of these processes, and
of the services (Redis, MongoDB, Kafka, ZooKeeper), is sampled with the pages crawled so far (:mod:`bench.soak_rss`).
MongoDB runs on disk with its cache bound (the run is long), so the crawl's items never fill it.

Printed per side and process: RSS at 10,000 pages and at the end, at most, and the growth after the first 10,000
pages in MB per 100,000 pages (least squares over the samples). The checks (issue 40), over the fleet's own processes
(the services' memory is their caches': Redis holds the crawl's per-URL state by design, MongoDB fills its bounded
cache): no process grows by more than :data:`GROWTH_LIMIT_MB` MB per 100,000 pages after the first 10,000, a
worker's RSS at the end is within :data:`WORKER_END_RATIO` x its RSS at 10,000 pages, and the crawl completes with
every page fetched once and every article stored once. The exit status is 1 when a check fails.

Writes the samples and figures as JSON (``--json-out``, default ``<run dir>/soak.json``) and draws RSS against pages
crawled, one line per process and a panel per side (``--plot``, default ``<run dir>/soak.png``). With ``--json`` the
last line printed is the figures: ``{"sides": {"fleet_1": {"pages": …, "processes": {name: {"at_warm": …, "end": …,
"max": …, "mb_per_100k": …, "end_vs_warm": …}}, "problems": […]}, …}, "ok": …}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.soak_rss import PER_PAGES, WARM_PAGES, AccessCount, RssSampler, Sample, growth, series

GROWTH_LIMIT_MB = 20.0  # per 100,000 pages, after the first 10,000
WORKER_END_RATIO = 1.5
SERVICES = ("redis", "mongodb", "kafka", "zookeeper")
NOT_SAMPLED = ("nginx",)  # the site, not the fleet
MANAGER_READ_SECONDS = 5.0  # the manager's pages are read this often (a crawl's page every 12th time)


def fleet_process(name: str) -> bool:
    """Whether a sampled process is one of the fleet's (judged by the checks), not a service."""
    return name not in SERVICES


def judge(side: str, pages: int, figures: dict[str, dict[str, Any]]) -> list[str]:
    """The checks' failures for one side (empty: it passed)."""
    problems = []
    if pages < WARM_PAGES * 2:
        problems.append(f"{side}: only {pages} pages crawled: too few to measure growth after {WARM_PAGES}")
    for name, figure in figures.items():
        if not fleet_process(name) or figure.get("mb_per_100k") is None:
            continue
        if figure["mb_per_100k"] > GROWTH_LIMIT_MB:
            problems.append(f"{side}: {name} grew {figure['mb_per_100k']} MB per 100,000 pages after the first "
                            f"{WARM_PAGES:,} (limit {GROWTH_LIMIT_MB:g})")
        if name.startswith("worker") and " " not in name.removeprefix("worker ") and (figure["end_vs_warm"] or 0) > \
                WORKER_END_RATIO:
            problems.append(f"{side}: {name} ended at {figure['end_vs_warm']} x its RSS at {WARM_PAGES:,} pages "
                            f"(limit {WORKER_END_RATIO})")
    return problems


class ManagerReader:
    """Reads the manager's pages every few seconds in a thread, as an operator's browser would."""

    def __init__(self, base: str, crawlids: list[str], interval: float = MANAGER_READ_SECONDS) -> None:
        self.base, self.crawlids, self.interval = base, crawlids, interval
        self.reads = self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="manager-reader", daemon=True)

    def __enter__(self) -> ManagerReader:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        turn = 0
        while not self._stop.wait(self.interval):
            paths = ["/crawls", "/fleet", "/sites", "/metrics", "/api/crawls", "/api/nodes"]
            if turn % 12 == 0 and self.crawlids:
                paths.append(f"/crawls/{self.crawlids[turn // 12 % len(self.crawlids)]}")
            turn += 1
            for path in paths:
                try:
                    with urllib.request.urlopen(self.base + path, timeout=60) as reply:
                        reply.read()
                    self.reads += 1
                except OSError:
                    self.failures += 1


def run_side(bench: Any, workers: int, interval: float, echo: Any) -> dict[str, Any]:
    """One side of the soak: the fleet of ``workers`` workers and a manager, sampled; its figures and samples."""
    from deploy.procs import free_port, spawn, stop_pid, wait_for

    side = f"fleet_{workers}"
    crawls = bench.crawls(side, 1)
    port = free_port()
    log = bench.logs / f"{side}-manager.log"
    manager = spawn([sys.executable, "-m", "deploy.cli", "manager", "--port", str(port)], log, env=bench.env,
                    cwd=str(Path(__file__).resolve().parents[1]))
    try:
        wait_for(lambda: _answers(port), 60,
                 "the manager to listen", alive=lambda: "exited" if manager.poll() is not None else None)
        counter = AccessCount(bench.site.access_log, bench.site.log_offset())

        def roots() -> dict[str, int]:
            groups = bench.groups()
            named = {f"worker {n}": pid for n, pid in enumerate(groups.get("workers", []), 1)}
            named.update({name: pids[0] for name, pids in groups.items()
                          if name != "workers" and name not in NOT_SAMPLED and pids})
            named["manager"] = manager.pid
            return named

        samples_file = bench.run_dir / f"soak-samples-{side}.jsonl"
        samples_file.unlink(missing_ok=True)

        def keep(sample: Sample) -> None:
            with samples_file.open("a") as out:
                out.write(json.dumps(_sample_row(sample)) + "\n")

        with RssSampler(roots, counter.read, interval, on_sample=keep) as sampler, \
                ManagerReader(f"http://127.0.0.1:{port}", list(crawls)):
            result = bench.run_side(side, 1)
    finally:
        stop_pid(manager.pid, timeout=30)
        manager.wait(timeout=10)
    samples = sampler.samples
    figures = {name: growth(points) for name, points in series(samples).items()}
    problems = list(result.problems) + judge(side, samples[-1].pages if samples else 0, figures)
    echo(f"{side}: {result.pages:,} pages, {result.items:,} items in {result.seconds:,.0f} s "
         f"({result.pages_per_min:,.0f} pages/min)")
    return {"side": side, "workers": workers, "pages": result.pages, "items": result.items,
            "seconds": round(result.seconds, 1), "pages_per_min": round(result.pages_per_min, 1),
            "processes": figures, "problems": problems,
            "samples": [_sample_row(s) for s in samples]}


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2):
            return True
    except OSError:
        return False


def report(sides: list[dict[str, Any]]) -> list[str]:
    lines = []
    for side in sides:
        lines += ["", f"{side['side']}: {side['pages']:,} pages, {side['pages_per_min']:,.0f} pages/min",
                  f"  {'process':<34} {'MB at 10k':>10} {'MB at end':>10} {'MB max':>8} {'MB/100k':>8} {'end/10k':>8}"]
        for name, figure in sorted(side["processes"].items(), key=lambda kv: (not fleet_process(kv[0]), kv[0])):
            if figure.get("at_warm") is None and " page work " in name:
                continue  # a recycled page-work process, summed up below
            lines.append(f"  {name:<34} {_cell(figure.get('at_warm'))} {_cell(figure.get('end'))} "
                         f"{_cell(figure.get('max'), 8)} {_cell(figure.get('mb_per_100k'), 8)} "
                         f"{_cell(figure.get('end_vs_warm'), 8)}")
        short = [f for n, f in side["processes"].items() if " page work " in n and f.get("at_warm") is None]
        if short:
            lines.append(f"  (+ {len(short)} page-work processes that were recycled or lived under "
                         f"{WARM_PAGES:,} pages: at most {max(f['max'] for f in short):.0f} MB)")
        lines += [f"  FAIL {problem}" for problem in side["problems"]] or ["  checks passed"]
    return lines


def _cell(value: Any, width: int = 10) -> str:
    return f"{value:>{width}.1f}" if isinstance(value, (int, float)) else f"{'-':>{width}}"


def plot(sides: list[dict[str, Any]], path: Path) -> None:
    """RSS against pages crawled, one line per process (services dashed), a panel per side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(sides), figsize=(7.5 * len(sides), 5.6), dpi=100, squeeze=False, sharey=True)
    for ax, side in zip(axes[0], sides, strict=True):
        samples = [Sample(s["seconds"], s["pages"], s["rss_mb"]) for s in side["samples"]]
        labelled: set[str] = set()
        for name, points in sorted(series(samples).items()):
            xs, ys = [x / 1000 for x, _ in points], [y for _, y in points]
            if " page work " in name:
                label = name.split(" page work ")[0] + " page work"
                ax.plot(xs, ys, color="#7f7f7f", lw=1.0, label=None if label in labelled else label)
                labelled.add(label)
            elif fleet_process(name):
                ax.plot(xs, ys, lw=1.8, label=name)
            else:
                ax.plot(xs, ys, lw=1.0, ls="--", label=f"{name} (service)")
        ax.axvline(WARM_PAGES / 1000, color="black", lw=0.6, ls=":")
        ax.set_title(f"{side['side']}: {side['workers']} worker{'s' if side['workers'] > 1 else ''}, "
                     f"{side['pages']:,} pages")
        ax.set_xlabel("pages crawled (thousands)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", ncol=2)
    axes[0][0].set_ylabel("resident memory (MB)")
    fig.suptitle(f"bench.soak: RSS of every process against pages crawled (growth judged after "
                 f"{WARM_PAGES:,} pages, per {PER_PAGES:,})", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=300_000, help="articles over the three sites (default 300,000)")
    parser.add_argument("--workers", default="1,2", help="worker counts, one side each (default 1,2)")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between samples (default 5)")
    parser.add_argument("--run-dir", type=Path, default=None,
                        help="services, logs and the rendered site (default $CRAWLFLEET_RUN_DIR/bench-soak)")
    parser.add_argument("--plot", type=Path, default=None, help="the PNG (default <run dir>/soak.png)")
    parser.add_argument("--json-out", type=Path, default=None, help="samples and figures (default <run dir>/soak.json)")
    parser.add_argument("--json", action="store_true", help="print a JSON line of the figures last")
    parser.add_argument("--from-samples", type=Path, nargs="+", default=None, metavar="JSONL",
                        help="crawl nothing: the figures, JSON and plot of the samples a run wrote as it went "
                             "(<run dir>/soak-samples-<side>.jsonl), e.g. of a run stopped before its end")
    args = parser.parse_args(argv)
    if args.from_samples:
        return _finish([side_from_samples(path) for path in args.from_samples], args, args.run_dir or
                       args.from_samples[0].parent, time.time())
    counts = [int(n) for n in args.workers.split(",") if n.strip()]
    if not counts or min(counts) < 1:
        parser.error("--workers: one or more worker counts, e.g. 1,2")
    run_dir = (args.run_dir or Path(os.environ.get("CRAWLFLEET_RUN_DIR") or Path.home() / ".crawlfleet")
               / "bench-soak").resolve()

    def echo(text: str) -> None:
        print(text, file=sys.stderr if args.json else sys.stdout, flush=True)

    from bench.crawl_sides import CrawlBench

    sides: list[dict[str, Any]] = []
    started = time.time()
    with CrawlBench(run_dir, max(1, args.pages // 3), 600 + 0.2 * args.pages * 1.1, echo) as bench:
        for workers in counts:
            sides.append(run_side(bench, workers, args.interval, echo))
    return _finish(sides, args, run_dir, started)


def side_from_samples(path: Path) -> dict[str, Any]:
    """A side as far as its samples file goes (``soak-samples-<side>.jsonl``): its figures, checks and samples; the
    crawl's own counts are unknown, and a crawl stopped before its end is said to be partial."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    samples = [Sample(row["seconds"], row["pages"], row["rss_mb"]) for row in rows]
    side = path.stem.removeprefix("soak-samples-")
    figures = {name: growth(points) for name, points in series(samples).items()}
    pages = samples[-1].pages if samples else 0
    seconds = samples[-1].seconds if samples else 0.0
    return {"side": side, "workers": int(side.rpartition("_")[2] or 0), "pages": pages, "items": None,
            "seconds": seconds, "pages_per_min": round(pages / seconds * 60, 1) if seconds else 0.0,
            "processes": figures, "partial": True,
            "problems": [f"{side}: samples only ({pages:,} pages): whether the crawl completed is not known",
                         *judge(side, pages, figures)],
            "samples": [_sample_row(s) for s in samples]}


def _sample_row(sample: Sample) -> dict[str, Any]:
    return {"seconds": sample.seconds, "pages": sample.pages, "rss_mb": sample.rss_mb}


def _finish(sides: list[dict[str, Any]], args: argparse.Namespace, run_dir: Path, started: float) -> int:
    """Write the JSON and the plot, print the report (and the JSON line); the exit status."""
    figures = {"sides": {s["side"]: {k: v for k, v in s.items() if k != "samples"} for s in sides},
               "ok": not any(s["problems"] for s in sides), "started": started, "pages_asked": args.pages}
    json_out = args.json_out or run_dir / "soak.json"
    json_out.parent.mkdir(parents=True, exist_ok=True)
    json_out.write_text(json.dumps({**figures, "samples": {s["side"]: s["samples"] for s in sides}}))
    plot(sides, args.plot or run_dir / "soak.png")
    print("\n".join(report(sides)))
    print(f"samples: {json_out}; plot: {args.plot or run_dir / 'soak.png'}",
          file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps(figures))
    return 0 if figures["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
