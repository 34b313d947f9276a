"""Faults without a person (issue 29): one crawl of about 1,700 pages through, in turn, a kill -9 of Redis (AOF,
restarted 10 s later), a kill -9 of the leading master, ZooKeeper down 20 s with a rate change sent as it returns,
MongoDB's storage failing (writes answered ``OutOfDiskSpace`` by a proxy until the server is restarted — which the
supervisor does, not the test), a worker SIGSTOPped past its heartbeat, and Kafka stopped for 30 s across the
crawl's end. Every service the test breaks is its own (the session's are shared). Afterwards: every item stored
once; ``crawl_finished`` produced once, with items equal to MongoDB's count and pages equal to the site's distinct
pages; the crawl ended by itself; no log repeats a warning per retry."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deploy.demo_rules import DEMO_UNIVERSAL_RULE
from deploy.procs import free_port, kill_hard, pid_alive, port_free, wait_for
from deploy.services.base import ServiceRecord
from deploy.services.kafka import KafkaService
from deploy.services.mongo import MongoService
from deploy.services.redis import redis_server_bin
from deploy.services.zookeeper import ZooKeeperService
from deploy.supervisor import Supervisor
from messaging import clients, keys
from messaging.settings import load
from messaging.siteconfig import Rate, SiteConfig, SitePaths, write_defaults
from tests.plugins.demoweb import own_demoweb
from tests.plugins.fleet import leader_of
from tests.plugins.mongo import OwnMongo
from tests.plugins.mongo_faults import MongoFaultProxy
from tests.plugins.services import read_all

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

NEWS = "news.fleet.test"
ARTICLES = 1500  # with its list pages, a crawl of about 1,700 pages
CRAWL_RATE = Rate(1200, 60)  # 20 pages a second: the crawl lasts long enough for every fault to hit it
REDIS_DOWN, ZK_DOWN, KAFKA_DOWN = 10.0, 20.0, 30.0  # seconds, the (the probe's Redis came back after 10 s)
STEP = 100  # items stored between two faults: the crawl went on after the last one
REPEAT_BOUND = 6  # the same warning at most twice per outage, and no subject sees more than three outages here
LEVEL = re.compile(r"\b(WARNING|ERROR|CRITICAL)\b")


@pytest.fixture
def big_demoweb(tmp_path: Path) -> Iterator[dict[str, Any]]:
    with own_demoweb(tmp_path / "web", ARTICLES) as status:
        yield status


class MongoHealer:
    """The fleet supervisor's decisions (``deploy.supervisor.Supervisor``) on this test's MongoDB: health through a
    write at the address the workers use (the proxy), a restart in place after the bound."""

    def __init__(self, own: OwnMongo, proxy: MongoFaultProxy) -> None:
        self.own, self.proxy = own, proxy
        self.supervisor = Supervisor(self, bound=3.0, backoff=2.0, backoff_max=10.0)
        self.restarts = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def services(self) -> dict[str, tuple[bool, str]]:
        record = ServiceRecord("mongo", [self.own.proc.pid], [self.proxy.port], "", "")
        return {"mongo": MongoService().ping(record)}

    def restart_service(self, name: str) -> None:
        self.restarts += 1
        self.own.stop()
        self.own.start()

    def processes(self) -> list[dict[str, Any]]:
        return []

    def retired(self, jobs: list[str]) -> set[str]:
        return set()

    def replace(self, name: str, kill: bool) -> str:
        raise AssertionError("no processes here")

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.supervisor.check()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def outbound(settings: Any, seconds: float) -> list[dict[str, Any]]:
    """Every record of the outbound topic, read for ``seconds``."""
    return read_all(settings, settings.topic_outbound, seconds)


def repeated_warnings(log: str) -> Counter[str]:
    """WARNING/ERROR lines by what they say (time stamps and numbers left out)."""
    found: Counter[str] = Counter()
    for line in log.splitlines():
        if LEVEL.search(line):
            found[re.sub(r"[0-9]+", "#", line[24:])[:90]] += 1
    return found


def test_a_crawl_through_every_fault_ends_by_itself_with_exact_counts(fleet: Any, big_demoweb: dict[str, Any],
                                                                       procs: Any, tmp_path: Path) -> None:
    # --- the services this test breaks, its own -------------------------------------------------------------------
    redis_port, redis_dir = free_port(), tmp_path / "redis"
    redis_dir.mkdir()
    redis_argv = [redis_server_bin(), "--port", str(redis_port), "--bind", "127.0.0.1", "--dir", str(redis_dir),
                  "--save", "", "--appendonly", "yes", "--daemonize", "no", "--logfile", ""]
    redis_proc = procs.start(redis_argv, fleet.env, name="redis", service=True)
    zk_service, kafka_service = ZooKeeperService(port=free_port()), KafkaService(port=free_port())
    zk_record, kafka_record = zk_service.start(tmp_path / "zk"), kafka_service.start(tmp_path)
    own_mongo = OwnMongo(procs, fleet.cf, tmp_path)
    own_mongo.start()
    proxy = MongoFaultProxy(own_mongo.port, server_pid=lambda: own_mongo.proc.pid).start()
    healer = MongoHealer(own_mongo, proxy)
    zk = None
    try:
        zk_service.wait_ready(zk_record, 60)
        kafka_service.wait_ready(kafka_record, 60)
        fleet.env.update(CRAWLFLEET_REDIS_URL=f"redis://127.0.0.1:{redis_port}/0",
                         CRAWLFLEET_ZK_HOSTS=f"127.0.0.1:{zk_record.port}",
                         CRAWLFLEET_KAFKA_BOOTSTRAP=f"127.0.0.1:{kafka_record.port}",
                         CRAWLFLEET_MONGO_URI=f"mongodb://127.0.0.1:{proxy.port}/?directConnection=true")
        settings = load(fleet.env)
        fleet.redis = redis = clients.redis_client(settings)
        wait_for(redis.ping, 20, "the test's Redis")
        zk = clients.zk_client(settings)
        write_defaults(zk, SitePaths(settings.zk_root), CRAWL_RATE)
        fleet.use_demoweb(big_demoweb)
        fleet.start(masters=2, redis_monitor=True, rate=CRAWL_RATE)
        workers = fleet.start_workers("universal", [f"faults-{n}" for n in range(3)])
        masters = {name: proc for name, proc, _ in procs.started if name.startswith("master")}
        producer = clients.kafka_producer(settings)
        crawlid = "faults"
        producer.send(settings.topic_incoming, {"userid": "ops", "crawlid": crawlid, "spider_type": "universal",
                                                "url": fleet.url(NEWS, "/"), "rule": DEMO_UNIVERSAL_RULE})
        producer.flush(timeout=30)
        items = own_mongo.client()[settings.mongo_db][crawlid]
        healer.start()

        def stored() -> int:
            try:
                return items.estimated_document_count()
            except Exception:  # MongoDB restarting
                return 0

        def progress(more: int, what: str) -> None:
            target = stored() + more
            wait_for(lambda: stored() >= target, 240, f"{more} more items stored {what}")

        # 1. Redis: kill -9, down REDIS_DOWN seconds, restarted from its AOF on the same port
        progress(STEP, "before Redis dies")
        kill_hard(redis_proc.pid)
        wait_for(lambda: port_free(redis_port), 20, "Redis's port to be released")
        time.sleep(REDIS_DOWN)  # the outage's length is the fault itself, nothing is waited for
        procs.start(redis_argv, fleet.env, name="redis-restarted", service=True)
        wait_for(redis.ping, 30, "the restarted Redis")
        progress(STEP // 2, "as Redis is back")
        # the workers' heartbeats could not be written while Redis was away: none of them was taken for dead
        assert redis.zcard(keys.RETIRED_WORKERS) == 0, redis.zrange(keys.RETIRED_WORKERS, 0, -1)

        # 2. the leading master, kill -9
        progress(STEP // 2, "after Redis came back")
        leader = leader_of(procs, masters)
        kill_hard(masters.pop(leader).pid)

        # 3. ZooKeeper down ZK_DOWN seconds; a rate change sent through Kafka as it returns
        progress(STEP, "after the leader died")
        kill_hard(zk_record.pids[0])
        time.sleep(ZK_DOWN)
        wait_for(lambda: port_free(zk_record.port), 20, "ZooKeeper's port to be released")
        zk_record = zk_service.start(tmp_path / "zk")
        rate_uuid = uuid.uuid4().hex
        producer.send(settings.topic_incoming, {"action": "rate", "userid": "ops", "domain": NEWS, "rate": 1500,
                                                "window": 60, "uuid": rate_uuid})
        producer.flush(timeout=30)
        zk_service.wait_ready(zk_record, 60)

        # 4. MongoDB's storage fails (ping answers, writes fail) until the server is restarted: the supervisor does
        progress(STEP, "after ZooKeeper came back")
        proxy.panic()
        wait_for(lambda: healer.restarts >= 1 and not proxy.failing, 120, "MongoDB restarted by the supervisor")

        # 5. a worker SIGSTOPped past its heartbeat TTL: retired (fenced); its tasks are redone by the others
        progress(STEP, "after MongoDB healed")
        os.kill(workers[0].pid, signal.SIGSTOP)
        try:
            wait_for(lambda: redis.zscore(keys.RETIRED_WORKERS, "faults-0") is not None, 60,
                     "the stopped worker retired")
        finally:
            os.kill(workers[0].pid, signal.SIGCONT)  # it finds itself fenced and stops

        # 6. Kafka stopped for KAFKA_DOWN seconds across the crawl's end
        wait_for(lambda: stored() >= ARTICLES - STEP, 300, "the crawl near its end")
        os.kill(kafka_record.pids[0], signal.SIGSTOP)
        try:
            time.sleep(KAFKA_DOWN)
        finally:
            os.kill(kafka_record.pids[0], signal.SIGCONT)

        # --- afterwards ---------------------------------------------------------------------------------------------
        wait_for(lambda: any(r.get("event") == "crawl_finished" for r in outbound(settings, 2)), 300,
                 "crawl_finished")
        records = outbound(settings, 8)  # late duplicates would be here by now
        events = [r for r in records if r.get("event") == "crawl_finished" and r["crawlid"] == crawlid]
        assert len(events) == 1, events
        event = events[0]
        urls = [item["url"] for item in items.find({}, {"url": 1})]
        assert len(urls) == len(set(urls)) == ARTICLES  # each item stored, once
        served = {path for path in fleet.served(NEWS)
                  if not path.startswith(("/_demoweb", "/search", "/robots.txt"))}
        totals = redis.hgetall(keys.crawl_totals(crawlid))
        print(f"crawl_finished: {event}; served {len(served)} distinct pages; totals {totals}")
        assert event["items"] == items.count_documents({}) == ARTICLES
        assert event["pages"] == len(served)
        assert event["failures"] == {} and event["start_failure"] is None

        answers = [r for r in records if r.get("uuid") == rate_uuid]
        assert answers and answers[0]["status"] == "ok", answers  # retried across the expired session
        raw, _ = zk.get(SitePaths(settings.zk_root).site(NEWS))
        assert SiteConfig.from_json(raw).rate == 1500

        for name, proc, _ in procs.started:
            if name.startswith(("master", "worker", "crawlfleet")):
                repeats = {line: n for line, n in repeated_warnings(procs.log(proc)).items() if n > REPEAT_BOUND}
                assert not repeats, f"{name} repeats warnings per retry: {repeats}"
        producer.close(timeout=5)
    finally:
        healer.stop()
        procs.stop_all()  # the fleet first, while the services it shuts down against are still there
        proxy.stop()
        if zk is not None:
            zk.stop()
            zk.close()
        for service, record in ((zk_service, zk_record), (kafka_service, kafka_record)):
            for pid in record.pids:
                if pid_alive(pid):
                    os.kill(pid, signal.SIGCONT)  # a stopped broker cannot stop
            service.stop(record)


@pytest.mark.parametrize("path, reason", [("/no-such-page.html", "HTTP 404")])
def test_a_start_url_that_fails_says_why_in_crawl_finished_and_info(fleet: Any, path: str, reason: str) -> None:
    fleet.start(redis_monitor=True)
    fleet.start_worker("universal", "start-fails")
    crawlid = "start-fails"
    fleet.submit({"userid": "ops", "crawlid": crawlid, "spider_type": "universal", "url": fleet.url(NEWS, path),
                  "rule": DEMO_UNIVERSAL_RULE})
    event = fleet.wait_finished([crawlid], 120)[crawlid]
    assert (event["pages"], event["items"]) == (1, 0)
    assert event["start_failure"] == reason and event["failures"] == {reason: 1}
    ask = uuid.uuid4().hex
    fleet.submit({"action": "info", "userid": "ops", "crawlid": crawlid, "uuid": ask})
    wait_for(lambda: any(r.get("uuid") == ask for r in outbound(fleet.cf.settings, 1)), 60, "the info answer")
    info = next(r for r in outbound(fleet.cf.settings, 1) if r.get("uuid") == ask)
    assert info["start_failure"] == reason and info["failures"] == {reason: 1}, info
