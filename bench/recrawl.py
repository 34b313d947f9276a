"""Continuous crawling: staleness of the adaptive revisit schedule against a constant interval, at an equal budget.

    python -m bench.recrawl [--seconds S] [--scale K] [--interval I] [--seed X] [--run-dir D] [--json]

The whole fleet (services, Kafka monitor, master, one ``universal`` worker) crawls the changing demo site
(``deploy.demoweb.changing``: half its articles never change, the others 4, 1 and 0.25 times a site hour, a third
with ETag and Last-Modified, a third with Last-Modified only, a third without validators; its list page gains an
article every ``--publish`` site seconds; its clock runs ``--scale`` times faster than real time) twice, each time
from a fresh site with the same seed, i.e. the same changes:

1. **adaptive** — the rule's ``revisit`` with ``--interval`` real seconds, ``min`` a fifth of it, ``max`` 24 times it
   (``frontier.revisit``'s rule);
2. **constant** — Nutch's default schedule: every page every C seconds (``min = max = interval = C``), with C chosen
   so that it spends the fetches the adaptive run spent: C = (page-seconds revisited) / (revisits made), less the
   fleet's own delay per revisit (what the constant run's revisits took beyond C); when the first constant run's
   revisits differ by more than 5 % from the adaptive run's, it runs again with C corrected by that delay.

The fleet runs with short idle times (dispatch, revisit moves and commits every 0.05–0.1 s): on a clock compressed
240 times, the pipeline's fraction of a second between a list page's fetch and its new links' fetches is minutes of
site time.

Everything is measured at the site, from its own log (``/_changing/state.json``):

- **mean staleness**: how long a stored copy lags the live page (its age: zero while it is the live version, then
  the time since the page's first change after the fetch), averaged over the articles and over time from each
  article's first fetch to the end of the run. Reported in site minutes, and the ratio adaptive / constant (goal: at
  most 0.8);
- **304 share**: of the revisits of unchanged pages that have validators (the client's last copy is the live
  version), how many were answered 304 (goal: at least 95 %);
- **new articles**: for each article published during the run, the time from its publication to its first fetch
  against the list page's interval around then (the gap between the list fetch that could first list it and the one
  before): the share fetched within that one interval (goal: all), and the worst ratio;
- fetches of each run (the budget) and its revisits.

With ``--json`` the last line is one JSON object with these figures. Quick size: 2 × 120 s of crawling at a scale of
240 (8 site hours each), about five minutes in all.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from deploy import services
from deploy.demoweb.changing import read_state, start_changing, stop_changing
from deploy.procs import spawn, stop_pid, wait_for
from messaging import clients
from messaging.kafka_monitor.monitor import topic_partitions
from messaging.settings import load
from messaging.siteconfig import Rate, SitePaths, write_defaults

REPO = Path(__file__).resolve().parents[1]
GOALS = {"staleness_ratio": 0.8, "not_modified_share": 0.95, "new_within_list_interval": 1.0}
START_TIMEOUT = 90.0
BENCH_RATE = Rate(60_000, 60)


# --- figures from the site's log (pure functions) ---------------------------------------------------------------
def staleness(state: dict[str, Any]) -> tuple[float, float]:
    """(integrated age, observed page-seconds) over the articles, in site seconds: after each fetch the stored copy
    is current until the page's next change, then lags the live page by the time since that change, until the next
    fetch (see the module docstring)."""
    end = state["now"]
    age = observed = 0.0
    for page in state["pages"].values():
        fetches = sorted(at for at, _status, _version in page["fetches"])
        if not fetches:
            continue
        observed += end - fetches[0]
        changes = page["changes"]
        for start, stop in zip(fetches, [*fetches[1:], end], strict=True):
            first = next((t for t in changes if start < t <= stop), None)
            if first is not None:
                age += (stop - first) ** 2 / 2
    return age, observed


def revisits(state: dict[str, Any]) -> tuple[int, float]:
    """(revisits made, page-seconds between each page's first fetch and the end), articles and list page."""
    end = state["now"]
    made, span = 0, 0.0
    for page in state["pages"].values():
        if page["fetches"]:
            made += len(page["fetches"]) - 1
            span += end - min(at for at, _, _ in page["fetches"])
    if state["list_fetches"]:
        made += len(state["list_fetches"]) - 1
        span += end - state["list_fetches"][0]
    return made, span


def new_article_lags(state: dict[str, Any]) -> list[tuple[float, float]]:
    """For each article published after the first list fetch and fetched since: (time from its publication to its
    first fetch, the list page's interval around its publication: the gap between the list fetch that could first
    list it and the one before), site seconds."""
    lists = state["list_fetches"]
    lags = []
    for page in state["pages"].values():
        published = page["published"]
        if not page["fetches"] or not lists or published <= lists[0]:
            continue
        found = next((t for t in lists if t >= published), None)
        before = max((t for t in lists if t < published), default=None)
        if found is None or before is None:
            continue
        lags.append((min(at for at, _, _ in page["fetches"]) - published, found - before))
    return lags


def figures(state: dict[str, Any]) -> dict[str, Any]:
    stale, observed = staleness(state)
    made, span = revisits(state)
    counts = state["counts"]
    lags = new_article_lags(state)
    return {"mean_staleness_site_min": round(stale / observed / 60, 3) if observed else None,
            "fetches": counts.get("200", 0) + counts.get("304", 0) + counts.get("list", 0), "revisits": made,
            "revisit_span_site_s": span, "not_modified": counts.get("304", 0),
            "unchanged_revisits": counts.get("unchanged_revisits", 0),
            "unchanged_304": counts.get("unchanged_304", 0),
            "new_articles": len(lags),
            "new_within_list_interval": sum(1 for lag, gap in lags if lag <= gap),
            "worst_new_lag_vs_interval": round(max((lag / gap for lag, gap in lags if gap > 0), default=0.0), 3)}


# --- one run ----------------------------------------------------------------------------------------------------
class Recrawl:
    """Services for the duration of a ``with`` block; :meth:`run` crawls a fresh changing site with one schedule."""

    def __init__(self, run_dir: Path, echo: Any = print) -> None:
        self.run_dir = run_dir
        self.echo = echo
        self.state: dict[str, Any] = {}
        self.env: dict[str, str] = {}

    def __enter__(self) -> Recrawl:
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        try:
            self.state = services.up(self.run_dir / "services", services.Options(timeout=START_TIMEOUT))
        except BaseException:
            services.down(self.run_dir / "services")
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        services.down(self.run_dir / "services")

    def run(self, name: str, revisit: dict[str, float], args: argparse.Namespace) -> dict[str, Any]:
        site = start_changing(self.run_dir / name, seed=args.seed, scale=args.scale, initial=args.initial,
                             publish_every=args.publish)
        procs: list[Any] = []
        try:
            env = self._env(site["hosts_file"])
            settings = load(env)
            clients.redis_client(settings).flushdb()  # the other run's crawl must not revisit anything here
            clients.ensure_topics(settings, topic_partitions(settings))
            zk = clients.zk_client(settings)
            try:
                write_defaults(zk, SitePaths(settings.zk_root), BENCH_RATE)
            finally:
                zk.stop()
                zk.close()
            job = f"recrawl-{name}-{os.getpid()}-{int(time.time())}"
            ready = {}
            for label, argv, text in (("kafka-monitor", ["kafka-monitor"], "partitions assigned"),
                                      ("master", ["master", "--id", f"recrawl-{name}"], "leading the dispatch"),
                                      ("worker", ["worker", "--spider", "universal", "--job", job],
                                       f"worker {job} ready")):
                log = self.run_dir / "logs" / f"{name}-{label}.log"
                log.unlink(missing_ok=True)
                proc = spawn([sys.executable, "-m", "deploy.cli", *argv], log, env=env, cwd=REPO)
                procs.append(proc)
                ready[label] = (proc, log, text)
            for proc, log, text in ready.values():
                wait_for(lambda log=log, text=text: text in log.read_text(errors="replace"), START_TIMEOUT,
                         f"{text!r} in {log}", interval=0.1,
                         alive=lambda proc=proc, log=log: f"exited: {log}" if proc.poll() is not None else None)
            rule = {"rules": [{"allow": r"/a/\d+\.html$", "extract": {"title": "//h1"}}], "required": ["title"],
                    "revisit": {"pages": "all", **revisit}}
            producer = clients.kafka_producer(settings)
            try:
                producer.send(settings.topic_incoming, {"userid": "bench", "crawlid": f"recrawl-{name}",
                                                        "spider_type": "universal", "url": site["url"],
                                                        "rule": rule}, key=f"recrawl-{name}")
                producer.flush(timeout=30)
            finally:
                producer.close(timeout=5)
            self.echo(f"{name}: crawling for {args.seconds:g} s ({args.seconds * args.scale / 3600:g} site hours), "
                      f"revisit {revisit}")
            end_site_time = args.seconds * args.scale
            wait_for(lambda: read_state(site)["now"] >= end_site_time, args.seconds * 2 + 60,
                     "the end of the run", interval=1.0,
                     alive=lambda: next((f"a process exited (logs in {self.run_dir / 'logs'})"
                                         for proc in procs if proc.poll() is not None), None))
            return read_state(site)
        finally:
            for proc in reversed(procs):
                stop_pid(proc.pid, timeout=30)
            stop_changing(site)

    def _env(self, hosts_file: str) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if not key.startswith("CRAWLFLEET_")}
        env.update(PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
                   SCRAPY_SETTINGS_MODULE="spiders.settings", CRAWLFLEET_RUN_DIR=str(self.run_dir / "services"),
                   CRAWLFLEET_REDIS_URL=self.state["redis_url"],
                   CRAWLFLEET_KAFKA_BOOTSTRAP=self.state["kafka_bootstrap"], CRAWLFLEET_ZK_HOSTS=self.state["zk_hosts"],
                   CRAWLFLEET_MONGO_URI=self.state["mongo_uri"], CRAWLFLEET_MONGO_DB="recrawlbench",
                   CRAWLFLEET_HOSTS_FILE=hosts_file, CRAWLFLEET_LOG_LEVEL="INFO",
                   CRAWLFLEET_KAFKA_SESSION_TIMEOUT_MS="6000", CRAWLFLEET_KAFKA_HEARTBEAT_MS="500",
                   CRAWLFLEET_REVISIT_INTERVAL="0.05", CRAWLFLEET_DISPATCH_INTERVAL="0.05",
                   CRAWLFLEET_COMMIT_INTERVAL="0.05", CRAWLFLEET_IDLE_BACKOFF_MAX="0.05")
        return env


def _constant(interval: float) -> dict[str, float]:
    return {"interval": interval, "min": interval, "max": interval}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.recrawl", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="real seconds each schedule crawls")
    parser.add_argument("--scale", type=float, default=240.0, help="site seconds per real second")
    parser.add_argument("--interval", type=float, default=5.0, help="the adaptive rule's interval, real seconds")
    parser.add_argument("--initial", type=int, default=24, help="articles at the start")
    parser.add_argument("--publish", type=float, default=1800.0, help="site seconds between new articles")
    parser.add_argument("--seed", default="crawlfleet")
    parser.add_argument("--run-dir", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    run_dir = args.run_dir or Path(os.environ.get("CRAWLFLEET_RUN_DIR", Path.home() / ".crawlfleet")) / "bench-recrawl"
    echo = (lambda *a: print(*a, file=sys.stderr)) if args.json else print
    adaptive_rule = {"interval": args.interval, "min": args.interval / 5, "max": args.interval * 24}
    with Recrawl(run_dir, echo) as bench:
        adaptive = figures(bench.run("adaptive", adaptive_rule, args))
        target = adaptive["revisit_span_site_s"] / max(1, adaptive["revisits"]) / args.scale
        constant_interval = target
        constant = figures(bench.run("constant", _constant(constant_interval), args))
        if abs(constant["revisits"] - adaptive["revisits"]) > 0.05 * adaptive["revisits"]:
            delay = constant["revisit_span_site_s"] / max(1, constant["revisits"]) / args.scale - constant_interval
            constant_interval = max(0.2, target - delay)
            echo(f"constant: {constant['revisits']} revisits against {adaptive['revisits']}; again with "
                 f"{constant_interval:.2f} s (the fleet adds {delay:.2f} s a revisit)")
            constant = figures(bench.run("constant-2", _constant(constant_interval), args))
    ratio = (round(adaptive["mean_staleness_site_min"] / constant["mean_staleness_site_min"], 3)
             if adaptive["mean_staleness_site_min"] is not None and constant["mean_staleness_site_min"] else None)
    share = (round(adaptive["unchanged_304"] / adaptive["unchanged_revisits"], 4)
             if adaptive["unchanged_revisits"] else None)
    within = (round(adaptive["new_within_list_interval"] / adaptive["new_articles"], 3)
              if adaptive["new_articles"] else None)
    result = {"adaptive": adaptive, "constant": constant, "constant_interval_s": round(constant_interval, 3),
              "staleness_ratio": ratio, "not_modified_share": share, "new_within_list_interval": within,
              "scale": args.scale, "seconds": args.seconds, "seed": args.seed}
    for name, figs in (("adaptive", adaptive), ("constant", constant)):
        echo(f"{name:9s} fetches {figs['fetches']:5d}  revisits {figs['revisits']:5d}  mean staleness "
             f"{figs['mean_staleness_site_min']} site min  304s {figs['not_modified']}")
    echo(f"constant interval for an equal budget: {constant_interval:.2f} s "
         f"({constant_interval * args.scale / 60:.1f} site min)")
    echo(f"staleness adaptive / constant: {ratio} (goal <= {GOALS['staleness_ratio']})")
    echo(f"unchanged revisits with validators answered 304: {share} (goal >= {GOALS['not_modified_share']})")
    echo(f"new articles fetched within one list-page interval: {within} of {adaptive['new_articles']} "
         f"(worst lag / interval {adaptive['worst_new_lag_vs_interval']})")
    if args.json:
        print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
