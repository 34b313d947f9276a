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

from frontier.client import FrontierClient, Outcome
from frontier.config_watch import StaticSiteConfig
from frontier.politeness import Politeness
from frontier.robots_cache import MINE_WAIT, PENDING_WAIT, RobotsCache, fetch_http
from messaging import keys
from messaging.clock import ManualClock
from messaging.siteconfig import Rate, SiteConfig
from messaging.tasks import Task, queue_score

pytestmark = pytest.mark.e2e

T0 = 1_700_000_000.0
AGENT = "crawlfleet"
LOCK = 30.0  # a claim's TTL in these tests (seconds): time passes on a ManualClock, never waited for
LOCK_MS = int(LOCK * 1000)
HOST = "127.0.0.1"  # an IP address is its own domain


class RobotsServer:
    def __init__(self) -> None:
        self.body = b"User-agent: *\nDisallow: /private\n"
        self.status = 200
        self.delay = 0.0
        self.requests = 0
        self.location = ""  # a redirect's target
        self.retry_after = ""
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests += 1
                time.sleep(server.delay)
                self.send_response(server.status)
                self.send_header("Content-Type", "text/plain")
                if server.location:
                    self.send_header("Location", server.location)
                if server.retry_after:
                    self.send_header("Retry-After", server.retry_after)
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
    cache = RobotsCache(redis, fetch_http, ttl=60.0, local_seconds=0.0)
    assert cache.allowed(site.url("/public"), AGENT) is True
    assert cache.allowed(site.url("/private/x"), AGENT) is False
    assert site.requests == 1
    assert 59_000 < redis.pttl(robots_key(site)) <= 60_000  # stored with the cache's TTL
    redis.delete(robots_key(site))  # as when that TTL runs out (Redis's part: not waited for)
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
    rules = Politeness(rates, robots=cache, horizon=0)  # each take at its slot
    engine = FrontierClient(redis, "j", "list", "10.0.0.1", rules)
    assert rules.effective_rate(HOST) == Rate(10, 10)  # robots.txt not known yet: the site's rate
    tasks = [Task(url=site.url(f"/p{n}"), crawlid="c", spider_type="list") for n in range(10)]
    redis.zadd(keys.queue("j", HOST), {t.encode(): queue_score(100, n) for n, t in enumerate(tasks)})
    outcomes = [engine.take(HOST, now=T0 + n * 0.5).outcome for n in range(7)]
    # one hit per 2 s (Crawl-delay), not 5 hits bunched at the start of the site's 10-s window; the window is checked
    # a slack wider (a fifth of the spacing: frontier.politeness), so the second hit comes 2.4 s after the first
    assert outcomes == [Outcome.TAKEN] + [Outcome.THROTTLED] * 4 + [Outcome.TAKEN] + [Outcome.THROTTLED]
    assert rules.effective_rate(HOST) == Rate(1, 2)
    rules.rates = StaticSiteConfig(Rate(10, 60), {HOST: SiteConfig(rate=10, window=1)})
    assert rules.effective_rate(HOST) == Rate(1, 2)
    rules.rates = StaticSiteConfig(Rate(10, 60))
    assert rules.effective_rate(HOST) == Rate(10, 60)  # the default is already slower than the delay


def test_a_domain_waits_while_another_process_fetches(svc: Any, site: RobotsServer) -> None:
    redis = svc.redis()
    other = RobotsCache(svc.redis(), fetch_http)
    assert other.claim(site.url())  # another process is fetching
    mine = RobotsCache(redis, fetch_http)
    engine = FrontierClient(redis, "j", "list", "10.0.0.1", Politeness(StaticSiteConfig(Rate(10, 60)), robots=mine))
    task = Task(url=site.url("/page"), crawlid="c", spider_type="list")
    redis.zadd(keys.queue("j", HOST), {task.encode(): 1})
    result = engine.take(HOST, now=T0)
    assert result.outcome == Outcome.ROBOTS_PENDING and result.wait == PENDING_WAIT  # polled: another one fetches
    assert other.pending_wait(site.url("/page")) == MINE_WAIT  # its own fetch: its store asks the domain again
    assert redis.zcard(keys.throttle_type("list", HOST)) == 0 and site.requests == 0
    other.store(site.url(), "User-agent: *\nAllow: /\n")
    assert other.pending_wait(site.url("/page")) == PENDING_WAIT
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


def test_redirects_are_followed_across_hosts_and_the_file_kept_for_the_original_host(svc: Any,
                                                                                      site: RobotsServer) -> None:
    target = RobotsServer()
    try:
        target.body = b"User-agent: *\nDisallow: /\n"
        site.status, site.location = 301, target.url("/robots.txt")
        cache = RobotsCache(svc.redis(), fetch_http)
        assert cache.allowed(site.url("/page"), AGENT) is False
        assert svc.redis().get(robots_key(site)) == target.body and site.requests == 1 == target.requests
        assert not svc.redis().exists(robots_key(target))  # stored for the host that was asked for
    finally:
        target.close()


def test_an_outage_backs_off_then_escapes_after_the_limit(svc: Any, site: RobotsServer) -> None:
    redis = svc.redis()
    clock = [T0]
    site.status = 503
    cache = RobotsCache(redis, fetch_http, error_ttl=100, first_retry=10, outage_limit=300, local_seconds=0.0,
                        redis_now=lambda: clock[0])
    down = keys.robots_down(HOST, f"{HOST}:{site.port}")
    waits = []
    for _ in range(5):
        assert cache.lookup(site.url("/x")) is None
        retry_at = float(redis.hget(down, "retry_at"))
        waits.append(round(retry_at - clock[0]))
        clock[0] = retry_at - 0.5
        assert cache.lookup(site.url("/x")) is None  # not before the next attempt
        clock[0] = retry_at
    assert waits == [10, 20, 40, 80, 100] and site.requests == 5
    assert float(redis.hget(down, "since")) == T0
    clock[0] = T0 + 300  # the outage has lasted the limit: allowed all until the next attempt
    robots = cache.lookup(site.url("/x"))
    assert robots is not None and robots.allowed(site.url("/private/x"), AGENT) and site.requests == 6
    redis.delete(robots_key(site))  # as when the "allow all" expires at the next attempt
    clock[0] = float(redis.hget(down, "retry_at"))
    site.status = 200  # it answers again: its rules, and the outage is over
    assert cache.allowed(site.url("/private/x"), AGENT) is False and not redis.exists(down)


def test_a_retry_after_sets_the_next_attempt(svc: Any, site: RobotsServer) -> None:
    redis = svc.redis()
    site.status, site.retry_after = 503, "3"
    cache = RobotsCache(redis, fetch_http, error_ttl=100, local_seconds=0.0, redis_now=lambda: T0)
    assert cache.lookup(site.url("/x")) is None
    assert float(redis.hget(keys.robots_down(HOST, f"{HOST}:{site.port}"), "retry_at")) == T0 + 3


def test_a_claim_is_one_call_and_renewed_only_by_its_holder(svc: Any, site: RobotsServer) -> None:
    redis = svc.redis()
    lock = keys.robots_lock(HOST, f"{HOST}:{site.port}")
    clock = ManualClock(T0)  # when the claims are renewed; the lock's TTL runs in Redis (lowered by pass_time)
    mine, other = RobotsCache(redis, lock_seconds=LOCK, clock=clock), RobotsCache(redis, lock_seconds=LOCK)
    assert mine.claim(site.url()) and not other.claim(site.url())
    assert mine.state(site.url()) == "pending"  # its own claim: it fetches already
    assert LOCK_MS - 1000 < redis.pttl(lock) <= LOCK_MS

    def pass_time(seconds: float) -> int:
        """``seconds`` go by for the claims' clock and for the lock's TTL alike; the TTL left."""
        clock.advance(seconds)
        redis.pexpire(lock, redis.pttl(lock) - int(seconds * 1000))
        return redis.pttl(lock)

    for _ in range(4):  # four renew periods, longer than the claim's TTL: it never lapses
        left = pass_time(LOCK / 6)
        assert mine.renew_claims() == [] and redis.pttl(lock) <= left  # not a third yet: not renewed (no call)
        pass_time(LOCK / 6)
        assert mine.renew_claims() == [] and redis.pttl(lock) > LOCK_MS - 1000  # a third: back to the full TTL
        assert not other.claim(site.url())
    assert other.renew_claims() == []  # it holds nothing
    mine.store(site.url(), "User-agent: *\nDisallow: /x\n")
    assert not redis.exists(lock) and len(mine.claims) == 0
    assert other.claim(site.url()) is False  # stored: nothing to claim, in the same call
    assert other.allowed(site.url("/x"), AGENT) is False


def test_a_lost_claim_is_reported(svc: Any, site: RobotsServer) -> None:
    redis = svc.redis()
    clock = ManualClock(T0)
    mine = RobotsCache(redis, lock_seconds=LOCK, clock=clock)
    assert mine.claim(site.url())
    redis.delete(keys.robots_lock(HOST, f"{HOST}:{site.port}"))  # expired, or taken over, while the fetch ran
    assert mine.renew_claims() == [] and len(mine.claims) == 1  # not due yet: not asked
    clock.advance(LOCK / 3)
    assert mine.renew_claims() == [site.url()] and len(mine.claims) == 0
