"""The sides of ``bench.crawl`` and the bench they run on: services, the static site, the CPU sampler.

:class:`CrawlBench` starts Redis, ZooKeeper, Kafka and MongoDB (``deploy.services``) and nginx with the rendered
site (:mod:`bench.crawl_site`) under its run directory, raises the fleet's default site rate in ZooKeeper so that
politeness never throttles (``messaging.siteconfig.write_defaults``), and runs one side at a time
(:meth:`CrawlBench.run_side`), each over the same three sites (one crawl per site, ``DEMO_UNIVERSAL_RULE``):

- ``scrapy``: ``scrapy crawl bench_plain`` (:mod:`bench.crawl_spiders`), Scrapy's memory scheduler and dupefilter;
- ``scrapy_pool``: the same with the fleet's page-work pool (``CRAWLFLEET_PAGE_PROCESSES``) as one worker gets it;
- ``fleet_1`` / ``fleet_2``: a Kafka monitor, a Redis monitor, a master and 1 or 2 ``crawlfleet worker`` processes;
  the crawls are submitted to Kafka and the side ends when the master marks every crawl finished;
- ``scrapy_redis``: ``scrapy crawl bench_redis`` (:mod:`bench.crawl_redis_spider`), start URLs pushed to Redis;
- ``project_scrapy`` / ``project_fleet_2``: a plain Scrapy project's spider (:mod:`bench.ownproject`) under plain
  ``scrapy crawl`` and on the fleet with 2 workers (:mod:`bench.crawl_project`), one crawl over the three sites.

A side's time runs from its first request to its last item stored: for Scrapy and scrapy-redis the first HTTP
request in nginx's log; for the fleet the moment the crawl requests are sent to Kafka (the whole path is the
fleet's: intake and dispatch included). The last item is the newest ``stored_at`` of the side's MongoDB documents.
Then the side is checked — every page fetched exactly once with a 200 (nginx's log), every article stored once
(MongoDB) — and its Redis database and MongoDB collections are emptied for the next one.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Any

from bench.crawl_cpu import CpuSampler, cpu_between
from bench.crawl_project import PROJECT_SIDES, project_crawls, run_project
from bench.crawl_site import StaticSite, check_fetches, read_access_log
from deploy import services
from deploy.demo_rules import DEMO_UNIVERSAL_RULE
from deploy.procs import spawn, stop_pid, wait_for
from messaging import clients, keys
from messaging.kafka_monitor.monitor import topic_partitions
from messaging.settings import load
from messaging.siteconfig import Rate, SitePaths, write_defaults
from messaging.tasks import CrawlFields, CrawlState

REPO = Path(__file__).resolve().parents[1]
SIDES = ("scrapy", "fleet_1", "fleet_2", "scrapy_redis", "scrapy_pool", *PROJECT_SIDES)
# The fleet's default site rate during the bench: 1,000 pages a second per site, per spider type and per host IP.
BENCH_RATE = Rate(60_000, 60)
MONGO_DB = "crawlbench"
START_TIMEOUT = 90.0
SERVICE_GROUPS = {"redis": "redis", "mongodb": "mongo", "kafka": "kafka", "zookeeper": "zookeeper"}


# Settings taken from the benchmark's own environment into every side's processes (issue 26: page work off the
# reactor, on or off, for all sides alike).
PASSED_SETTINGS = ("CRAWLFLEET_PAGE_PROCESSES", "CRAWLFLEET_HOST_WORKERS", "CRAWLFLEET_MALLOC_TRIM_INTERVAL",
                   "CRAWLFLEET_PAGE_PROCESS_RECYCLE")


def page_work_settings(side: str, environ: Mapping[str, str]) -> dict[str, str]:
    """Where a side's page work (extraction, Markdown, metadata) runs, unless the bench's environment says so.

    Every side runs the same pipelines; what differs is only the thread they run on. Plain Scrapy and scrapy-redis
    run item pipelines in the reactor thread, as a Scrapy project does (``CRAWLFLEET_PAGE_PROCESSES=0``);
    ``scrapy_pool`` gives plain Scrapy the fleet's pool as one worker alone on this host gets it; a fleet side of
    N workers tells each worker it shares the host with N-1 others (``CRAWLFLEET_HOST_WORKERS=N``) and asks for
    ``CRAWLFLEET_PAGE_PROCESSES=-1`` (a pool when the host has a core to spare per worker). A value in ``environ``
    wins for every side.
    """
    chosen: dict[str, str] = {}
    if side.startswith("fleet_"):
        chosen.update(CRAWLFLEET_PAGE_PROCESSES="-1", CRAWLFLEET_HOST_WORKERS=side.split("_")[1])
    elif side == "scrapy_pool":
        chosen.update(CRAWLFLEET_PAGE_PROCESSES="-1", CRAWLFLEET_HOST_WORKERS="1")
    else:
        chosen["CRAWLFLEET_PAGE_PROCESSES"] = "0"
    chosen.update({name: environ[name] for name in PASSED_SETTINGS if name in environ})
    return chosen


@dataclass
class SideResult:
    side: str
    round: int
    pages: int  # content pages fetched (robots.txt aside)
    items: int
    robots: int
    started: float  # epoch seconds
    ended: float
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds by process group within [started, ended]
    problems: tuple[str, ...] = ()

    @property
    def seconds(self) -> float:
        return max(self.ended - self.started, 1e-9)

    @property
    def pages_per_min(self) -> float:
        return self.pages / self.seconds * 60.0


class CrawlBench:
    """Services, nginx and the CPU sampler, for the duration of a ``with`` block."""

    rule: dict[str, Any] = DEMO_UNIVERSAL_RULE  # every side's crawl rule (bench.broad crawls with its own)

    def __init__(self, run_dir: Path, articles: int, timeout: float, echo: Any = print,
                 profile: bool = False) -> None:
        self.run_dir = run_dir
        self.services_dir = run_dir / "services"
        self.logs = run_dir / "logs"
        self.site = StaticSite(run_dir / "site", articles)
        self.timeout = timeout
        self.echo = echo
        self.state: dict[str, Any] = {}
        self.env: dict[str, str] = {}
        self.side_groups: dict[str, list[int]] = {}
        # --profile: a side's worker processes (or Scrapy's one) by thread and page-work children as well
        self.sampler = CpuSampler(self.groups, split=("workers",) if profile else ())
        self._procs: list[Any] = []
        self._redis: Any = None
        self._mongo: Any = None

    # --- set-up ----------------------------------------------------------------------------------------------
    def __enter__(self) -> CrawlBench:
        self.logs.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "site").mkdir(parents=True, exist_ok=True)
        try:
            started = time.monotonic()
            pages = self.site.start()
            self.echo(f"site: {pages} files for nginx (pid {self.site.pid}) on port {self.site.port}, "
                      f"{len(self.site.sites)} sites ({time.monotonic() - started:.1f}s)")
            self.state = services.up(self.services_dir, services.Options(timeout=START_TIMEOUT))
            self.env = self._child_env()
            settings = load(self.env)
            self._redis = clients.redis_client(settings)
            self._mongo = clients.mongo_client(settings)[MONGO_DB]
            clients.ensure_topics(settings, topic_partitions(settings))
            zk = clients.zk_client(settings)
            try:
                write_defaults(zk, SitePaths(settings.zk_root), BENCH_RATE)
            finally:
                zk.stop()
                zk.close()
            self._redis.flushdb()
            self.sampler.start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.sampler.stop()
        self._stop_side()
        self.site.stop()
        services.down(self.services_dir)

    def _child_env(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if not key.startswith("CRAWLFLEET_")}
        for name in PASSED_SETTINGS:  # what a run compares (page work in a pool or not) reaches every side
            if name in os.environ:
                env[name] = os.environ[name]
        env.update(
            PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
            SCRAPY_SETTINGS_MODULE="spiders.settings",
            CRAWLFLEET_RUN_DIR=str(self.services_dir),
            CRAWLFLEET_REDIS_URL=self.state["redis_url"],
            CRAWLFLEET_KAFKA_BOOTSTRAP=self.state["kafka_bootstrap"],
            CRAWLFLEET_ZK_HOSTS=self.state["zk_hosts"],
            CRAWLFLEET_MONGO_URI=self.state["mongo_uri"],
            CRAWLFLEET_MONGO_DB=MONGO_DB,
            CRAWLFLEET_HOSTS_FILE=str(self.site.hosts_file),
            CRAWLFLEET_LOG_LEVEL="INFO",
            # Tansu holds a group join for about half the session timeout: joins happen before the clock starts,
            # short timeouts only shorten the wait for them.
            CRAWLFLEET_KAFKA_SESSION_TIMEOUT_MS="6000",
            CRAWLFLEET_KAFKA_HEARTBEAT_MS="500",
        )
        return env

    def groups(self) -> Mapping[str, list[int]]:
        """Process groups to sample: the services, nginx, and the current side's processes."""
        records = self.state.get("services", {})
        groups = {group: list(records.get(name, {}).get("pids", [])) for group, name in SERVICE_GROUPS.items()}
        if self.site.proc is not None:
            groups["nginx"] = [self.site.pid]
        return {**groups, **self.side_groups}

    # --- a side ----------------------------------------------------------------------------------------------
    def crawls(self, side: str, round_no: int) -> dict[str, str]:
        """The side's crawl ids and start URLs: one crawl per site (an own project's side: one over them all)."""
        if side in PROJECT_SIDES:
            return project_crawls(side, round_no, [self.site.url(site) for site in self.site.sites])
        return {f"r{round_no}-{side}-{site.name.split('.')[0]}": self.site.url(site) for site in self.site.sites}

    def run_side(self, side: str, round_no: int) -> SideResult:
        crawls = self.crawls(side, round_no)
        offset = self.site.log_offset()
        self.sampler.take()  # forget what came before this side
        self.echo(f"--- round {round_no}: {side}")
        try:
            if side in ("scrapy", "scrapy_pool"):
                submitted = self._run_scrapy("bench_plain", "bench.crawl_spiders", crawls, side)
            elif side == "scrapy_redis":
                submitted = self._run_scrapy("bench_redis", "bench.crawl_redis_spider", crawls, side)
            elif side.startswith("fleet_"):
                submitted = self._run_fleet(int(side.split("_")[1]), crawls, side)
            elif side in PROJECT_SIDES:
                submitted = run_project(self, side, crawls)  # timed from its first request, as plain Scrapy
            else:
                raise ValueError(f"unknown side {side!r} (known: {', '.join(SIDES)})")
        finally:
            self._stop_side()
        samples = self.sampler.take()
        result = self._measure(side, round_no, crawls, offset, submitted)
        result.cpu = cpu_between(samples, result.started, result.ended)
        self._clean(crawls)
        return result

    def _run_scrapy(self, spider: str, module: str, crawls: dict[str, str], side: str) -> float | None:
        argv = [sys.executable, "-m", "scrapy", "crawl", spider, "-s", f"SPIDER_MODULES={module}",
                "-s", "TELNETCONSOLE_ENABLED=False", "-a", f"crawls={json.dumps(crawls)}",
                "-a", f"rule={json.dumps(self.rule)}"]
        if spider == "bench_redis":
            argv += ["-s", f"REDIS_URL={self.state['redis_url']}"]
            key = f"{spider}:start_urls"
            self._redis.rpush(key, *(json.dumps({"url": url, "crawlid": crawlid}) for crawlid, url in crawls.items()))
        log = self.logs / f"{side}.log"
        log.unlink(missing_ok=True)
        proc = spawn(argv, log, env={**self.env, **page_work_settings(side, os.environ)}, cwd=REPO)
        self._procs = [proc]
        self.side_groups["workers"] = [proc.pid]
        wait_for(lambda: proc.poll() is not None, self.timeout, f"{spider} to finish the crawl", interval=0.2)
        if proc.returncode != 0:
            raise RuntimeError(f"{spider} exited with {proc.returncode}; see {log}")
        return None  # the clock starts at its first HTTP request

    def _run_fleet(self, workers: int, crawls: dict[str, str], side: str) -> float:
        env = {**self.env, **page_work_settings(side, os.environ)}
        procs: dict[str, Any] = {}
        self._procs = []

        def start(name: str, *args: str) -> Any:
            log = self.logs / f"{side}-{name}.log"
            log.unlink(missing_ok=True)
            proc = spawn([sys.executable, "-m", "deploy.cli", *args], log, env=env, cwd=REPO)
            procs[name] = (proc, log)
            self._procs.append(proc)
            return proc

        start("kafka-monitor", "kafka-monitor")
        start("redis-monitor", "redis-monitor")
        start("master", "master", "--id", f"{side}-master")
        jobs = [f"{side}-{os.getpid()}-{int(time.time())}-w{n}" for n in range(workers)]
        for job in jobs:
            start(job, "worker", "--spider", "universal", "--job", job)
        self.side_groups.update(
            workers=[procs[job][0].pid for job in jobs], master=[procs["master"][0].pid],
            kafka_monitor=[procs["kafka-monitor"][0].pid], redis_monitor=[procs["redis-monitor"][0].pid])
        ready = {"kafka-monitor": "partitions assigned", "master": "leading the dispatch",
                 **{job: f"worker {job} ready" for job in jobs}}
        for name, text in ready.items():
            proc, log = procs[name]
            wait_for(lambda log=log, text=text: text in log.read_text(errors="replace"), START_TIMEOUT,
                     f"{text!r} in {log}", interval=0.1,
                     alive=lambda proc=proc, log=log: f"exited: {log}" if proc.poll() is not None else None)
        settings = load(env)
        producer = clients.kafka_producer(settings)
        submitted = time.time()
        try:
            for crawlid, url in crawls.items():
                producer.send(settings.topic_incoming, {"userid": "bench", "crawlid": crawlid,
                                                        "spider_type": "universal", "url": url,
                                                        "rule": self.rule}, key=crawlid)
            producer.flush(timeout=30)
        finally:
            producer.close(timeout=5)

        def finished() -> bool:
            states = [self._redis.hget(keys.crawl(crawlid), CrawlFields.STATE) for crawlid in crawls]
            return all(state == CrawlState.FINISHED.encode() for state in states)

        def dead() -> str | None:
            gone = [name for name, (proc, _) in procs.items() if proc.poll() is not None]
            return f"{', '.join(gone)} exited (logs in {self.logs})" if gone else None

        wait_for(finished, self.timeout, f"the {side} crawls to finish", interval=0.2, alive=dead)
        return submitted

    def _stop_side(self) -> None:
        for proc in reversed(self._procs):
            stop_pid(proc.pid, timeout=30)
            proc.wait(timeout=10)
        self._procs = []
        self.side_groups = {}

    # --- measure and check -----------------------------------------------------------------------------------
    def _measure(self, side: str, round_no: int, crawls: dict[str, str], offset: int,
                 submitted: float | None) -> SideResult:
        fetches = read_access_log(self.site.access_log, offset)
        check = check_fetches(fetches, self.site.expected())
        problems = list(check.problems)
        items = 0
        last_stored = 0.0
        articles = self.site.articles * (len(self.site.sites) if side in PROJECT_SIDES else 1)  # per crawl
        for crawlid in crawls:
            collection = self._mongo[crawlid]
            count = collection.count_documents({})
            items += count
            if count != articles:
                problems.append(f"{crawlid}: {count} items stored, {articles} articles")
            newest = list(collection.find({}, {"stored_at": 1}).sort("stored_at", -1).limit(1))
            if newest:
                last_stored = max(last_stored, newest[0]["stored_at"].replace(tzinfo=UTC).timestamp())
        first_fetch = min((fetch.at for fetch in fetches), default=0.0)
        started = submitted if submitted is not None else first_fetch
        return SideResult(side, round_no, check.pages, items, check.robots, started, max(last_stored, started),
                          problems=tuple(problems))

    def _clean(self, crawls: dict[str, str]) -> None:
        for crawlid in crawls:
            self._mongo.drop_collection(crawlid)
        self._redis.flushdb()
