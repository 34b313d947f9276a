"""What each crawlfleet process needs, for the Kubernetes manifests' requests and limits (deploy/k8s/SIZING.md).

    python -m bench.k8s_sizing [--json] [--pages N] [--interval S]

Runs ``crawlfleet demo --keep`` in a run directory of its own (the local fleet: two masters, both monitors, two
list and two universal workers; three crawls of the demo web: a list crawl, a universal crawl and one whose pages
need the browser, ``render: auto``) plus a manager, and samples every process *with its children* (a worker's page
processes and its Chromium count: a pod holds them all) from ``/proc`` every ``--interval`` seconds until the
crawls finished; meanwhile the manager's pages and ``/metrics`` are read every 2 seconds (an operator and a scraper).
Printed per role: peak resident memory (the largest process of the role), mean and peak CPU in
cores (the peak over any 5-second window). The demo's sites are polite (their rates limit the crawl), so a
worker's CPU here is a polite crawl's; a worker's CPU at full speed is docs/scaling.md's (0.9 of a core).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

from deploy import fleet as local_fleet
from deploy.procs import free_port, stop_pid, wait_for
from messaging import spider_types

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
WINDOW = 5.0  # seconds of the CPU peak's window


def children(pid: int) -> list[int]:
    """``pid`` and every descendant (from /proc/<pid>/task/*/children)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                todo.extend(int(child) for child in (task / "children").read_text().split())
            except OSError:
                continue
    return found


def tree_usage(pid: int) -> tuple[float, int]:
    """(CPU seconds, resident bytes) of a process and its descendants now."""
    cpu, rss = 0.0, 0
    for member in children(pid):
        try:
            stat = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
            statm = Path(f"/proc/{member}/statm").read_text().split()
        except OSError:
            continue
        cpu += (int(stat[11]) + int(stat[12])) / TICKS  # utime, stime
        rss += int(statm[1]) * PAGE
    return cpu, rss


class Sampler:
    """Samples named process trees until stopped: peak RSS, CPU over the run and its peak over a window."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.pids: dict[str, tuple[str, int]] = {}  # name -> (role, pid)
        self.samples: dict[str, deque[tuple[float, float]]] = defaultdict(deque)  # name -> (time, cpu)
        self.first: dict[str, tuple[float, float]] = {}
        self.last: dict[str, tuple[float, float]] = {}
        self.peak_rss: dict[str, int] = defaultdict(int)
        self.peak_window: dict[str, float] = defaultdict(float)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def watch(self, name: str, role: str, pid: int) -> None:
        self.pids[name] = (role, pid)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            for name, (_, pid) in list(self.pids.items()):
                cpu, rss = tree_usage(pid)
                if rss == 0:
                    continue
                self.first.setdefault(name, (now, cpu))
                self.last[name] = (now, cpu)
                self.peak_rss[name] = max(self.peak_rss[name], rss)
                window = self.samples[name]
                window.append((now, cpu))
                while window and now - window[0][0] > WINDOW:
                    window.popleft()
                if now - window[0][0] >= WINDOW * 0.8:
                    self.peak_window[name] = max(self.peak_window[name], (cpu - window[0][1]) / (now - window[0][0]))

    def seconds(self) -> float:
        spans = [self.last[name][0] - self.first[name][0] for name in self.first]
        return max(spans, default=0.0)

    def by_role(self) -> dict[str, dict[str, float]]:
        roles: dict[str, dict[str, float]] = {}
        for name, (role, _) in self.pids.items():
            if name not in self.first:
                continue
            (t0, c0), (t1, c1) = self.first[name], self.last[name]
            mean = (c1 - c0) / (t1 - t0) if t1 > t0 else 0.0
            entry = roles.setdefault(role, {"processes": 0, "rss_mib": 0.0, "cpu_mean": 0.0, "cpu_peak": 0.0})
            entry["processes"] += 1
            entry["rss_mib"] = max(entry["rss_mib"], round(self.peak_rss[name] / 2**20, 1))
            entry["cpu_mean"] = max(entry["cpu_mean"], round(mean, 3))
            entry["cpu_peak"] = max(entry["cpu_peak"], round(self.peak_window[name], 3))
        return roles


def read_pages(port: int, stop: threading.Event) -> None:
    """An operator on the manager's pages and Prometheus on its /metrics, every 2 seconds."""
    import urllib.request

    while not stop.wait(2.0):
        for path in ("/fleet", "/crawls", "/stats", "/metrics"):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10).read()
            except OSError:
                continue


def role_of(process: dict[str, Any]) -> str:
    if process["role"] == "worker":
        return f"worker-{process['spider']}"
    return str(process["role"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print a JSON line last")
    parser.add_argument("--pages", type=int, default=300, help="articles per demo site (the demo's default)")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between two samples")
    args = parser.parse_args(argv)

    run_dir = Path(tempfile.mkdtemp(prefix="k8s-sizing-"))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CRAWLFLEET_")},
           "CRAWLFLEET_RUN_DIR": str(run_dir)}
    sampler = Sampler(args.interval).start()
    demo = subprocess.Popen([sys.executable, "-m", "deploy.cli", "demo", "--keep", "--pages", str(args.pages),
                             "--timeout", "600"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    manager = None
    reading = threading.Event()
    try:
        expected = sum(spider_types.default_workers().values())

        def fleet_up() -> bool:  # every worker of the demo's fleet runs (they are recorded as they start)
            processes = local_fleet.status(run_dir)["processes"]
            return sum(1 for p in processes if p["role"] == "worker" and p["alive"]) >= expected

        wait_for(fleet_up, 180, "the demo's fleet")
        for process in local_fleet.status(run_dir)["processes"]:
            if process["alive"] and process["role"] != "supervisor":
                sampler.watch(process["name"], role_of(process), process["pid"])
        port = free_port()
        manager = subprocess.Popen([sys.executable, "-m", "deploy.cli", "manager", "--port", str(port)],
                                   env={**local_fleet.child_env(run_dir), **env}, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        sampler.watch("manager", "manager", manager.pid)
        threading.Thread(target=read_pages, args=(port, reading), daemon=True).start()
        output, _ = demo.communicate(timeout=900)
    finally:
        reading.set()
        sampler.stop()
        if manager is not None:
            stop_pid(manager.pid, timeout=30)
        subprocess.run([sys.executable, "-m", "deploy.cli", "down"], env=env, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if demo.returncode != 0:
        print(output.decode(errors="replace")[-3000:], file=sys.stderr)
        return 1
    roles = sampler.by_role()
    print(f"sampled {sampler.seconds():.0f}s of the demo's crawls ({args.pages} articles per site)")
    print(f"{'role':18} {'processes':>9} {'peak RSS MiB':>13} {'CPU mean':>9} {'CPU peak 5s':>12}")
    for role, entry in sorted(roles.items()):
        print(f"{role:18} {entry['processes']:>9} {entry['rss_mib']:>13.1f} {entry['cpu_mean']:>9.3f} "
              f"{entry['cpu_peak']:>12.3f}")
    if args.json:
        print(json.dumps({"pages": args.pages, "seconds": round(sampler.seconds(), 1), "roles": roles},
                         sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
