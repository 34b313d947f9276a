"""Every long-running process exposes Prometheus ``/metrics`` that a Prometheus parser reads: the monitors, the
master (its leadership and the cluster's gauges), every worker (its responses, sites, leases, CPU and memory, on
its own port even with several on one host) and the manager (its jobs and the cluster)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from deploy.demo_rules import DEMO_LIST_RULE
from deploy.procs import wait_for
from messaging.clients import as_text
from tests.e2e.test_manager_api import ManagerProcess

pytestmark = pytest.mark.e2e
WAIT = 90


def scrape(url: str, **kwargs: Any) -> dict[str, Any]:
    """Every family of the endpoint by name (the parser raises on anything that is not the text format)."""
    response = requests.get(url, timeout=30, **kwargs)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    return {family.name: family for family in text_string_to_metric_families(response.text)}


def endpoints(redis: Any) -> dict[str, list[str]]:
    """The registered endpoints by module (``metrics:<module>:<host>:<pid>``)."""
    found: dict[str, list[str]] = {}
    for key in redis.scan_iter(match="metrics:*"):
        module = as_text(key).split(":")[1]
        found.setdefault(module, []).append(as_text(redis.get(key)))
    return found


def value(families: dict[str, Any], name: str, **labels: str) -> float:
    samples = [s for s in families[name].samples if not s.name.endswith("_created")
               and all(s.labels.get(k) == v for k, v in labels.items())]
    assert samples, f"no {name} sample with {labels}"
    return sum(sample.value for sample in samples)


def test_every_process_serves_metrics_a_prometheus_parser_reads(fleet: Any, procs: Any, tmp_path: Path) -> None:
    env = {**fleet.env, "CRAWLFLEET_CRAWLER_METRICS_PORT": "0"}
    fleet.env = env
    fleet.start(list_workers=2, redis_monitor=True)
    fleet.submit({"userid": "m", "crawlid": "metrics-news", "spider_type": "list",
                  "url": fleet.url("news.fleet.test", "/world/"), "rule": DEMO_LIST_RULE})
    fleet.wait_finished(["metrics-news"], WAIT)
    redis = fleet.redis
    wait_for(lambda: {"kafka-monitor", "redis-monitor", "master", "crawler"} <= set(endpoints(redis)), 30,
             "every module's endpoint registered")
    found = endpoints(redis)
    assert len(found["crawler"]) == 2 and len(set(found["crawler"])) == 2  # two workers, two ports

    for module in ("kafka-monitor", "redis-monitor"):
        families = scrape(found[module][0])
        assert value(families, "crawlfleet_process_up", module=module) == 1
        assert "process_resident_memory_bytes" in families

    # the cluster's figures are read at most every 5 s (frontier.metrics.ClusterCollector): a scrape may show an
    # older reading, so the scrape that shows both workers alive is waited for, bounded
    def master_with_both_alive() -> Any:
        got = scrape(found["master"][0])
        return got if value(got, "crawlfleet_workers_alive") == 2 else None

    master = wait_for(master_with_both_alive, 30, "both workers alive in the master's metrics", interval=1.0)
    assert value(master, "crawlfleet_master_leader", master="m0") == 1 and value(master, "crawlfleet_masters") == 1
    assert value(master, "crawlfleet_cluster_up") == 1
    assert value(master, "crawlfleet_crawl_pages", crawlid="metrics-news", state="finished") > 0
    assert value(master, "crawlfleet_crawl_items", crawlid="metrics-news") > 0
    assert value(master, "crawlfleet_crawler_responses", spider_type="list", status="200") > 0
    assert {s.labels["worker"] for s in master["crawlfleet_worker_queued_tasks"].samples} == set(fleet.workers)

    pages = 0.0
    for url in found["crawler"]:
        worker = scrape(url)
        assert {s.labels["worker"] for s in worker["crawlfleet_worker_info"].samples} <= set(fleet.workers)
        assert "crawlfleet_worker_held_leases" in worker and "process_cpu_seconds" in worker
        assert worker["process_resident_memory_bytes"].samples[0].value > 0
        pages += sum(s.value for s in worker["crawlfleet_worker_responses"].samples if s.name.endswith("_total"))
        sites = {s.labels["site"] for s in worker["crawlfleet_worker_site_hits"].samples}
        assert sites <= {"news.fleet.test"}, sites
    assert pages > 0

    manager = ManagerProcess(procs, env, tmp_path / "manager").start()
    families = scrape(f"{manager.url}/metrics")
    assert value(families, "crawlfleet_manager_jobs", state="running") == 0
    assert value(families, "crawlfleet_workers_alive") == 2 and value(families, "crawlfleet_seeds") == 0
    assert "process_resident_memory_bytes" in families
