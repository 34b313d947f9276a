"""The *Sites* page on real services: every site of the per-job domain sets with its queues, rate, spacing, next
hit, block, robots.txt and statuses; search and paging; a rate edited on the page reaches ZooKeeper."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import requests

from deploy.procs import wait_for
from frontier.registry import WorkerInfo, WorkerRegistry
from messaging import keys
from messaging.clock import RedisClock
from messaging.domains import robots_tag
from messaging.siteconfig import Rate, SitePaths, read_site, write_defaults
from messaging.tasks import Task
from tests.e2e.test_manager_api import ManagerProcess
from tests.plugins.services import Isolated, Processes

pytestmark = pytest.mark.e2e


def row_of(html: str, domain: str) -> str:
    match = re.search(rf'<tr data-domain="{re.escape(domain)}".*?</tr>', html, re.S)
    assert match, f"no row for {domain}"
    return match.group(0)


def test_sites_show_queues_rates_windows_and_are_edited(cf: Isolated, procs: Processes, tmp_path: Path) -> None:
    redis, zk = cf.redis(), cf.zk()
    paths = SitePaths(cf.settings.zk_root)
    write_defaults(zk, paths, Rate(10, 60))
    WorkerRegistry(redis).register(WorkerInfo("site-job", "list", "127.0.0.1", "h", 1))
    domains = [f"site{n:03d}.example" for n in range(120)]
    redis.sadd(keys.job_domains("site-job"), *domains)
    task = Task(url="http://www.site007.example:8080/a", crawlid="c", spider_type="list")
    redis.zadd(keys.queue("site-job", "site007.example"), {task.encode(): 1, Task(
        url="http://www.site007.example:8080/b", crawlid="c", spider_type="list").encode(): 2})
    redis.zadd(keys.inflight("site-job", "site007.example"), {"leased-task": 1})
    # where the shared cache keeps the host's robots.txt: under the host's registered domain (robots_tag)
    redis.set(keys.robots(robots_tag("www.site007.example:8080"), "www.site007.example:8080"),
              b"User-agent: *\nDisallow:")
    redis.hset(keys.site_statuses("site007.example"), mapping={"200": 7, "404": 2})
    env = cf.with_env(CRAWLFLEET_KAFKA_GROUP=cf.name)
    kafka = procs.crawlfleet("kafka-monitor", env=env)
    monitor = procs.crawlfleet("redis-monitor", env=env)
    manager = ManagerProcess(procs, env, tmp_path / "m").start()
    procs.wait_log(kafka, "partitions assigned", 60)
    procs.wait_log(monitor, "redis-monitor: watching", 30)

    now_us = int(RedisClock(redis).now() * 1_000_000)  # the windows as the politeness step leaves them, just now
    redis.zadd(keys.throttle_type("list", "site007.example"), {f"h{n}": now_us - n * 1_000_000 for n in range(10)})
    redis.set(keys.block("site007.example"), now_us + 90_000_000)
    page = requests.get(f"{manager.url}/sites", timeout=30).text
    assert "120 sites" in page and "page 1 of 3" in page and "site049.example" in page
    assert "site050.example" not in page
    second = requests.get(f"{manager.url}/sites", params={"page": 2}, timeout=30).text
    assert "site050.example" in second and "site049.example" not in second
    found = requests.get(f"{manager.url}/sites", params={"q": "site007"}, timeout=30).text
    assert "1 sites" in found
    row = row_of(found, "site007.example")
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    assert cells[1:3] == ["2", "1"]  # queued, leased
    assert "10 per 60 s" in cells[3] and "(default)" in cells[3] and cells[4] == "6.0 s"  # spacing = 60 / 10
    next_hit = float(cells[5].removesuffix(" s"))
    assert 40 < next_hit <= 51  # the oldest of ten hits (9 s ago) leaves the 60 s window in 51 s
    assert 70 < float(cells[6].removesuffix(" s")) <= 90  # the block
    assert cells[7] == "cached: www.site007.example:8080" and cells[8] == "9" and cells[9] == "200: 7, 404: 2"

    token = re.search(r'name="csrf_token" value="([^"]+)"', found).group(1)
    edited = manager.post("sites", {"csrf_token": token, "domain": "site007.example", "action": "rate",
                                    "hits": "3", "window": "30", "q": "site007"}, allow_redirects=False)
    assert edited.status_code == 303
    assert read_site(zk, paths, "site007.example").rate == 3
    assert read_site(zk, paths, "site007.example").window == 30.0
    assert edited.headers["Location"].startswith("/sites?q=site007&flash=")  # the list as it was shown
    shown = requests.get(f"{manager.url}{edited.headers['Location']}", timeout=30).text
    assert "site007.example: rate set; it applies 3 per 30 s (one every 10 s)" in shown, \
        re.search(r"id=\"message\"[^<]*<", shown)
    wait_for(lambda: "3 per 30 s" in row_of(requests.get(f"{manager.url}/sites", params={"q": "site007"},
                                                       timeout=30).text, "site007.example"), 10,
             "the new rate on the page (the site watch)")
    listed = manager.post("sites", {"csrf_token": token, "domain": "site008.example", "action": "blacklist"})
    assert listed.status_code == 200 and read_site(zk, paths, "site008.example").blacklisted
