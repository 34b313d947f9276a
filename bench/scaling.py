"""Scaling beyond one host: pages/min against workers for one Redis and a Redis Cluster of 3 and 6 shards.

    python -m bench.scaling [--measure [--pages N]] [--from-json FILE …] [--set NAME=VALUE …]
                            [--max-workers N] [--plot docs/scaling.png] [--json]

A model (:mod:`bench.scaling_model`, ``docs/scaling.md``) over measured per-page costs: each worker on a host of its
own, and the parts every worker shares — Redis (one core per shard, with the share of its work that sits on fixed
slots such as ``seeds`` and ``workers`` and cannot spread), MongoDB, the one leading master — each with a ceiling.
Printed: the inputs, each shared part's ceiling and the number of workers at which it saturates (for 1, 3 and 6
Redis shards), pages/min per number of workers with the part that binds, and the check against the measured 1- and
2-worker points of ``bench.crawl`` (which ran everything on one 2-core host: the check adds that host's ceiling).

Inputs: the defaults are the figures measured on the 2-core development machine (``bench.scaling_model.Inputs``);
``--from-json`` merges files in order — this command's own ``--json`` line or ``--measure`` output (its ``inputs``),
a plain mapping of input names, or ``bench.crawl --json``'s summary line (the 1- and 2-worker points, the worker's
and Redis's CPU per page); ``--set worker_cpu_s_per_page=0.004`` sets one input. ``--measure`` (about 2 minutes)
crawls 3,000 pages with one worker twice (:mod:`bench.scaling_measure`) for the Redis commands and CPU per page and
their split by slot, MongoDB writes and CPU per item, the master's CPU per task; its figures replace the defaults.
With ``--json`` the last line is ``{"inputs": …, "measure": …, "ceilings": …, "saturation": …, "curves": {setup:
[[workers, pages/min, binding part], …]}, "check": …}``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.scaling_model import (
    Inputs,
    curve,
    first_saturation,
    from_crawl_summary,
    host_cpu_s_per_page,
    master_bound,
    mongo_bound,
    predict,
    redis_bound,
    saturation,
    shard_loads,
    single_host,
    worker_rate,
)

SHARDS = (1, 3, 6)
CURVE_PARTS = ("workers", "redis", "master")  # MongoDB is sized on its own: its ceiling is drawn apart
REDIS_PARTS = ("workers", "redis")  # the plot's curves; the master's ceiling is a line of its own
TABLE_WORKERS = (1, 2, 4, 8, 16, 32, 64, 96, 128, 160)
MEASURED_KEYS = ("redis_cpu_s_per_page", "redis_fixed_slot_shares", "items_per_page", "mongo_cpu_s_per_item",
                 "master_cpu_s_per_task", "other_cpu_s_per_page")


def load_json_inputs(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(input values, measured figures)`` from a file: this command's ``--json`` output (its last line), a
    mapping of input names, or a ``bench.crawl --json`` summary line."""
    text = path.read_text().strip()
    try:
        data = json.loads(text)
    except ValueError:
        data = json.loads(text.splitlines()[-1])
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    if isinstance(data.get("pages_per_min"), dict):
        return from_crawl_summary(data), {}
    return dict(data.get("inputs", data)), dict(data.get("measure") or {})


def parse_set(items: Sequence[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--set takes NAME=VALUE, not {item!r}")
        values[name.strip()] = json.loads(value)
    return values


def label(shards: int) -> str:
    return "1 Redis" if shards == 1 else f"Cluster {shards}"


def fmt(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:,.0f}"


def ceilings(inputs: Inputs) -> dict[str, float]:
    table = {f"redis_{shards}": redis_bound(inputs, shards) for shards in SHARDS}
    table.update(mongodb=mongo_bound(inputs), master=master_bound(inputs), worker=worker_rate(inputs))
    return table


def report(inputs: Inputs, measured: Mapping[str, Any] | None, max_workers: int) -> tuple[list[str], dict[str, Any]]:
    rate = worker_rate(inputs)
    fixed = inputs.redis_fixed_slot_shares
    top_fixed = ", ".join(f"{key} {share:.1%}" for key, share in sorted(fixed.items(), key=lambda kv: -kv[1])[:3])
    lines = ["Inputs (per page unless said):",
             f"  worker   {inputs.worker_cpu_s_per_page * 1000:.2f} ms CPU x core share {inputs.worker_core_share:.3f}"
             f" -> {rate:,.0f} pages/min per worker (one host each)",
             f"  Redis    {inputs.redis_cpu_s_per_page * 1000:.3f} ms CPU; on fixed slots {sum(fixed.values()):.1%}"
             f" ({top_fixed}, {len(fixed)} slots), the rest spreads; {inputs.redis_cores_per_shard:g} core a shard",
             f"  MongoDB  {inputs.mongo_cpu_s_per_item * 1000:.3f} ms CPU an item x {inputs.items_per_page:.3f} items"
             f" a page, {inputs.mongo_nodes:g} node(s)",
             f"  master   {inputs.master_dispatch_per_s:,.0f} dispatches/s (one leader)"]
    if measured:
        lines.append(f"  measured: {measured.get('redis_commands_per_page')} Redis commands a page "
                     f"({measured.get('redis_commands_per_item')} an item; "
                     f"{measured.get('redis_top_level_commands_per_page')} top-level, "
                     f"{measured.get('redis_scripts_per_page')} scripts), "
                     f"{measured.get('mongo_writes_per_item')} MongoDB write calls an item, master "
                     f"{float(measured.get('master_cpu_s_per_task', 0)) * 1e3:.3f} ms CPU a task")
    table = ceilings(inputs)
    lines += ["", "Ceilings (pages/min) and the workers at which each saturates:"]
    sat: dict[str, Any] = {}
    for shards in SHARDS:
        loads = shard_loads(fixed, shards)
        points = saturation(inputs, shards)
        first = first_saturation(inputs, shards)
        first_sep = first_saturation(inputs, shards, CURVE_PARTS)
        sat[label(shards)] = {"parts": points, "first": first, "first_with_mongodb_sized_apart": first_sep,
                              "busiest_shard_share": round(max(loads), 4)}
        lines.append(f"  {label(shards):<10} Redis {fmt(table[f'redis_{shards}']):>10} (busiest shard "
                     f"{max(loads):.1%} of a page's Redis work) -> saturates at {points['redis']} workers; "
                     f"first shared part: {first[0]} at {first[1]}" + (
                         f"; with MongoDB sized apart: {first_sep[0]} at {first_sep[1]}" if first_sep else ""))
    lines.append(f"  MongoDB    {fmt(table['mongodb']):>10} ({inputs.mongo_nodes:g} node(s)) -> saturates at "
                 f"{saturation(inputs, 1)['mongodb']} workers")
    lines.append(f"  master     {fmt(table['master']):>10} -> saturates at {saturation(inputs, 1)['master']} workers")
    lines += ["", "pages/min (MongoDB sized apart; binding part):",
              f"{'workers':>8} " + " ".join(f"{label(s):>24}" for s in SHARDS)]
    curves = {label(s): [[p.workers, round(p.pages_per_min), p.binding] for p in curve(inputs, s, max_workers,
                                                                                      CURVE_PARTS)]
              for s in SHARDS}
    knees = {n for shards in SHARDS for n in saturation(inputs, shards).values() if n is not None}
    for n in sorted(n for n in {*TABLE_WORKERS, *knees} if n <= max_workers):
        cells = []
        for shards in SHARDS:
            point = predict(inputs, n, shards, CURVE_PARTS)
            cells.append(f"{fmt(point.pages_per_min):>14} {point.binding:>9}")
        lines.append(f"{n:>8} " + " ".join(cells))
    check = []
    lines += ["", "Check against the measured points (bench.crawl; every process on one "
                  f"{inputs.host_cores}-core host):"]
    for n, pages in sorted(inputs.measured_pages_per_min.items()):
        point = single_host(inputs, n)
        multi = predict(inputs, n, 1)
        cpu = host_cpu_s_per_page(inputs, n)
        used = pages / 60 * cpu
        check.append({"workers": n, "measured": pages, "model_one_host": round(point.pages_per_min, 1),
                      "binding": point.binding,
                      "host_ceiling": round(point.bounds["host"], 1), "model_own_hosts": round(multi.pages_per_min, 1),
                      "ratio": round(pages / point.pages_per_min, 3), "cores_used": round(used, 2)})
        lines.append(f"  {n} worker(s): measured {pages:,.0f}; model on one host {point.pages_per_min:,.0f} "
                     f"({point.binding} binds; host ceiling {point.bounds['host']:,.0f}; measured "
                     f"{pages / point.pages_per_min:.2f} of the model); model, own hosts "
                     f"{multi.pages_per_min:,.0f}; the host ran {used:.2f} of {inputs.host_cores} cores busy "
                     f"({cpu * 1000:.2f} ms CPU a page, all processes)")
    summary = {"inputs": {**asdict(inputs)}, "measure": dict(measured or {}),
               "ceilings": {k: (None if math.isinf(v) else round(v, 1)) for k, v in table.items()},
               "saturation": sat, "curves": curves, "check": check}
    return lines, summary


def plot(inputs: Inputs, max_workers: int, path: Path) -> None:
    """Workers against Redis for each setup (solid), the other shared parts' ceilings (flat lines), the measured
    points with the model's prediction for their one host (also in the inset)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 6.4), dpi=110)
    workers = list(range(1, max_workers + 1))
    colours = {1: "#1f77b4", 3: "#ff7f0e", 6: "#2ca02c"}
    widths = {1: 1.6, 3: 3.0, 6: 4.6}  # the curves lie on one another until they part: widest drawn first
    for shards in reversed(SHARDS):
        points = curve(inputs, shards, max_workers, REDIS_PARTS)
        ax.plot(workers, [p.pages_per_min / 1000 for p in points], color=colours[shards], lw=widths[shards],
                label=f"workers and {label(shards)} (Redis ceiling {redis_bound(inputs, shards) / 1000:,.0f}k)")
        n = saturation(inputs, shards, REDIS_PARTS).get("redis")
        if n is not None and n <= max_workers:
            ax.annotate(f"{label(shards)} saturates\nat {n} workers", (n, redis_bound(inputs, shards) / 1000),
                        textcoords="offset points", fontsize=8, color=colours[shards],
                        xytext=(8, -26) if n < 0.85 * max_workers else (-80, 8))  # below the flat line
    ax.axhline(master_bound(inputs) / 1000, color="black", ls=":", lw=1.2,
               label=f"master, one leader ({master_bound(inputs) / 1000:,.0f}k)")
    ax.axhline(mongo_bound(inputs) / 1000, color="grey", ls="--", lw=1.2,
               label=f"MongoDB, {inputs.mongo_nodes:g} node as measured here ({mongo_bound(inputs) / 1000:,.0f}k)")
    measured = sorted(inputs.measured_pages_per_min.items())
    if measured:
        inset = ax.inset_axes((0.07, 0.58, 0.3, 0.34))
        small = range(1, 5)
        inset.plot(small, [predict(inputs, n, 1, REDIS_PARTS).pages_per_min / 1000 for n in small], color="#1f77b4",
                   lw=1.6)
        for target in (ax, inset):
            target.plot([n for n, _ in measured], [p / 1000 for _, p in measured], "kD", ms=5,
                        label=f"measured (bench.crawl, every process on one {inputs.host_cores}-core host)")
            target.plot([n for n, _ in measured],
                        [single_host(inputs, n).pages_per_min / 1000 for n, _ in measured], "o", mfc="none",
                        mec="red", ms=8, label="the model for that one host")
        inset.set_xticks(list(small))
        inset.set_xlim(0.5, 4.5)
        inset.set_ylim(0, predict(inputs, 4, 1, REDIS_PARTS).pages_per_min / 1000 * 1.1)
        inset.set_title("1-4 workers", fontsize=8)
        inset.tick_params(labelsize=7)
        inset.grid(alpha=0.3)
    ax.set_xlabel("workers (a host each)")
    ax.set_ylabel("pages/min (thousands)")
    ax.set_title("crawlfleet: pages/min vs workers, model over measured per-page costs")
    ax.set_xlim(0, max_workers + 1)
    ax.set_ylim(0, max(master_bound(inputs), redis_bound(inputs, SHARDS[-1])) / 1000 * 1.1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--measure", action="store_true", help="measure the inputs first (about 2 minutes)")
    parser.add_argument("--pages", type=int, default=3000, help="pages of each --measure crawl (default 3,000)")
    parser.add_argument("--run-dir", type=Path, default=None,
                        help="--measure's services and site (default $CRAWLFLEET_RUN_DIR/bench-scaling)")
    parser.add_argument("--from-json", type=Path, action="append", default=[], metavar="FILE",
                        help="inputs from a file (repeatable, merged in order)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="one input (JSON value)")
    parser.add_argument("--max-workers", type=int, default=160)
    parser.add_argument("--plot", type=Path, default=None, help="write the plot (PNG) there")
    parser.add_argument("--json", action="store_true", help="print a JSON line last")
    args = parser.parse_args(argv)
    if args.max_workers < 2:
        parser.error("--max-workers must be at least 2")

    def echo(text: str) -> None:
        print(text, file=sys.stderr if args.json else sys.stdout, flush=True)

    inputs = Inputs()
    measured: dict[str, Any] = {}
    try:
        for path in args.from_json:
            values, figures = load_json_inputs(path)
            measured.update(figures)
            inputs = inputs.with_values(values)
        if args.measure:
            from bench.scaling_measure import measure

            run_dir = args.run_dir or Path(os.environ.get("CRAWLFLEET_RUN_DIR") or Path.home() / ".crawlfleet")
            run_dir = (run_dir / "bench-scaling") if args.run_dir is None else run_dir
            measured = measure(run_dir.resolve(), args.pages, echo)
            inputs = inputs.with_values({key: measured[key] for key in MEASURED_KEYS if key in measured})
        inputs = inputs.with_values(parse_set(args.set))
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    lines, summary = report(inputs, measured, args.max_workers)
    print("\n".join(lines))
    if args.plot:
        plot(inputs, args.max_workers, args.plot)
        echo(f"plot: {args.plot}")
    if args.json:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
