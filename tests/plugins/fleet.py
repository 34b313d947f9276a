"""A whole fleet for end-to-end tests: monitors, masters and Scrapy workers as processes, on the test's services.

``fleet`` (per test) starts nothing by itself; a test calls ``fleet.start(...)`` with what it needs, submits crawl
requests through Kafka (``fleet.submit``), waits for their ``crawl_finished`` events (``fleet.wait_finished``) and
reads what the demo web served (``fleet.served``, per path, for "fetched twice?" checks). Every process is stopped
by PID at teardown (the ``procs`` fixture).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from deploy.demoweb import fetch
from deploy.demoweb.router import STATS_PATH
from deploy.procs import wait_for
from frontier.client import FrontierReader
from messaging import clients, keys
from messaging.answers import partitions_of
from messaging.siteconfig import Rate, SitePaths, write_defaults
from tests.plugins.services import Isolated, Processes

FAST = Rate(6000, 60)  # the tests' default site rate: politeness must not be what they wait for
START_TIMEOUT = 60


class Fleet:
    def __init__(self, cf: Isolated, procs: Processes, demoweb: dict[str, Any]) -> None:
        self.cf = cf
        self.procs = procs
        self.demoweb = demoweb
        self.env = cf.with_env(CRAWLFLEET_HOSTS_FILE=demoweb["hosts_file"], CRAWLFLEET_HEARTBEAT_INTERVAL="1",
                               CRAWLFLEET_HEARTBEAT_TTL="6", CRAWLFLEET_FINISH_INTERVAL="0.5",
                               CRAWLFLEET_DISPATCH_INTERVAL="0.2")
        self.redis = cf.redis()
        self.workers: dict[str, Any] = {}
        self._producer: Any = None
        self._mongo: Any = None

    @property
    def mongo(self) -> Any:
        """The crawl database, through one client (closed with the services' clients): a wait that polls it opens
        no new connection per look (the MongoDB-wire server caps them at 1,000)."""
        if self._mongo is None:
            self._mongo = self.cf.mongo()
        return self._mongo

    def use_demoweb(self, status: dict[str, Any]) -> None:
        """Crawl another demo web (e.g. a bigger one the test started) instead of the session's."""
        self.demoweb = status
        self.env["CRAWLFLEET_HOSTS_FILE"] = status["hosts_file"]

    def url(self, site: str, path: str = "/") -> str:
        return f"http://{site}:{self.demoweb['port']}{path}"

    def set_default_rate(self, rate: Rate = FAST) -> None:
        write_defaults(self.cf.zk(), SitePaths(self.cf.settings.zk_root), rate)

    def start(self, list_workers: int = 0, universal_workers: int = 0, masters: int = 1,
              redis_monitor: bool = False, rate: Rate = FAST) -> None:
        self.set_default_rate(rate)
        monitor = self.procs.crawlfleet("kafka-monitor", env=self.env)
        if redis_monitor:
            self.procs.crawlfleet("redis-monitor", env=self.env)
        for n in range(masters):
            self.procs.crawlfleet("master", "--id", f"m{n}", env=self.env, name=f"master{n}")
        for spider, count in (("list", list_workers), ("universal", universal_workers)):
            self.start_workers(spider, [f"{self.cf.name}-{spider}-{n}" for n in range(count)])
        self.procs.wait_log(monitor, "partitions assigned", timeout=START_TIMEOUT)

    def start_worker(self, spider: str, job: str, **env: str) -> Any:
        return self.start_workers(spider, [job], **env)[0]

    def start_workers(self, spider: str, jobs: list[str], *args: str, **env: str) -> list[Any]:
        """Workers of one spider, started together (their start-ups overlap), each waited for until ready; ``args``
        go to ``crawlfleet worker`` (e.g. ``-s DOWNLOAD_TIMEOUT=1``)."""
        started = [self.procs.crawlfleet("worker", "--spider", spider, "--job", job, *args, env={**self.env, **env},
                                         name=f"worker-{job}") for job in jobs]
        for job, proc in zip(jobs, started, strict=True):
            self.workers[job] = proc
            self.procs.wait_log(proc, f"worker {job} ready", timeout=START_TIMEOUT)
        return started

    def submit(self, *requests: dict[str, Any]) -> None:
        if self._producer is None:
            self._producer = clients.kafka_producer(self.cf.settings)
        for request in requests:
            self._producer.send(self.cf.settings.topic_incoming, request, key=request.get("crawlid"))
        self._producer.flush(timeout=30)

    def wait_finished(self, crawlids: list[str], timeout: float, retries: int = 0) -> dict[str, dict[str, Any]]:
        """The ``crawl_finished`` events of the crawls, waiting at most ``timeout`` seconds for all of them (with
        ``retries``: the end of that run of ``crawlfleet retry``, a crawl's later event)."""
        found: dict[str, dict[str, Any]] = {}
        consumer = clients.kafka_consumer(self.cf.settings, group_id=None)
        try:
            consumer.assign(partitions_of(consumer, self.cf.settings.topic_outbound))
            consumer.seek_to_beginning()
            deadline = time.monotonic() + timeout
            while set(crawlids) - set(found):
                if time.monotonic() >= deadline:
                    states = {c: self.redis.hgetall(keys.crawl(c)) for c in set(crawlids) - set(found)}
                    raise AssertionError(f"crawls did not finish in {timeout:.0f}s: {states}\n{self.diagnosis()}")
                for records in consumer.poll(timeout_ms=200, max_records=5000).values():
                    events = (json.loads(record.value) for record in records)
                    found.update({e["crawlid"]: e for e in events if e.get("event") == "crawl_finished"
                                  and e.get("retries", 0) == retries})
        finally:
            consumer.close()
        return found

    def diagnosis(self) -> str:
        """What the fleet looks like now: seeds, every job's queues and leases, and the logs' last lines."""
        lines = [f"seeds: {self.redis.zcard(keys.SEEDS)}, workers: {self.redis.zrange(keys.WORKERS, 0, -1)}, "
                 f"retired: {self.redis.zrange(keys.RETIRED_WORKERS, 0, -1)}"]
        depths = FrontierReader(self.redis).queue_depths(list(self.workers))
        for job in self.workers:
            activity = self.redis.hgetall(keys.worker_activity(job))
            lines.append(f"{job}: {depths[job][0]} queued, {depths[job][1]} leased, activity {activity}")
        for name, proc, _ in self.procs.started:
            if name.startswith(("master", "worker")):
                tail = "\n    ".join(self.procs.log(proc).splitlines()[-12:])
                lines.append(f"--- {name} (pid {proc.pid}, exit {proc.poll()}):\n    {tail}")
        return "\n".join(lines)

    def served(self, site: str) -> dict[str, int]:
        """Requests the demo web answered for each path of a site so far."""
        _, _, body = fetch(self.demoweb["sites"][site], self.demoweb["port"], site, STATS_PATH)
        return dict(json.loads(body).get(site, {}).get("paths", {}))

    def items(self, crawlid: str) -> list[dict[str, Any]]:
        return list(self.mongo[crawlid].find({}, {"_id": 0}))

    def wait_workers_registered(self, count: int, timeout: float = 30) -> None:
        wait_for(lambda: self.redis.zcard(keys.WORKERS) >= count, timeout, f"{count} registered workers")

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close(timeout=5)


def leader_of(procs: Any, masters: dict[str, Any]) -> str | None:
    """The master that logged the highest epoch."""
    best: tuple[int, str] | None = None
    for name, proc in masters.items():
        for line in procs.log(proc).splitlines():
            if "leading the dispatch with epoch " in line:
                epoch = int(line.split("leading the dispatch with epoch ")[1].split()[0])
                if best is None or epoch > best[0]:
                    best = (epoch, name)
    return best[1] if best else None


def _fleet(isolated: Isolated, procs: Processes, demoweb: dict[str, Any]) -> Iterator[Fleet]:
    fleet = Fleet(isolated, procs, demoweb)
    try:
        yield fleet
    finally:
        fleet.close()


@pytest.fixture
def fleet(cf: Isolated, procs: Processes, demoweb: dict[str, Any]) -> Iterator[Fleet]:
    yield from _fleet(cf, procs, demoweb)


@pytest.fixture
def fleet_cluster(cf_cluster: Isolated, procs: Processes, demoweb: dict[str, Any]) -> Iterator[Fleet]:
    """The same fleet on the local 3-master Redis Cluster."""
    yield from _fleet(cf_cluster, procs, demoweb)


@pytest.fixture(scope="module")
def fleet_module(cf_module: Isolated, procs_module: Processes, demoweb: dict[str, Any]) -> Iterator[Fleet]:
    """One fleet for a whole module's tests (each leaves it as it found it)."""
    yield from _fleet(cf_module, procs_module, demoweb)
