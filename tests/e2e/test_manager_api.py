"""The manager as a process on the test's services: scrapyd's API through scrapyd-client, jobs, restarts, security.

``ManagerProcess`` (also used by the end-to-end page tests) starts ``crawlfleet manager`` on a free port with its own
log and database directories, and talks to it with ``requests``.
"""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests
from scrapyd_client.exceptions import ErrorResponse
from scrapyd_client.pyclient import ScrapydClient

from deploy.demo_rules import DEMO_LIST_RULE
from deploy.procs import free_port, port_open, wait_for
from messaging import keys
from tests.plugins.services import REPO, Isolated, Processes

pytestmark = pytest.mark.e2e
START_TIMEOUT = 60
JOB_TIMEOUT = 90


class ManagerProcess:
    def __init__(self, procs: Processes, env: dict[str, str], base: Path, **settings: str) -> None:
        self.procs = procs
        self.port = free_port()
        self.base = base
        self.env = {**env, "CRAWLFLEET_MANAGER_PORT": str(self.port), "CRAWLFLEET_MANAGER_LOGS": str(base / "logs"),
                    "CRAWLFLEET_MANAGER_DBS": str(base / "dbs"), "CRAWLFLEET_MANAGER_KILL_TIMEOUT": "20",
                    "CRAWLFLEET_MANAGER_POLL_INTERVAL": "0.5", "CRAWLFLEET_MANAGER_PROJECT_DIR": str(REPO),
                    "CRAWLFLEET_NODE_NAME": f"node-{self.port}", "CRAWLFLEET_EGG_CACHE_DIR": str(base / "eggs"),
                    **settings}
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: Any = None
        self.auth: tuple[str, str] | None = None

    def start(self, *args: str) -> ManagerProcess:
        self.proc = self.procs.crawlfleet("manager", *args, env=self.env, name=f"manager-{self.port}")
        wait_for(lambda: port_open(self.port), START_TIMEOUT, f"the manager on port {self.port}",
                 alive=lambda: f"exited:\n{self.procs.log(self.proc)[-2000:]}" if self.proc.poll() is not None
                 else None)
        return self

    def stop(self) -> int:
        self.proc.terminate()
        return self.proc.wait(timeout=60)

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        response = requests.get(f"{self.url}/{path}", params=params, auth=self.auth, timeout=60)
        return response.json()

    def post(self, path: str, data: Any = None, **kwargs: Any) -> requests.Response:
        return requests.post(f"{self.url}/{path}", data=data, auth=self.auth, timeout=60, **kwargs)

    def state(self, job: str) -> str | None:
        return self.get("status.json", job=job)["currstate"]

    def wait_state(self, job: str, state: str, timeout: float = JOB_TIMEOUT) -> None:
        wait_for(lambda: self.state(job) == state, timeout, f"job {job} {state}")

    def finished(self, job: str) -> dict[str, Any]:
        return next(f for f in self.get("listjobs.json")["finished"] if f["id"] == job)


@pytest.fixture
def manager(cf: Isolated, procs: Processes, tmp_path: Path) -> ManagerProcess:
    return ManagerProcess(procs, cf.env, tmp_path / "manager").start()


def test_scrapyd_client_drives_the_manager(manager: ManagerProcess, tmp_path: Path) -> None:
    client = ScrapydClient(manager.url)
    assert client.projects() == ["crawlfleet"]
    assert client.spiders("crawlfleet") == ["list", "proxy", "universal"]  # proxy: the pool's collector
    assert client.versions("crawlfleet") == []
    status = client.daemonstatus()
    assert status["status"] == "ok" and status["node_name"] == f"node-{manager.port}" and status["running"] == 0
    job = client.schedule("crawlfleet", "list", [("note", "from scrapyd-client"), ("setting", "LOG_LEVEL=DEBUG")])
    manager.wait_state(job, "running")
    running = client.jobs("crawlfleet")["running"]
    assert [r["id"] for r in running] == [job] and running[0]["pid"] and running[0]["log_url"].endswith(f"{job}.log")
    assert client.status(job, "crawlfleet")["currstate"] == "running"
    wait_for(lambda: manager.get("api/nodes")["workers"], JOB_TIMEOUT, "the worker in the registry")
    assert client.cancel("crawlfleet", job)["prevstate"] == "running"
    manager.wait_state(job, "finished")
    assert manager.finished(job)["exit_status"] == 0
    log = requests.get(manager.url + manager.finished(job)["log_url"], timeout=10).text
    assert "worker " + job + " ready" in log  # the worker's own log, via the manager
    with pytest.raises(ErrorResponse, match="not deployed as eggs"):
        client.delproject("crawlfleet")
    with pytest.raises(ErrorResponse, match="spider 'nope' not found"):
        client.schedule("crawlfleet", "nope")
    with pytest.raises(ErrorResponse, match="project 'other' not found"):
        client.jobs("other")

    # the command line, from a Scrapy project whose scrapy.cfg names the manager as its deploy target
    project = tmp_path / "client"
    project.mkdir()
    (project / "scrapy.cfg").write_text(f"[settings]\ndefault = spiders.settings\n\n[deploy]\nurl = {manager.url}\n"
                                        "project = crawlfleet\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cli = [sys.executable, "-m", "scrapyd_client"]
    out = subprocess.run([*cli, "spiders", "-p", "crawlfleet"], cwd=project, env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == ["crawlfleet:", "list", "proxy", "universal"], out.stderr
    out = subprocess.run([*cli, "schedule", "-p", "crawlfleet", "universal", "--arg", "note=cli"], cwd=project,
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "crawlfleet / universal => " in out.stdout, out.stderr
    cli_job = out.stdout.split("=> ")[1].strip()
    manager.wait_state(cli_job, "running")
    assert manager.post("cancel.json", {"project": "crawlfleet", "job": cli_job}).json()["prevstate"] == "running"
    manager.wait_state(cli_job, "finished")


def test_a_scheduled_spider_crawls_the_demo_web_and_its_stop_hands_the_leases_back(
        fleet: Any, procs: Processes, tmp_path: Path) -> None:
    fleet.start()  # a Kafka monitor and a master; the worker comes from the manager
    manager = ManagerProcess(procs, fleet.env, tmp_path / "manager").start()
    answer = manager.post("schedule.json", {"project": "crawlfleet", "spider": "list", "jobid": "mgr-list-1",
                                            "setting": "CONCURRENT_REQUESTS=8"}).json()
    assert answer == {"node_name": answer["node_name"], "status": "ok", "jobid": "mgr-list-1"}
    manager.wait_state("mgr-list-1", "running")
    fleet.wait_workers_registered(1, timeout=START_TIMEOUT)
    crawl = {"userid": "alice", "crawlid": "mgr-news", "spider_type": "list",
             "url": fleet.url("news.fleet.test", "/world/"), "rule": DEMO_LIST_RULE}
    sent = manager.post("api/crawl", json=crawl)
    assert sent.status_code == 202 and sent.json()["status"] == "accepted", sent.text
    bad_rule = {"first_page_xpath": {"list_from": "//["}}
    bad = manager.post("api/crawl", json={**crawl, "crawlid": "bad", "rule": bad_rule})
    assert bad.status_code == 400 and "$.rule" in bad.json()["reason"]
    events = fleet.wait_finished(["mgr-news"], JOB_TIMEOUT)
    assert events["mgr-news"]["items"] > 0 and len(fleet.items("mgr-news")) == events["mgr-news"]["items"]

    info = manager.get("api/crawls/mgr-news")
    assert info["state"] == "finished" and info["pages"] > 0 and info["queued"] == info["leased"] == 0
    crawls = {c["crawlid"]: c for c in manager.get("api/crawls")["crawls"]}
    assert crawls["mgr-news"]["items"] == events["mgr-news"]["items"]
    nodes = manager.get("api/nodes")
    assert [m["url"] for m in nodes["managers"]] == [manager.url]
    assert [(w["job"], w["spider_type"]) for w in nodes["workers"]] == [("mgr-list-1", "list")]
    stats = manager.get("api/stats")
    assert sum(stats["pages_per_minute"]["list"].values()) > 0 and stats["workers"][0]["completed"] > 0

    # a second crawl is taken by the worker; stopping the worker mid-crawl hands its tasks back to seeds
    fleet.submit({"userid": "alice", "crawlid": "mgr-more", "spider_type": "list",
                  "url": fleet.url("news.fleet.test", "/business/"), "rule": DEMO_LIST_RULE})
    wait_for(lambda: fleet.redis.hget(keys.crawl("mgr-more"), "state"), 30, "the second crawl stored")
    assert manager.post("cancel.json", {"project": "crawlfleet", "job": "mgr-list-1"}).json()["prevstate"] == "running"
    manager.wait_state("mgr-list-1", "finished")
    assert manager.finished("mgr-list-1")["exit_status"] == 0
    assert fleet.redis.zscore(keys.WORKERS, "mgr-list-1") is None  # it left the registry
    assert fleet.redis.zscore(keys.RETIRED_WORKERS, "mgr-list-1") is not None
    wait_for(lambda: not any(fleet.redis.scan_iter(match=keys.inflight_pattern("mgr-list-1"))), 30,
             "no lease of the stopped worker left")


def test_max_proc_pending_cancel_restart_and_a_spider_that_closes_by_itself(
        cf: Isolated, procs: Processes, tmp_path: Path) -> None:
    manager = ManagerProcess(procs, cf.env, tmp_path / "m", CRAWLFLEET_MANAGER_MAX_PROC="1").start()
    first = manager.post("schedule.json", {"project": "crawlfleet", "spider": "list", "jobid": "first",
                                           "setting": "CLOSESPIDER_TIMEOUT=8"}).json()["jobid"]
    for job in ("second", "third"):
        manager.post("schedule.json", {"project": "crawlfleet", "spider": "universal", "jobid": job, "priority": "1"})
    manager.wait_state(first, "running")
    jobs = manager.get("listjobs.json")
    assert [r["id"] for r in jobs["running"]] == ["first"]
    assert [p["id"] for p in jobs["pending"]] == ["second", "third"]
    again = manager.post("schedule.json", {"project": "crawlfleet", "spider": "list", "jobid": "first"}).json()
    assert again["status"] == "error" and "already used" in again["message"]
    assert manager.post("cancel.json", {"project": "crawlfleet", "job": "second"}).json()["prevstate"] == "pending"
    assert manager.state("second") is None

    # CLOSESPIDER_TIMEOUT: the worker closes by itself (committing, leaving the registry): finished, exit status 0
    manager.wait_state(first, "finished")
    assert manager.finished(first)["exit_status"] == 0
    manager.wait_state("third", "running")
    third_log = manager.base / "logs" / "crawlfleet" / "universal" / "third.log"
    wait_for(lambda: "worker third ready" in third_log.read_text(), START_TIMEOUT, "the third job's worker ready")
    manager.post("schedule.json", {"project": "crawlfleet", "spider": "list", "jobid": "kept",
                                   "setting": "CLOSESPIDER_TIMEOUT=3"})
    assert manager.stop() == 0  # the manager stops its spider (SIGTERM) and keeps its pending job

    restarted = ManagerProcess(procs, cf.env, tmp_path / "m")
    restarted.port, restarted.url = manager.port, manager.url
    restarted.env = {**manager.env, "CRAWLFLEET_MANAGER_MAX_PROC": "2"}
    restarted.start()
    finished = {f["id"]: f for f in restarted.get("listjobs.json")["finished"]}
    assert set(finished) == {"first", "third"} and finished["third"]["exit_status"] == 0
    assert restarted.state("kept") in ("pending", "running")
    restarted.wait_state("kept", "finished")


def test_a_non_loopback_manager_requires_basic_authentication(cf: Isolated, procs: Processes, tmp_path: Path) -> None:
    refused = ManagerProcess(procs, cf.env, tmp_path / "a")
    proc = procs.crawlfleet("manager", "--bind", "0.0.0.0", env=refused.env, name="manager-refused")
    assert proc.wait(timeout=60) != 0 and "requires HTTP basic authentication" in procs.log(proc)

    manager = ManagerProcess(procs, cf.env, tmp_path / "b", CRAWLFLEET_MANAGER_AUTH="ops:s3cret").start(
        "--bind", "0.0.0.0")
    unauthenticated = requests.get(f"{manager.url}/daemonstatus.json", timeout=10)
    assert unauthenticated.status_code == 401 and "basic" in unauthenticated.headers["www-authenticate"].lower()
    assert requests.get(f"{manager.url}/jobs", timeout=10).status_code == 401
    assert requests.get(f"{manager.url}/daemonstatus.json", auth=("ops", "wrong"), timeout=10).status_code == 401
    assert ScrapydClient(manager.url, "ops", "s3cret").daemonstatus()["status"] == "ok"


def test_crawled_strings_are_escaped_log_paths_stay_inside_and_cross_site_posts_are_refused(
        cf: Isolated, manager: ManagerProcess) -> None:
    script = "<script>alert('crawled')</script>"
    redis = cf.redis()
    redis.sadd(keys.CRAWLS, "xss")
    redis.hset(keys.crawl("xss"), mapping={"state": "running", "spider_type": "list", "url": f"http://x.test/{script}",
                                           "userid": script, "created": "1"})
    cf.mongo()["xss"].insert_one({"url": "http://x.test/a", "title": script, "status": 200,
                                  "fetched_at": "2026-11-24T07:30:00Z"})
    page = requests.get(f"{manager.url}/crawls", params={"crawl": "xss"}, timeout=30).text
    assert script not in page and "&lt;script&gt;alert(&#39;crawled&#39;)&lt;/script&gt;" in page
    message = requests.get(f"{manager.url}/jobs", params={"message": script}, timeout=30).text
    assert script not in message and "crawled" not in message  # ?message= is not shown at all (flash ids only)

    # a real log, then attempts to leave the log directory (raw paths: clients would normalise ../)
    (manager.base / "logs" / "crawlfleet" / "list").mkdir(parents=True)
    (manager.base / "logs" / "crawlfleet" / "list" / "j.log").write_text(script)
    (manager.base / "secret.log").write_text("secret")
    ok = requests.get(f"{manager.url}/logs/crawlfleet/list/j.log", timeout=10)
    assert ok.status_code == 200 and ok.headers["content-type"].startswith("text/plain")
    assert ok.headers["x-content-type-options"] == "nosniff"
    for path in ("/logs/../secret.log", "/logs/crawlfleet/../../secret.log",
                 "/logs/crawlfleet/list/..%2F..%2F..%2Fsecret.log", "/logs/%2e%2e/%2e%2e/secret.log",
                 "/logs/crawlfleet/list/../../../dbs/pending.db"):
        connection = http.client.HTTPConnection("127.0.0.1", manager.port, timeout=10)
        connection.request("GET", path)
        response = connection.getresponse()
        body = response.read()
        assert response.status == 404 and b"secret" not in body, path

    # cross-site: a page elsewhere posting to the API or a form is refused; no job is created
    evil = {"Origin": "http://evil.example"}
    refused = manager.post("schedule.json", {"project": "crawlfleet", "spider": "list", "jobid": "evil"}, headers=evil)
    assert refused.status_code == 403 and manager.state("evil") is None
    assert manager.post("api/crawl", json={}, headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    no_token = manager.post("jobs", {"job": "x"})
    assert no_token.status_code == 403
    rebinding = requests.get(f"{manager.url}/listjobs.json", headers={"Host": "evil.example"}, timeout=10)
    assert rebinding.status_code == 403
