"""The shared robots.txt cache: one fetch for the whole cluster, TTL, Crawl-delay, pending and failing fetches.

robots.txt is served by an ``http.server`` on 127.0.0.1 inside the test, which counts the requests it answers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from deploy.procs import wait_for
from frontier.config_watch import StaticSiteConfig
from frontier.politeness import Outcome, Politeness
from frontier.robots_cache import RobotsCache, fetch_http
from messaging import keys
from messaging.siteconfig import Rate, SiteConfig
from messaging.tasks import Task, queue_score

pytestmark = pytest.mark.integration

T0 = 1_700_000_000.0
AGENT = "crawlfleet"
HOST = "127.0.0.1"  # an IP address is its own domain


class RobotsServer:
    def __init__(self) -> None:
        self.body = b"User-agent: *\nDisallow: /private\n"
        self.status = 200
        self.delay = 0.0
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests += 1
                time.sleep(server.delay)
                self.send_response(server.status)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(server.body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer((HOST, 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str = "/") -> str:
        return f"http://{HOST}:{self.port}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def robots_key(site: RobotsServer) -> str:
    return keys.robots(HOST, f"{HOST}:{site.port}")


@pytest.fixture
def site() -> Iterator[RobotsServer]:
    server = RobotsServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(params=["single", pytest.param("cluster", marks=pytest.mark.cluster)])
def svc(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue("cf" if request.param == "single" else "cf_cluster")


CHECKER = """
import sys, time
from frontier.robots_cache import RobotsCache, fetch_http
from messaging import clients
redis = clients.redis_client()
cache = RobotsCache(redis, fetch_http)
deadline = time.monotonic() + 20
while (robots := cache.lookup(sys.argv[1])) is None and time.monotonic() < deadline:
    time.sleep(0.05)
print("verdict", robots.allowed(sys.argv[1], "crawlfleet"), "fetched", cache.fetched, flush=True)
"""


def test_fetched_once_for_the_cluster(svc: Any, site: RobotsServer, procs: Any) -> None:
    site.delay = 0.5  # the fetch takes a while: the other processes must wait for it, not fetch too
    workers = [procs.python("-c", CHECKER, site.url("/private/page"), env=svc.env, name=f"robots{n}")
               for n in range(3)]
    for proc in workers:
        procs.wait_log(proc, "verdict", timeout=30)
    logs = [procs.log(proc) for proc in workers]
    assert all("verdict False" in log for log in logs)
    assert sum("fetched 1" in log for log in logs) == 1
    assert site.requests == 1
    assert svc.redis().get(robots_key(site)) == site.body


def test_cached_with_a_ttl_then_fetched_again(svc: Any, site: RobotsServer) -> None:
    redis = svc.redis()
    cache = RobotsCache(redis, fetch_http, ttl=1.0, local_seconds=0.0)
    assert cache.allowed(site.url("/public"), AGENT) is True
    assert cache.allowed(site.url("/private/x"), AGENT) is False
    assert site.requests == 1
    assert 0 < redis.pttl(robots_key(site)) <= 1000
    wait_for(lambda: not redis.exists(robots_key(site)), 5, "the cached robots.txt to expire")
    site.body = b"User-agent: *\nDisallow: /\n"
    assert cache.allowed(site.url("/public"), AGENT) is False
    assert site.requests == 2


def test_rules_are_matched_for_the_robots_user_agent(svc: Any, site: RobotsServer) -> None:
    site.body = b"User-agent: crawlfleet\nDisallow: /\n\nUser-agent: *\nAllow: /\n"
    cache = RobotsCache(svc.redis(), fetch_http)
    assert cache.allowed(site.url("/page"), "crawlfleet") is False
    assert cache.allowed(site.url("/page"), "Mozilla/5.0 (X11; Linux x86_64)") is True


def test_missing_robots_allows_everything_and_unreachable_allows_nothing(svc: Any, site: RobotsServer) -> None:
    redis = svc.redis()
    site.status, site.body = 404, b"not found"
    cache = RobotsCache(redis, fetch_http, ttl=3600, error_ttl=5, local_seconds=0.0)
    assert cache.allowed(site.url("/private/x"), AGENT) is True
    assert redis.pttl(robots_key(site)) > 5000  # a missing robots.txt is an answer: cached for the TTL
    cache.forget(site.url())
    site.status = 503  # RFC 9309 2.3.1.3: unreachable means complete disallow, and the URL waits (not dropped)
    assert cache.allowed(site.url("/public"), AGENT) is None
    assert not redis.exists(robots_key(site)) and site.requests == 2
    down = redis.hgetall(keys.robots_down(HOST, f"{HOST}:{site.port}"))
    assert down[b"why"].endswith(b"HTTP 503") and int(down[b"failures"]) == 1
    assert 0 < cache.pending_wait(site.url("/public")) <= 5  # the next attempt, not a 0.2-s poll
    assert cache.allowed(site.url("/public"), AGENT) is None and site.requests == 2  # no attempt before then


def test_crawl_delay_lowers_the_rate(svc: Any, site: RobotsServer) -> None:
    redis = svc.redis()
    site.body = b"User-agent: *\nCrawl-delay: 2\n"
    cache = RobotsCache(redis, fetch_http)
    rates = StaticSiteConfig(Rate(10, 60), {HOST: SiteConfig(rate=10, window=10)})
    engine = Politeness(redis, "j", "list", "10.0.0.1", rates, robots=cache)
    assert engine.effective_rate(HOST) == Rate(10, 10)  # robots.txt not known yet: the site's rate
    tasks = [Task(url=site.url(f"/p{n}"), crawlid="c", spider_type="list") for n in range(10)]
    redis.zadd(keys.queue("j", HOST), {t.encode(): queue_score(100, n) for n, t in enumerate(tasks)})
    outcomes = [engine.take(HOST, now=T0 + n * 0.5).outcome for n in range(7)]
    # one hit per 2 s (Crawl-delay), not 5 hits bunched at the start of the site's 10-s window
    assert outcomes == [Outcome.TAKEN] + [Outcome.THROTTLED] * 3 + [Outcome.TAKEN] + [Outcome.THROTTLED] * 2
    assert engine.effective_rate(HOST) == Rate(1, 2)
    engine.rates = StaticSiteConfig(Rate(10, 60), {HOST: SiteConfig(rate=10, window=1)})
    assert engine.effective_rate(HOST) == Rate(1, 2)
    engine.rates = StaticSiteConfig(Rate(10, 60))
    assert engine.effective_rate(HOST) == Rate(10, 60)  # the default is already slower than the delay


def test_a_domain_waits_while_another_process_fetches(svc: Any, site: RobotsServer) -> None:
    redis = svc.redis()
    other = RobotsCache(svc.redis(), fetch_http)
    assert other.claim(site.url())  # another process is fetching
    mine = RobotsCache(redis, fetch_http)
    engine = Politeness(redis, "j", "list", "10.0.0.1", StaticSiteConfig(Rate(10, 60)), robots=mine)
    task = Task(url=site.url("/page"), crawlid="c", spider_type="list")
    redis.zadd(keys.queue("j", HOST), {task.encode(): 1})
    result = engine.take(HOST, now=T0)
    assert result.outcome == Outcome.ROBOTS_PENDING and result.wait > 0
    assert redis.zcard(keys.throttle_type("list", HOST)) == 0 and site.requests == 0
    other.store(site.url(), "User-agent: *\nAllow: /\n")
    assert engine.take(HOST, now=T0).outcome == Outcome.TAKEN
    assert site.requests == 0  # the other process's answer was used


def test_each_host_of_a_domain_has_its_own_robots(svc: Any, site: RobotsServer) -> None:
    other_host = RobotsServer()  # the same domain (127.0.0.1), another host:port with other rules
    try:
        other_host.body = b"User-agent: *\nAllow: /\n"
        cache = RobotsCache(svc.redis(), fetch_http)
        assert cache.allowed(site.url("/private/x"), AGENT) is False
        assert cache.allowed(other_host.url("/private/x"), AGENT) is True
        assert site.requests == 1 and other_host.requests == 1
        assert svc.redis().get(robots_key(other_host)) == other_host.body
    finally:
        other_host.close()
