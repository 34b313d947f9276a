"""Debian's Prometheus (``/usr/bin/prometheus``, run here with its own config and data directory, no service)
scrapes a ``crawlfleet up`` fleet through the ``file_sd`` file the fleet keeps, and every query of the Grafana
dashboard gives the figure the fleet's own state gives (Redis, MongoDB, the registrations).

The fleet: two list workers (so that a query grouping by the wrong label shows a wrong sum), one master, the
monitors, a manager. A crawl of the demo news site runs to its end (pages, items, statuses, sites, events); four
crawls of sites blocked by a Retry-After stay queued in the workers' queues (queue depths that hold still). A rate
panel (``rate(M[5m])``) is compared through its counter (``M``): the totals must be the fleet's; its own query must
give the same series. The same fleet shows that the manager of its run directory lists the ``crawlfleet up`` workers
on its Jobs page, with their logs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from deploy.demo_rules import DEMO_LIST_RULE
from deploy.procs import free_port, port_open, wait_for
from frontier.client import FrontierReader
from frontier.registry import WorkerRegistry
from messaging import clients, discovery, keys
from messaging.clients import as_text
from messaging.clock import RedisClock
from messaging.settings import load, read_state
from messaging.siteconfig import Rate, SitePaths, write_defaults
from tests.plugins.services import REPO, TEST_ENV, Processes

pytestmark = pytest.mark.e2e
DASHBOARD = REPO / "deploy" / "monitoring" / "grafana" / "dashboards" / "crawlfleet.json"
COMMAND_TIMEOUT = 300
WAIT = 120
QUEUED = [f"q{n}.example" for n in range(1, 5)]  # sites blocked by a Retry-After: their tasks stay queued
Vector = dict[frozenset[tuple[str, str]], float]


def cli(run_dir: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLFLEET_")}
    env.update(TEST_ENV, CRAWLFLEET_RUN_DIR=str(run_dir), CRAWLFLEET_ROBOTSTXT_OBEY="0")
    return subprocess.run([sys.executable, "-m", "deploy.cli", *args], env=env, cwd=REPO, input=stdin, text=True,
                          capture_output=True, timeout=COMMAND_TIMEOUT, check=False)


@dataclass
class Fleet:
    run_dir: Path
    redis: Any
    mongo: Any
    targets_file: Path
    prometheus: str
    manager: str

    def query(self, expr: str) -> Vector:
        answer = requests.get(f"{self.prometheus}/api/v1/query", params={"query": expr}, timeout=30).json()
        assert answer["status"] == "success", answer
        return {frozenset((k, v) for k, v in series["metric"].items()): float(series["value"][1])
                for series in answer["data"]["result"]}


def prometheus_binary() -> str:
    found = shutil.which("prometheus") or ("/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None)
    if found is None:
        pytest.fail("Debian's prometheus package is missing: deploy/install-deps.sh installs it (make test)")
    return found


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, procs_module: Processes) -> Iterator[Fleet]:
    run_dir = tmp_path_factory.mktemp("fleet")
    try:
        up = cli(run_dir, "up", "--workers-list", "2", "--workers-universal", "0", "--masters", "1", "--pages", "10",
                 "--timeout", "180")
        assert up.returncode == 0, up.stdout + up.stderr
        targets_file = run_dir / "prometheus" / "targets.json"
        assert f"file_sd_configs: [{{files: [{targets_file}]}}]" in up.stdout.replace("\n", "")
        settings = load({**TEST_ENV, "CRAWLFLEET_RUN_DIR": str(run_dir)})
        redis = clients.redis_client(settings)
        zk = clients.zk_client(settings)
        write_defaults(zk, SitePaths(settings.zk_root), Rate(6000, 60))  # politeness is not what this waits for
        zk.stop()
        zk.close()
        manager_port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLFLEET_")}
        procs_module.crawlfleet("manager", env={**env, **TEST_ENV, "CRAWLFLEET_RUN_DIR": str(run_dir),
                                                "CRAWLFLEET_MANAGER_PORT": str(manager_port),
                                                "CRAWLFLEET_PROMETHEUS_SD_INTERVAL": "1"})
        wait_for(lambda: port_open(manager_port), 60, "the manager")

        until = int((RedisClock(redis).now() + 3600) * 1e6)
        for domain in QUEUED:
            redis.set(keys.block(domain), until)
        port = read_state(run_dir)["demoweb"]["port"]
        crawls = [{"userid": "p", "crawlid": "prom-news", "spider_type": "list", "rule": DEMO_LIST_RULE,
                   "url": f"http://news.fleet.test:{port}/world/"}]
        crawls += [{"userid": "p", "crawlid": f"prom-{domain.split('.')[0]}", "spider_type": "list",
                    "rule": DEMO_LIST_RULE, "url": f"http://{domain}/"} for domain in QUEUED]
        sent = cli(run_dir, "submit", "--timeout", "60", "-", stdin="\n".join(json.dumps(c) for c in crawls))
        assert sent.returncode == 0, sent.stdout + sent.stderr
        wait_for(lambda: redis.hget(keys.crawl("prom-news"), "state") == b"finished", WAIT, "the news crawl's end")

        prometheus = start_prometheus(procs_module, tmp_path_factory.mktemp("prometheus"), targets_file)
        yield Fleet(run_dir, redis, clients.mongo_client(settings)[settings.mongo_db], targets_file, prometheus,
                    f"http://127.0.0.1:{manager_port}")
    finally:
        down = cli(run_dir, "down")
        assert down.returncode == 0, down.stdout + down.stderr


def start_prometheus(procs: Processes, home: Path, targets_file: Path) -> str:
    port = free_port()
    config = home / "prometheus.yml"
    config.write_text(f"""global: {{scrape_interval: 1s, evaluation_interval: 1s}}
scrape_configs:
  - job_name: crawlfleet
    file_sd_configs: [{{files: ["{targets_file}"], refresh_interval: 1s}}]
""")
    proc = procs.start([prometheus_binary(), f"--config.file={config}", f"--storage.tsdb.path={home / 'data'}",
                        f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"], os.environ.copy(),
                       name="prometheus", cwd=home)
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: port_open(port), 60, "Prometheus listening",
             alive=lambda: f"exited:\n{procs.log(proc)[-2000:]}" if proc.poll() is not None else None)
    return url


# --- what the fleet's own state says ---------------------------------------------------------------------------
def labels(**values: str) -> frozenset[tuple[str, str]]:
    return frozenset(values.items())


def lifetime_counters(redis: Any) -> dict[tuple[str, str], int]:
    """(module, plugin) -> the lifetime count of every stats counter in Redis."""
    found = {}
    for key in redis.scan_iter(match=keys.stats_pattern(), count=1000):
        parsed = keys.parse_stats_key(as_text(key))
        if parsed.window == "lifetime":
            found[(parsed.module, parsed.plugin)] = int(redis.get(key) or 0)
    return found


def statuses(redis: Any) -> dict[str, int]:
    by_status: dict[str, int] = {}
    for (module, plugin), count in lifetime_counters(redis).items():
        spider_type, _, status = plugin.rpartition(":")
        if module == "crawler" and spider_type and (status.isdigit() or status == "error"):
            by_status[status] = by_status.get(status, 0) + count
    return by_status


def crawl_figures(redis: Any, field: str) -> Vector:
    ids = [as_text(c) for c in redis.smembers(keys.CRAWLS)]
    return {labels(crawlid=c): float(redis.hget(keys.crawl(c), field) or 0) for c in ids}


def truths(fleet: Fleet) -> dict[str, Callable[[], tuple[str, Vector]]]:
    """Panel query -> (how to compare, the fleet's own figure): ``exact`` (the same series and values), ``counts``
    (the same, a series at 0 being no count: the master exports its alerted events from 0, Redis has no key until the
    first), ``series`` (the same series; values positive or zero)."""
    redis = fleet.redis
    registry = WorkerRegistry(redis)

    def live() -> list[str]:
        now = RedisClock(redis).now()
        return [job for job, beat in registry.live().items() if now - beat <= load().heartbeat_ttl]

    def depths(index: int) -> Vector:
        return {frozenset(): float(sum(d[index] for d in FrontierReader(redis).queue_depths(live()).values()))}

    def targets() -> Vector:
        return {labels(service=g["labels"]["service"], instance=t): 0.0
                for g in json.loads(fleet.targets_file.read_text()) for t in g["targets"]}

    def processes_up() -> Vector:
        counts: dict[str, int] = {}
        for endpoint in discovery.process_endpoints(redis):
            counts[endpoint.service] = counts.get(endpoint.service, 0) + 1
        return {labels(module=m): float(n) for m, n in counts.items()}

    def sites() -> Vector:
        totals = {}
        for key in redis.scan_iter(match="site:*:statuses"):
            domain = as_text(key).split("{", 1)[1].split("}", 1)[0]
            totals[labels(site=domain)] = float(sum(int(v) for v in redis.hvals(key)))
        return dict(sorted(totals.items(), key=lambda kv: -kv[1])[:10])

    def items() -> float:
        return float(sum(fleet.mongo[c].count_documents({}) for c in fleet.mongo.list_collection_names()
                         if c.startswith("prom-")))

    return {
        "max(crawlfleet_workers_alive)": lambda: ("exact", {frozenset(): float(len(live()))}),
        "max(crawlfleet_masters)": lambda: ("exact", {frozenset(): 1.0}),
        "max(crawlfleet_seeds)": lambda: ("exact", {frozenset(): float(redis.zcard(keys.SEEDS))}),
        "sum(crawlfleet_worker_responses_total)": lambda: ("exact", {frozenset(): float(sum(statuses(redis)
                                                                                            .values()))}),
        "sum(crawlfleet_worker_items_total)": lambda: ("exact", {frozenset(): items()}),
        "sum by (module) (crawlfleet_process_up)": lambda: ("exact", processes_up()),
        "sum by (status) (crawlfleet_worker_responses_total)": lambda: (
            "exact", {labels(status=s): float(n) for s, n in statuses(redis).items()}),
        "sum(max by (worker) (crawlfleet_worker_queued_tasks))": lambda: ("exact", depths(0)),
        "sum(max by (worker) (crawlfleet_worker_leased_tasks))": lambda: ("exact", depths(1)),
        "topk(10, sum by (site) (crawlfleet_worker_site_hits_total))": lambda: ("exact", sites()),
        "max by (crawlid) (crawlfleet_crawl_pages)": lambda: ("exact", crawl_figures(redis, "pages")),
        "max by (master) (crawlfleet_master_leader)": lambda: ("exact", {labels(master="m1"): 1.0}),
        "max by (worker) (crawlfleet_worker_heartbeat_age_seconds)": lambda: (
            "series", {labels(worker=j): 0.0 for j in live()}),
        "max by (crawlid) (crawlfleet_crawl_items)": lambda: ("exact", crawl_figures(redis, "items")),
        'sum by (service, instance) (process_cpu_seconds_total{job="crawlfleet"})': lambda: ("series", targets()),
        'sum by (service, instance) (process_resident_memory_bytes{job="crawlfleet"})': lambda: (
            "series", targets()),
        "sum by (module, plugin) (crawlfleet_events_total)": lambda: (
            "counts", {labels(module=m, plugin=p): float(n) for (m, p), n in lifetime_counters(redis).items()}),
    }


def as_counter(expr: str) -> str:
    """A rate panel's query with its counter itself: ``rate(M{…}[5m])`` -> ``M{…}``."""
    return re.sub(r"rate\(([a-z_]+(?:\{[^}]*\})?)\[\w+\]\)", r"\1", expr)


def test_prometheus_finds_every_endpoint_through_the_file_sd_file(fleet: Fleet) -> None:
    groups = {g["labels"]["service"]: g["targets"] for g in json.loads(fleet.targets_file.read_text())}
    assert {"master", "kafka-monitor", "redis-monitor", "manager"} <= set(groups) and len(groups["crawler"]) == 2

    def all_up() -> bool:
        active = requests.get(f"{fleet.prometheus}/api/v1/targets", timeout=30).json()["data"]["activeTargets"]
        scraped = {(t["labels"]["service"], t["labels"]["instance"]) for t in active if t["health"] == "up"}
        return scraped == {(s, t) for s, ts in groups.items() for t in ts}

    wait_for(all_up, 60, "every target of the file scraped and up")


def test_every_dashboard_query_gives_the_fleets_own_figure(fleet: Fleet) -> None:
    checks = truths(fleet)
    queries = [(panel["title"], target["expr"]) for panel in json.loads(DASHBOARD.read_text())["panels"]
               for target in panel["targets"]]
    assert {as_counter(expr) for _, expr in queries} == set(checks)  # every panel is checked, each once

    def disagreements() -> list[str]:
        wrong = []
        for title, expr in queries:
            mode, expected = checks[as_counter(expr)]()
            got = fleet.query(as_counter(expr))
            compared = got
            if mode == "counts":
                compared, expected = ({k: v for k, v in vector.items() if v} for vector in (got, expected))
            if mode in ("exact", "counts") and compared != expected:
                wrong.append(f"{title}: {as_counter(expr)} gave {sorted(compared.items())}, "
                             f"the fleet {sorted(expected.items())}")
            elif mode == "series" and (set(got) != set(expected) or min(got.values(), default=0) < 0):
                wrong.append(f"{title}: {expr} series {sorted(got)}, the fleet's {sorted(expected)}")
            if as_counter(expr) != expr:  # the panel's own rate query: the same series, none negative
                rates = fleet.query(expr)
                if set(rates) != set(got) or min(rates.values(), default=0) < 0:
                    wrong.append(f"{title}: {expr} gave {sorted(rates.items())}")
        return wrong

    last: list[list[str]] = [[]]

    def agree() -> bool:
        last[0] = disagreements()
        return not last[0]

    try:
        wait_for(agree, 90, "every panel agreeing with the fleet", 1.0)
    except Exception as exc:
        raise AssertionError("\n".join(last[0])) from exc
    queued = fleet.query("sum(max by (worker) (crawlfleet_worker_queued_tasks))")[frozenset()]
    per_worker = fleet.query("max by (worker) (crawlfleet_worker_queued_tasks)")
    assert queued == len(QUEUED) and len([v for v in per_worker.values() if v]) == 2, per_worker  # on both


def test_the_manager_lists_the_fleets_workers_with_their_logs(fleet: Fleet) -> None:
    from tests.e2e.test_manager_scrapyd_pages import read_jobs, state_of

    workers = {p["job"]: p for p in read_state(fleet.run_dir)["fleet"]["processes"] if p["role"] == "worker"}
    page = requests.get(f"{fleet.manager}/jobs", timeout=30).text
    rows = {row["job"]: row for row in read_jobs(page)}  # scrapyd's rows: what ScrapydWeb reads
    assert set(rows) == set(workers), rows
    for job, process in workers.items():
        row = rows[job]
        assert state_of(row) == "running" and int(row["pid"]) == process["pid"] and row["spider"] == "list"
        link = re.search(r'href="([^"]+\.log)"', row["log"])
        assert link and link.group(1) == f"/logs/crawlfleet/list/{job}.log"
        log = requests.get(f"{fleet.manager}{link.group(1)}", timeout=30)
        assert log.status_code == 200 and f"worker {job} ready" in log.text
        stats = requests.get(f"{fleet.manager}/logs/crawlfleet/list/{job}.json", timeout=30).json()
        assert stats["first_log_time"] != "N/A" and stats["crawler_stats"]["source"] == "crawlfleet"
    listed = requests.get(f"{fleet.manager}/listjobs.json", timeout=30).json()
    assert {j["id"] for j in listed["running"]} == set(workers)
    assert "none: every registered worker is listed above" in page  # no other worker in the cluster
