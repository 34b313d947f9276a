"""MongoDB stopped for 30 s in the middle of a crawl, then restarted: every item stored exactly once, memory bounded.

A universal crawl of a whole demo site (a demo web of this test's own, big enough that the crawl is far from done
when MongoDB goes away) runs on two Scrapy workers that store into a SecantusDB of this test's own, on a disk path
(:class:`tests.plugins.mongo.OwnMongo`), so that it comes back on the same port with the same data. Once some items
are stored, MongoDB is stopped for :data:`OUTAGE_SECONDS`. Meanwhile:

- each worker's MongoDB buffer fills (CRAWLFLEET_MONGO_BUFFER is small, so back-pressure really engages): its log
  says "storage backlog full" and it takes no new task, so the leases it holds never grow again and stay within
  what it can hold (prefetched tasks, downloads under way, tasks whose items fill the buffer);
- it keeps heartbeating (the feed thread does not wait on MongoDB), so the master does not declare it dead although
  the outage lasts longer than CRAWLFLEET_HEARTBEAT_TTL, and it renews the leases of tasks whose items wait,
  although the outage lasts longer than CRAWLFLEET_LEASE_SECONDS;
- its resident memory (``VmRSS``, sampled all along) stays under :data:`RSS_BOUND_MB`;
- within :data:`SAID_WITHIN` seconds of the stop the crawl's page on a manager (whose MongoDB is the same, down),
  ``crawlfleet fleet status --json`` and the cluster's Prometheus metrics say "storage refusing writes since T: …"
  with the items waiting (issue 40).

MongoDB is then started again; the crawl finishes, and every article of the site is stored exactly once, each page
fetched once, and it is no longer said to be stalled.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from deploy.demoweb.sites import build_sites
from deploy.procs import wait_for
from frontier.registry import WorkerRegistry
from messaging import keys
from messaging.domains import domain_of
from spiders.settings import CONCURRENT_REQUESTS
from tests.e2e.test_manager_api import ManagerProcess
from tests.plugins.demoweb import own_demoweb
from tests.plugins.fleet import Fleet
from tests.plugins.mongo import OwnMongo
from tests.unit.test_rules import DEMO_UNIVERSAL_RULE

pytestmark = pytest.mark.e2e

NEWS = "news.fleet.test"
PAGES = 600  # articles per demo site: the news site's 600 articles on 60 list pages take 661 fetches
WORKERS = 2
OUTAGE_SECONDS = 30.0  # the figure
STORED_BEFORE_OUTAGE = 60  # items in MongoDB before it is stopped: the crawl is under way
DONE_BEFORE_OUTAGE = 10  # tasks each worker completed before it is stopped: every worker is under way
PREFETCH, BUFFER, BATCH = 16, 50, 20  # per worker; the buffer is small so that back-pressure engages
# Leases a paused worker may hold: its buffer's worth of tasks, plus the tasks already past the scheduler when the
# backlog filled, whose items land in the buffer after it (so it overshoots its capacity): the prefetch and the
# downloads under way, and responses Scrapy had downloaded but not yet passed through the pipelines (Scrapy bounds
# those only by SCRAPER_SLOT_MAX_ACTIVE_SIZE, 5 MB of bodies). Measured: 53 to 93 per worker; allowed: 114.
LEASE_BOUND = BUFFER + 2 * (PREFETCH + CONCURRENT_REQUESTS)
HEARTBEAT_TTL, LEASE_SECONDS = 10.0, 20.0  # both shorter than the outage: heartbeats and renewals must go on
RSS_BOUND_MB = 300  # measured: a worker peaks at about 150 MB (the report this test prints, with -s)
CRAWL_TIMEOUT = 90  # after MongoDB is back (its back-off is at most 10 s)
SAID_WITHIN = 30.0  # the bound: the page and fleet status say the store refuses writes within 30 s
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def big_demoweb(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A demo web of this test's own (the session's has too few pages for a crawl to outlast an outage)."""
    with own_demoweb(tmp_path / "demoweb", PAGES, slow_seconds=1.0) as status:
        yield status


class RssSampler:
    """Samples the resident memory of processes (``/proc/<pid>/status`` ``VmRSS``) in a thread; keeps each peak."""

    def __init__(self, pids: dict[str, int], interval: float = 0.25) -> None:
        self.pids = pids
        self.interval = interval
        self.peak_kb = dict.fromkeys(pids, 0)
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def now_kb(self) -> dict[str, int]:
        return {name: _vm_rss_kb(pid) for name, pid in self.pids.items()}

    def _run(self) -> None:
        while not self._stop.is_set():
            for name, kb in self.now_kb().items():
                self.peak_kb[name] = max(self.peak_kb[name], kb)
            self.samples += 1
            self._stop.wait(self.interval)


def _vm_rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:  # the process is gone
        pass
    return 0


def _backlog_full(log: str) -> bool:
    """Whether the worker's last storage backlog line says full (it cannot drain while MongoDB is down)."""
    lines = [line for line in log.splitlines() if "storage backlog " in line]
    return bool(lines) and "storage backlog full" in lines[-1]


def _mb(kb_by_job: dict[str, int]) -> list[int]:
    """Memory figures of the report, in MB, in the workers' order."""
    return [kb // 1024 for kb in kb_by_job.values()]


def _redis_now(redis: Any) -> float:
    seconds, microseconds = redis.time()
    return seconds + microseconds / 1e6


def test_a_mongodb_outage_mid_crawl_loses_and_duplicates_nothing(cf, procs, tmp_path, big_demoweb):
    started = time.monotonic()
    site = next(s for s in build_sites(PAGES) if getattr(s, "name", None) == NEWS)
    expected = {f"http://{NEWS}:{big_demoweb['port']}{site.article_path(i)}" for i in range(site.articles)}
    mongo = OwnMongo(procs, cf, tmp_path)
    mongo.start()
    fleet = Fleet(cf, procs, big_demoweb)
    # Every worker must be able to hold a full buffer's worth of tasks: the dispatcher keeps a worker's queued and
    # leased tasks under headroom x its measured rate x backlog minutes, and a worker measured at 20 pages a minute in
    # the crawl's first minute (a loaded machine) could hold only 48, and its buffer of 50 never filled (once, in a
    # full-suite run: one worker stayed at 45 items waiting).
    fleet.env.update(CRAWLFLEET_HEARTBEAT_TTL=str(HEARTBEAT_TTL), CRAWLFLEET_LEASE_SECONDS=str(LEASE_SECONDS),
                     CRAWLFLEET_DISPATCH_BACKLOG_MINUTES="10")
    try:
        fleet.start()
        jobs = [f"{cf.name}-universal-{n}" for n in range(WORKERS)]
        fleet.start_workers("universal", jobs, CRAWLFLEET_MONGO_URI=mongo.uri, CRAWLFLEET_MONGO_BUFFER=str(BUFFER),
                            CRAWLFLEET_MONGO_BATCH=str(BATCH), CRAWLFLEET_PREFETCH=str(PREFETCH))
        workers = {job: fleet.workers[job] for job in jobs}
        manager = ManagerProcess(procs, {**fleet.env, "CRAWLFLEET_MONGO_URI": mongo.uri}, tmp_path / "manager")
        manager.start()
        with RssSampler({job: proc.pid for job, proc in workers.items()}) as rss:
            report = _crawl_through_an_outage(fleet, mongo, workers, jobs, procs, rss, manager)
            report["rss_end_mb"] = _mb(rss.now_kb())
        report["rss_peak_mb"] = _mb(rss.peak_kb)
        report["rss_samples"] = rss.samples
        report["seconds"] = round(time.monotonic() - started, 1)
        print(f"\nMongoDB outage test: {report}")

        assert rss.samples > 60 and all(kb > 0 for kb in rss.peak_kb.values())
        assert max(rss.peak_kb.values()) < RSS_BOUND_MB * 1024, report

        client = mongo.client()
        try:
            items = list(client[cf.settings.mongo_db]["news-outage"].find({}, {"_id": 0, "url": 1, "title": 1}))
        finally:
            client.close()
        urls = [item["url"] for item in items]
        assert len(urls) == len(set(urls)) == site.articles, f"{len(urls)} items, {len(set(urls))} URLs"
        assert set(urls) == expected
        for item in items:
            article_id = int(re.search(r"-([0-9]+)\.html$", item["url"]).group(1))
            assert item["title"] == site.headline(article_id).title
        assert report["event"]["items"] == site.articles

        twice = {path: n for path, n in fleet.served(NEWS).items() if n > 1}
        assert not twice, f"fetched more than once: {twice}"
        for job, proc in workers.items():
            log = procs.log(proc)
            assert "MongoDB write failed" in log and "MongoDB is back" in log, job
            assert "was lost (expired or purged)" not in log, f"{job} lost a lease"  # every lease was renewed in time
            assert "Traceback" not in log, log[-3000:]
    finally:
        fleet.close()


def _crawl_through_an_outage(fleet: Fleet, mongo: OwnMongo, workers: dict[str, Any], jobs: list[str],
                             procs: Any, rss: RssSampler, manager: ManagerProcess) -> dict[str, Any]:
    redis = fleet.redis
    domain = domain_of(fleet.url(NEWS))
    db = fleet.cf.settings.mongo_db
    check = mongo.client(serverSelectionTimeoutMS=2000)

    def stored() -> int:
        return check[db]["news-outage"].count_documents({})

    def leases() -> dict[str, list[float]]:
        """Each worker's lease deadlines (seconds, Redis clock)."""
        return {job: [score / 1e6 for _, score in redis.zrange(keys.inflight(job, domain), 0, -1, withscores=True)]
                for job in jobs}

    fleet.submit({"userid": "erin", "crawlid": "news-outage", "spider_type": "universal", "url": fleet.url(NEWS),
                  "rule": DEMO_UNIVERSAL_RULE})
    registry = WorkerRegistry(redis)
    try:
        wait_for(lambda: stored() >= STORED_BEFORE_OUTAGE, 60, f"{STORED_BEFORE_OUTAGE} items stored")
        # Both workers under way, not only the first one ready: a worker that had barely started when MongoDB
        # stopped was left too few tasks to fill its buffer (no link reaches seeds while nothing can be stored).
        wait_for(lambda: min(done for done, in registry.activity(jobs, ["done"]).values()) >= DONE_BEFORE_OUTAGE,
                 60, f"every worker to complete {DONE_BEFORE_OUTAGE} tasks")
        before = stored()
    finally:
        check.close()

    mongo.stop()
    stopped = time.monotonic()
    rss_at_stop = rss.now_kb()
    said = _storage_refusing_said(fleet, manager, jobs, stopped)
    for job, proc in workers.items():  # every worker fills its buffer and stops taking tasks
        wait_for(lambda proc=proc: _backlog_full(procs.log(proc)), OUTAGE_SECONDS - 5,
                 f"{job}'s log to say 'storage backlog full'")
    full_after = time.monotonic() - stopped
    beats = {job: redis.zscore(keys.WORKERS, job) for job in jobs}
    series: list[dict[str, int]] = []
    while time.monotonic() - stopped < OUTAGE_SECONDS or len(series) < 5:
        series.append({job: len(deadlines) for job, deadlines in leases().items()})
        time.sleep(0.5)  # sampling during the outage, whose length is the scenario
    rss_at_restart = rss.now_kb()
    held_max = {job: max(sample[job] for sample in series) for job in jobs}
    assert max(held_max.values()) <= LEASE_BOUND, f"more than {LEASE_BOUND} leases held by a worker: {series}"
    # The first sample may precede a take that was under way when the backlog line was logged (the log line comes
    # just before the feed is paused); from then on no new task is taken: the leases held only go down.
    for job in jobs:
        held = [sample[job] for sample in series[1:]]
        assert held == sorted(held, reverse=True), f"{job} took tasks while its storage backlog was full: {held}"

    # The outage outlasted the heartbeat TTL and the lease time: the workers kept heartbeating and renewing.
    redis_now = _redis_now(redis)
    deadlines = leases()
    assert all(deadlines.values()), f"every worker holds tasks whose items wait: {deadlines}"
    assert min(min(d) for d in deadlines.values()) > redis_now, "a lease expired during the outage"
    for job in jobs:
        beat = redis.zscore(keys.WORKERS, job)
        assert beat is not None and beat > beats[job] and redis_now - beat < HEARTBEAT_TTL, (job, beat, redis_now)
        assert redis.zscore(keys.RETIRED_WORKERS, job) is None, f"{job} was declared dead"

    mongo.start()
    outage = time.monotonic() - stopped
    restarted = time.monotonic()
    event = fleet.wait_finished(["news-outage"], CRAWL_TIMEOUT)["news-outage"]
    assert not _fleet_status(fleet.env)["stores"] and "crawl-stalled" not in _crawl_page(manager)
    return {"stored_before": before, **said, "backlog_full_after_s": round(full_after, 1), "outage_s": round(outage, 1),
            "leases_held_max": list(held_max.values()), "lease_bound": LEASE_BOUND,
            "leases_held_max_sum": max(sum(sample.values()) for sample in series),
            "leases_at_restart": list(series[-1].values()),
            "rss_at_stop_mb": _mb(rss_at_stop), "rss_at_restart_mb": _mb(rss_at_restart),
            "finished_after_restart_s": round(time.monotonic() - restarted, 1), "event": event}


def _crawl_page(manager: ManagerProcess) -> str:
    return requests.get(f"{manager.url}/crawls/news-outage", timeout=30).text


def _fleet_status(env: dict[str, str]) -> dict[str, Any]:
    result = subprocess.run([sys.executable, "-m", "deploy.cli", "fleet", "status", "--json"], env=env, cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    return json.loads(result.stdout.strip().splitlines()[-1])


def _storage_refusing_said(fleet: Fleet, manager: ManagerProcess, jobs: list[str], stopped: float) -> dict[str, Any]:
    """Within :data:`SAID_WITHIN` s of the stop: the crawl page, fleet status and the metrics say the store refuses
    writes, since when and how many items wait (a bounded wait; how long it took is reported, not asserted)."""

    def page_says() -> bool:
        html = _crawl_page(manager)
        return 'data-reason="storage"' in html and "storage refusing writes since" in html and "items waiting" in html

    wait_for(page_says, SAID_WITHIN - (time.monotonic() - stopped), "the crawl page to say storage refuses writes")
    page_after = time.monotonic() - stopped
    status = _fleet_status(fleet.env)
    stall = next(s for s in status["stalled"] if s["crawlid"] == "news-outage")
    assert stall["reason"] == "storage" and "storage refusing writes since" in stall["text"], stall
    assert set(status["stores"]) <= set(jobs) and status["stores"], status["stores"]
    assert all(store["waiting"] > 0 and store["kind"] == "unreachable" for store in status["stores"].values())
    metrics = requests.get(f"{manager.url}/metrics", timeout=30).text
    assert "crawlfleet_store_refusing_writes_seconds{" in metrics and "crawlfleet_store_items_waiting{" in metrics
    assert 'crawlfleet_crawl_stalled_seconds{crawlid="news-outage",reason="storage"}' in metrics
    return {"page_said_after_s": round(page_after, 1), "status_said_after_s": round(time.monotonic() - stopped, 1),
            "stall_text": stall["text"]}
