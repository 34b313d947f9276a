"""Deployed projects, as a scrapyd user meets them: ``scrapyd-deploy`` of an ordinary Scrapy project written here,
its versions and spiders through scrapyd-client, jobs that run the version they were scheduled with, a deleted
version, a second manager of the cluster loading the same egg, and eggs that must be refused with nothing stored.

A deployed project's job is a fleet crawl (issue 35): its worker (one here, ``_workers=1``) runs the pinned egg, its
``start()`` is the crawl's start, and the job is finished when its crawl is (a master declares it).
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest
import requests
from scrapyd_client.exceptions import ErrorResponse
from scrapyd_client.pyclient import ScrapydClient

from deploy.procs import wait_for
from messaging import keys
from tests.e2e.test_manager_api import JOB_TIMEOUT, ManagerProcess
from tests.plugins.scrapy_project import build_egg, deploy, scrapyd_deploy, write_project
from tests.plugins.services import Isolated, Processes

pytestmark = pytest.mark.e2e
PROJECT = "fleettest"

# waits for its flag file (a spider argument) before it imports a module of its egg it has not imported yet
PROBE = """\
import asyncio
import os
import time

import scrapy

from fleettest import MARK


class Probe(scrapy.Spider):
    name = "probe"

    async def start(self):
        self.logger.info("probe runs code %s", MARK)
        flag, deadline = getattr(self, "flag", ""), time.monotonic() + 120
        while flag and not os.path.exists(flag) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        from fleettest import late

        self.logger.info("late import of %s", late.MARK)
        return
        yield
"""
OTHER = """\
import scrapy


class Other(scrapy.Spider):
    name = "other"
"""


def version_of(root: Path, url: str, mark: str, **modules: str) -> Path:
    """The project at ``mark``: its package says ``MARK = mark``, its module ``late`` ``MARK = 'late-<mark>'``."""
    write_project(root, PROJECT, url, {"spiders/probe.py": PROBE, "late.py": f"MARK = 'late-{mark}'\n", **modules})
    (root / PROJECT / "__init__.py").write_text(f"MARK = {mark!r}\n")
    return root


def log_of(manager: ManagerProcess, spider: str, job: str) -> str:
    path = manager.base / "logs" / PROJECT / spider / f"{job}.log"
    return path.read_text() if path.exists() else ""


def wait_log(manager: ManagerProcess, job: str, text: str) -> None:
    wait_for(lambda: text in log_of(manager, "probe", job), JOB_TIMEOUT, f"{text!r} in the log of {job}")


def stored(cf: Isolated) -> dict[str, int]:
    db = cf.mongo()
    return {name: db[f"_eggs.{name}"].count_documents({}) for name in ("files", "chunks", "versions")}


def schedule(manager: ManagerProcess, **params: str) -> dict[str, Any]:
    answer: dict[str, Any] = manager.post("schedule.json", {"project": PROJECT, "spider": "probe", "_workers": "1",
                                                            **params}).json()
    return answer


def test_deploy_list_pin_delete_and_a_second_manager(cf: Isolated, procs: Processes, tmp_path: Path) -> None:
    env = cf.with_env(CRAWLFLEET_FINISH_INTERVAL="0.5", CRAWLFLEET_DISPATCH_INTERVAL="0.2")
    procs.crawlfleet("master", "--id", "m0", env=env, name="master")  # a crawl's end is the leading master's word
    manager = ManagerProcess(procs, env, tmp_path / "m", CRAWLFLEET_MANAGER_MAX_PROC="1").start()
    root = version_of(tmp_path / "project", manager.url, "v1")
    assert deploy(root, "1.0") == {"node_name": f"node-{manager.port}", "status": "ok", "project": PROJECT,
                                   "version": "1.0", "spiders": 1}
    client = ScrapydClient(manager.url)
    assert client.projects() == ["crawlfleet", PROJECT]
    assert client.versions(PROJECT) == ["1.0"] and client.spiders(PROJECT) == ["probe"]

    # a job of the latest version (1.0) runs; 2.0 is deployed while it runs
    flags = {job: tmp_path / f"{job}.flag" for job in ("p1", "p2")}
    assert schedule(manager, jobid="p1", flag=str(flags["p1"]))["status"] == "ok"
    wait_log(manager, "p1", "probe runs code v1")
    version_of(root, manager.url, "v2", **{"spiders/other.py": OTHER})
    assert deploy(root, "2.0")["spiders"] == 2
    assert client.versions(PROJECT) == ["1.0", "2.0"]
    assert client.spiders(PROJECT) == ["other", "probe"]
    assert manager.get("listspiders.json", project=PROJECT, _version="1.0")["spiders"] == ["probe"]

    # pinned at schedule time: p2 and p4 to 1.0, p3 to the latest, 2.0; they wait for the one slot
    assert schedule(manager, jobid="p2", _version="1.0", flag=str(flags["p2"]))["status"] == "ok"
    assert schedule(manager, jobid="p3")["status"] == "ok"
    assert schedule(manager, jobid="p4", _version="1.0")["status"] == "ok"
    pending = {j["id"]: j["version"] for j in client.jobs(PROJECT)["pending"]}
    assert pending == {"p2": "1.0", "p3": "2.0", "p4": "1.0"}
    flags["p1"].touch()
    wait_log(manager, "p1", "late import of late-v1")  # imported after 2.0 was deployed: still 1.0's code
    wait_log(manager, "p2", "probe runs code v1")  # started after 2.0 was deployed, runs 1.0

    # 1.0 deleted while p2 runs: p2 keeps its egg, p4 (pending, pinned to 1.0) is refused when it starts
    assert manager.post("delversion.json", {"project": PROJECT, "version": "1.0"}).json()["status"] == "ok"
    assert client.versions(PROJECT) == ["2.0"]
    with pytest.raises(ErrorResponse, match=r"version '1\.0' not found"):
        client.schedule(PROJECT, "probe", [("_version", "1.0")])
    assert cf.redis().hget("crawl:p2", "version") == b"1.0"  # the crawl pins what every worker of it loads
    assert manager.get("listspiders.json", project=PROJECT, _version="1.0")["message"] == "version '1.0' not found"
    flags["p2"].touch()
    wait_log(manager, "p2", "late import of late-v1")
    wait_log(manager, "p3", "late import of late-v2")
    manager.wait_state("p4", "finished")
    finished = {f["id"]: f["exit_status"] for f in client.jobs(PROJECT)["finished"]}
    assert finished == {"p1": 0, "p2": 0, "p3": 0, "p4": 2}
    assert "version '1.0' not found in the egg storage (deleted since the job was scheduled?)" in log_of(
        manager, "probe", "p4")

    # another manager of the cluster (its own host cache) sees the project and loads the egg from MongoDB
    other = ManagerProcess(procs, env, tmp_path / "other").start()
    assert ScrapydClient(other.url).projects() == ["crawlfleet", PROJECT]
    assert ScrapydClient(other.url).spiders(PROJECT) == ["other", "probe"]
    cached = list((tmp_path / "other" / "eggs" / PROJECT).glob("2_0-*.egg"))
    info = cf.mongo()["_eggs.versions"].find_one({"project": PROJECT, "version": "2.0"})
    assert [p.name for p in cached] == [f"2_0-{info['sha256']}.egg"]

    # a crawl's workers on both hosts: the second through the other manager's schedule.json, with the crawl's pin
    wait_for(lambda: cf.redis().zcard(keys.MANAGERS) == 2, 30, "both managers in the registry")
    # its start() waits for a flag: the crawl stays open until the other host's worker has joined it (a worker that
    # starts after its crawl finished closes as finished without serving, which is right but not what is shown here)
    flags["p5"] = tmp_path / "p5.flag"
    assert schedule(manager, jobid="p5", _workers="2", _hosts="*", flag=str(flags["p5"]))["status"] == "ok"
    wait_for(lambda: "serving crawl p5 of fleettest.probe" in log_of(other, "probe", "p5.2"), JOB_TIMEOUT,
             "the other host's worker serves p5")
    flags["p5"].touch()
    manager.wait_state("p5", "finished")
    other.wait_state("p5.2", "finished")
    assert other.finished("p5.2")["exit_status"] == 0 and manager.finished("p5")["exit_status"] == 0

    # cancel.json of a crawl served on both hosts stops it on each: its start() waits for a flag never set (longer
    # than JOB_TIMEOUT), yet both jobs finish, the other host's worker closing by itself as cancelled
    assert schedule(manager, jobid="p6", _workers="2", _hosts="*", flag=str(tmp_path / "never.flag"))["status"] == "ok"
    wait_for(lambda: "probe runs code v2" in log_of(manager, "probe", "p6") + log_of(other, "probe", "p6.2"),
             JOB_TIMEOUT, "p6's start() runs")
    other.wait_state("p6.2", "running")
    assert manager.post("cancel.json", {"project": PROJECT, "job": "p6"}).json()["prevstate"] == "running"
    manager.wait_state("p6", "finished")
    other.wait_state("p6.2", "finished")
    assert cf.redis().hget(keys.crawl("p6"), "state") == b"stopped"
    assert "late import" not in log_of(manager, "probe", "p6") + log_of(other, "probe", "p6.2")
    assert "Spider closed (cancelled)" in log_of(other, "probe", "p6.2")

    assert manager.post("delproject.json", {"project": PROJECT}).json()["status"] == "ok"
    assert client.projects() == ["crawlfleet"] and client.versions(PROJECT) == []
    assert stored(cf) == {"files": 0, "chunks": 0, "versions": 0}
    with pytest.raises(ErrorResponse, match=f"project '{PROJECT}' not found"):
        client.delproject(PROJECT)


def test_eggs_that_cannot_load_and_bad_names_are_refused_with_nothing_stored(
        cf: Isolated, procs: Processes, tmp_path: Path) -> None:
    manager = ManagerProcess(procs, cf.env, tmp_path / "m").start()
    root = tmp_path / "project"
    write_project(root, PROJECT, manager.url, {"spiders/broken.py": "import scrapy\nimport no_such_module\n"})
    done = scrapyd_deploy(root, "--version", "1")
    assert '"status": "error"' in done.stdout and "No module named 'no_such_module'" in done.stdout, done.stdout
    assert "the project's spiders cannot be loaded: ModuleNotFoundError" in done.stdout

    write_project(root, PROJECT, manager.url, {"spiders/broken.py": OTHER}, settings="raise RuntimeError('bad')\n")
    egg = build_egg(root, tmp_path / "settings.egg")
    answer = post_egg(manager, PROJECT, "1", egg.read_bytes())
    assert answer["message"].startswith(f"the project's spiders cannot be loaded: the egg's settings module "
                                        f"'{PROJECT}.settings' cannot be imported: RuntimeError: bad"), answer

    no_entry_point = tmp_path / "plain.egg"
    with zipfile.ZipFile(no_entry_point, "w") as z:
        z.writestr(f"{PROJECT}/__init__.py", "")
    assert "no EGG-INFO/entry_points.txt" in post_egg(manager, PROJECT, "1", no_entry_point.read_bytes())["message"]
    assert post_egg(manager, PROJECT, "1", b"not a zip")["message"].startswith("egg is not a ZIP file")

    good = build_egg(write_project(tmp_path / "good", PROJECT, manager.url, {"spiders/other.py": OTHER}),
                     tmp_path / "good.egg").read_bytes()
    for project, version, reason in (
            ("../p", "1", "DirectoryTraversalError: ../p"), ("a/b", "1", "DirectoryTraversalError: a/b"),
            ("..", "1", "DirectoryTraversalError: .."), ("my project", "1", "project name 'my project' is invalid"),
            (".hidden", "1", "project name '.hidden' is invalid"), (PROJECT, "1\n2", "version '1\\n2' is invalid"),
            ("crawlfleet", "1", "the crawlfleet project is installed on the host, not deployed as eggs")):
        answer = post_egg(manager, project, version, good)
        assert answer["status"] == "error" and answer["message"].startswith(reason), (project, answer)
    assert ScrapydClient(manager.url).projects() == ["crawlfleet"]
    assert stored(cf) == {"files": 0, "chunks": 0, "versions": 0}

    # a version name is free text (git describe, a branch with a slash); the cache names the file by digest
    assert post_egg(manager, PROJECT, "r12-feature/x", good)["spiders"] == 1
    assert manager.get("listspiders.json", project=PROJECT, _version="r12-feature/x")["spiders"] == ["other"]
    assert stored(cf)["versions"] == 1
    missing = manager.get("listspiders.json", project="nothere")
    assert missing["message"] == "project 'nothere' not found"


def post_egg(manager: ManagerProcess, project: str, version: str, egg: bytes) -> dict[str, Any]:
    response = requests.post(f"{manager.url}/addversion.json", data={"project": project, "version": version},
                             files={"egg": ("project.egg", egg)}, timeout=120)
    answer: dict[str, Any] = response.json()
    return answer
