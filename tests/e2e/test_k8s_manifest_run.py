"""The production overlay, run as it says (no containers here): each Deployment of ``kubectl kustomize
deploy/k8s/overlays/production`` started as local processes — its container's command and arguments, its environment
resolved from the ConfigMap and the Secret (whose values the test supplies, as the operator would), as many as its
replicas (a worker Deployment: its ScaledObject's minimum) — with the production store addresses mapped to the test's
services. Then:

- every process answers ``/livez`` and ``/readyz`` 200 on the port its probes name;
- the ScaledObject's query, run by a real Prometheus (Debian's) scraping the masters, answers with the live fleet's
  ready count (``readytasks:<type>`` in Redis at that moment);
- SIGTERM to a worker while it holds leases under load: it exits within its Deployment's
  terminationGracePeriodSeconds, with status 0;
- the fleet crawls the demo web to the end: every article stored once, no page fetched twice.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy.demo_rules import DEMO_LIST_RULE, DEMO_UNIVERSAL_RULE
from deploy.demoweb.sites import build_sites
from deploy.procs import free_port, wait_for
from frontier.client import FrontierReader
from messaging import keys
from messaging.settings import SETTINGS
from messaging.siteconfig import Rate
from tests.plugins.k8s import container, crawlfleet_deployments, environment, of_kind, render
from tests.plugins.services import TEST_ENV

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

NEWS, CHINA = "news.fleet.test", "china.fleet.test"
RATE = Rate(180, 60)  # 3 pages a second per site: queues fill (a ready count to read) and a worker holds leases
CLUSTER_NAME = re.compile(r"^[a-z0-9.-]+\.svc\.cluster\.local:[0-9]+$")
METRICS_URL = re.compile(r"http://[0-9.]+:([0-9]+)/metrics")
PROM_LAG = 12.0  # seconds a Prometheus answer may trail Redis: the collector's cache (5 s) and a scrape (1 s)


def local_env(env: dict[str, str], cf: Any, demoweb: dict[str, Any], manager_port: int) -> dict[str, str]:
    """The manifest's environment on this machine: store addresses (cluster DNS names in the ConfigMap) mapped to
    the test's services, the test's share of them (its topics, group, database, ZooKeeper chroot), loopback binds."""
    mapped, local = dict(env), cf.settings.as_env()
    for name in ("CRAWLFLEET_KAFKA_BOOTSTRAP", "CRAWLFLEET_ZK_HOSTS"):
        assert all(CLUSTER_NAME.match(address) for address in env[name].split(",")), env[name]
        mapped[name] = local[name]
    isolation = ("CRAWLFLEET_TOPIC_INCOMING", "CRAWLFLEET_TOPIC_OUTBOUND", "CRAWLFLEET_TOPIC_FAILED",
                 "CRAWLFLEET_KAFKA_GROUP", "CRAWLFLEET_MONGO_DB")
    mapped.update({name: local[name] for name in isolation})
    mapped.update({name: value for name, value in TEST_ENV.items() if name.startswith("CRAWLFLEET_KAFKA_")})
    mapped.update(CRAWLFLEET_METRICS_HOST="127.0.0.1", CRAWLFLEET_MANAGER_BIND="127.0.0.1",
                  CRAWLFLEET_MANAGER_PORT=str(manager_port), CRAWLFLEET_MANAGER_URL=f"http://127.0.0.1:{manager_port}",
                  CRAWLFLEET_HOSTS_FILE=demoweb["hosts_file"])
    return mapped


def get(url: str, auth: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if auth:
        import base64

        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


class Fleet:
    """The production overlay's processes, started from what the manifests say."""

    def __init__(self, procs: Any, cf: Any, demoweb: dict[str, Any], tmp_path: Path) -> None:
        self.procs, self.cf, self.demoweb, self.tmp = procs, cf, demoweb, tmp_path
        self.resources = render("production")
        self.manager_port = free_port()
        self.secrets = {"CRAWLFLEET_REDIS_URL": cf.env["CRAWLFLEET_REDIS_URL"],
                        "CRAWLFLEET_MONGO_URI": cf.settings.mongo_uri, "CRAWLFLEET_MANAGER_AUTH": "ops:k8s-test"}
        self.started: dict[str, list[Any]] = {}  # Deployment -> its processes
        self.ports: dict[int, int] = {}  # pid -> the port its probes are served on
        replicas = {s["spec"]["scaleTargetRef"]["name"]: s["spec"]["minReplicaCount"]
                    for s in of_kind(self.resources, "ScaledObject")}
        self.deployments = {d["metadata"]["name"]: d for d in crawlfleet_deployments(self.resources)}
        self.replicas = {name: d["spec"].get("replicas", replicas.get(name)) for name, d in self.deployments.items()}

    def env_of(self, name: str) -> dict[str, str]:
        env = environment(self.resources, self.deployments[name], self.secrets, {"status.hostIP": "127.0.0.1"})
        assert set(env) <= set(SETTINGS), set(env) - set(SETTINGS)
        return local_env(env, self.cf, self.demoweb, self.manager_port)

    def start(self, name: str) -> Any:
        spec = container(self.deployments[name])
        command = [str(Path(sys.executable).parent / spec["command"][0]), *spec["args"]]
        home = self.tmp / f"home-{name}-{len(self.started.get(name, []))}"  # the pod's emptyDir (its run dir)
        home.mkdir()
        base = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLFLEET_")}
        env = {**base, "HOME": str(home), "PYTHONPATH": self.cf.env["PYTHONPATH"], **self.env_of(name)}
        proc = self.procs.start(command, env, name=name)
        self.started.setdefault(name, []).append(proc)
        return proc

    def start_all(self) -> None:
        for name, count in self.replicas.items():
            for _ in range(count):
                self.start(name)

    def probe_port(self, name: str, proc: Any) -> int:
        """The port the Deployment's probes name, as the process bound it (the metrics port: the first free from
        CRAWLFLEET_METRICS_PORT, announced in its log; the manager: its own port)."""
        if proc.pid not in self.ports:
            spec = container(self.deployments[name])
            if spec["readinessProbe"]["httpGet"]["port"] == "http":
                self.ports[proc.pid] = self.manager_port
            else:
                found: list[int] = []

                def announced() -> bool:
                    found[:] = [int(m.group(1)) for m in METRICS_URL.finditer(self.procs.log(proc))]
                    return bool(found)

                wait_for(announced, 90, f"{name} (pid {proc.pid}) to announce its metrics port")
                self.ports[proc.pid] = found[0]
        return self.ports[proc.pid]

    def wait_ready(self, timeout: float = 120) -> None:
        for name, procs in self.started.items():
            spec = container(self.deployments[name])
            for proc in procs:
                port = self.probe_port(name, proc)
                for probe in ("readinessProbe", "livenessProbe"):
                    url = f"http://127.0.0.1:{port}{spec[probe]['httpGet']['path']}"
                    wait_for(lambda url=url: get(url)[0] == 200, timeout, f"{name} {url} to answer 200",
                             interval=0.3)

    def job_of(self, proc: Any) -> str:
        found = re.search(r"worker (\S+) ready", self.procs.log(proc))
        assert found, "the worker logged no job id"
        return found.group(1)

    def jobs(self) -> dict[str, Any]:
        """Every worker's job id -> its process."""
        return {self.job_of(proc): proc for name, procs in self.started.items() if "worker" in name for proc in procs}


class Prometheus:
    """Debian's Prometheus, scraping the masters every second, as a cluster's would through their annotations."""

    def __init__(self, procs: Any, tmp_path: Path, targets: list[str]) -> None:
        self.port = free_port()
        config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                  "scrape_configs": [{"job_name": "crawlfleet", "static_configs": [
                      {"targets": targets, "labels": {"namespace": "crawlfleet"}}]}]}
        path = tmp_path / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        procs.start(["prometheus", f"--config.file={path}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                     f"--web.listen-address=127.0.0.1:{self.port}"], {"PATH": os.environ["PATH"]},
                    name="prometheus")
        wait_for(lambda: get(f"http://127.0.0.1:{self.port}/-/ready")[0] == 200, 60, "Prometheus")

    def query(self, query: str) -> float | None:
        status, body = get(f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": query}))
        result = json.loads(body)["data"]["result"] if status == 200 else []
        return float(result[0]["value"][1]) if result else None


class ReadyCounts:
    """``readytasks:<type>`` read from Redis every 0.1 s, with when."""

    def __init__(self, redis: Any, spider_type: str) -> None:
        self.redis, self.key = redis, keys.ready_tasks_type(spider_type)
        self.seen: deque[tuple[float, int]] = deque(maxlen=2000)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.seen.append((time.monotonic(), int(self.redis.get(self.key) or 0)))

    def within(self, seconds: float) -> set[int]:
        now = time.monotonic()
        return {count for at, count in list(self.seen) if now - at <= seconds}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def test_the_production_overlay_runs_as_a_fleet_that_crawls_scales_and_drains(
        cf: Any, procs: Any, demoweb: dict[str, Any], tmp_path: Path, fleet: Any) -> None:
    news, china = (next(s for s in build_sites(demoweb["pages"]) if getattr(s, "name", None) == name)
                   for name in (NEWS, CHINA))
    before = {NEWS: fleet.served(NEWS), CHINA: fleet.served(CHINA)}
    fleet.set_default_rate(RATE)
    k8s = Fleet(procs, cf, demoweb, tmp_path)
    assert k8s.replicas["crawlfleet-master"] == 2
    k8s.start_all()
    universal = "crawlfleet-worker-universal"
    k8s.start(universal)  # the autoscaler added one: the drain below leaves the type a worker
    k8s.wait_ready()
    fleet.workers.update(k8s.jobs())  # for the fleet's diagnosis, should the crawl not finish
    manager = f"http://127.0.0.1:{k8s.manager_port}"
    assert get(f"{manager}/daemonstatus.json")[0] == 401  # the manager's auth came from the Secret
    assert get(f"{manager}/daemonstatus.json", k8s.secrets["CRAWLFLEET_MANAGER_AUTH"])[0] == 200

    masters = [f"127.0.0.1:{k8s.probe_port('crawlfleet-master', p)}" for p in k8s.started["crawlfleet-master"]]
    prometheus = Prometheus(procs, tmp_path, masters)
    (scaled,) = [s for s in of_kind(k8s.resources, "ScaledObject") if s["spec"]["scaleTargetRef"]["name"] == universal]
    query = scaled["spec"]["triggers"][0]["metadata"]["query"]
    counts = ReadyCounts(cf.redis(), "universal")
    fleet.submit(
        {"userid": "ops", "crawlid": "k8s-world", "spider_type": "list", "url": fleet.url(NEWS, "/world/"),
         "rule": DEMO_LIST_RULE},
        {"userid": "ops", "crawlid": "k8s-china", "spider_type": "universal", "url": fleet.url(CHINA, "/"),
         "rule": DEMO_UNIVERSAL_RULE},
    )

    # the trigger's query answers with the live ready count (a value Redis held within the scrape's lag), not 0
    answers: list[Any] = []

    def trigger_reads_the_ready_count() -> bool:
        value = prometheus.query(query)
        answers.append(value)
        return value is not None and value > 0 and int(value) in counts.within(PROM_LAG)

    wait_for(trigger_reads_the_ready_count, 90, f"{query} to answer the ready count (answers {answers[-5:]})",
             interval=0.5)
    counts.stop()

    # SIGTERM under load: a universal worker that holds leases drains within its grace period
    grace = k8s.deployments[universal]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    victim = k8s.started[universal][0]
    job = k8s.job_of(victim)
    reader = FrontierReader(fleet.redis)
    wait_for(lambda: reader.queue_depths([job])[job][1] > 0, 60, f"{job} to hold leases", interval=0.05)
    held = reader.queue_depths([job])[job]
    os.kill(victim.pid, signal.SIGTERM)
    began = time.monotonic()
    code = victim.wait(timeout=grace)
    drained = time.monotonic() - began
    print(f"drain: {job} held {held[1]} leases and {held[0]} queued tasks; exited {code} {drained:.1f}s after SIGTERM "
          f"(grace {grace}s)")
    assert code == 0, procs.log(victim)[-3000:]

    events = fleet.wait_finished(["k8s-world", "k8s-china"], 240)
    world = {fleet.url(NEWS, news.article_path(i)) for i in news.section_ids("world")}
    assert sorted(item["url"] for item in fleet.items("k8s-world")) == sorted(world)
    assert events["k8s-world"]["items"] == len(world)
    items = fleet.items("k8s-china")  # the drained worker's crawl: nothing lost
    assert len(items) == china.articles == len({item["url"] for item in items})
    assert events["k8s-china"]["items"] == china.articles
    for site in (NEWS, CHINA):  # nothing doubled: no page fetched twice
        after = fleet.served(site)
        twice = {path: n - before[site].get(path, 0) for path, n in after.items() if n - before[site].get(path, 0) > 1}
        assert not twice, f"{site}: fetched more than once: {twice}"
