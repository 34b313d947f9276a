"""The worker's downloader middlewares and BufferedStats against the real Redis, through Scrapy's middleware chain."""

from __future__ import annotations

import asyncio
import gzip
import json

import pytest
from scrapy import Request, Spider
from scrapy.core.downloader.middleware import DownloaderMiddlewareManager
from scrapy.http import HtmlResponse, Response
from scrapy.utils.test import get_crawler
from twisted.internet.error import TCPTimedOutError

from frontier.client import block_domain
from messaging import keys
from messaging.stats import BufferedStats, Stats
from spiders.middlewares.retry_after import DomainBlocker, RetryAfterMiddleware
from spiders.middlewares.status import HttpStatusCounterMiddleware

pytestmark = pytest.mark.e2e

CHINESE = "中文网页正文提取，基于行块分布函数。" * 20
MIDDLEWARES = {
    "scrapy.downloadermiddlewares.useragent.UserAgentMiddleware": None,
    "spiders.middlewares.useragent.RotatingUserAgentMiddleware": 500,
    "spiders.middlewares.retry_after.RetryAfterMiddleware": 560,
    "spiders.middlewares.decode.DecodeMiddleware": 585,
    "spiders.middlewares.status.HttpStatusCounterMiddleware": 860,
}


# A real crawl on the real reactor (the other tests call the middlewares without one): a local server answers
# /busy with a 429 once, then 200; /page is GBK behind a header that says UTF-8.
CRAWL = r"""
import json, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import scrapy
from scrapy.crawler import CrawlerProcess

PAGE = "<html><head><title>标题</title></head><body>" + "中文网页正文提取，基于行块分布函数。" * 20 + "</body></html>"
hits = {}

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        hits[self.path] = hits.get(self.path, 0) + 1
        if self.path == "/busy" and hits[self.path] == 1:
            self.send_response(429)
            self.send_header("Retry-After", "60")
            body = b"slow down"
        else:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            body = PAGE.encode("gbk")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
base = f"http://127.0.0.1:{server.server_port}"
items = []

class Probe(scrapy.Spider):
    name = "probe"

    async def start(self):
        for path in ("/busy", "/page"):
            yield scrapy.Request(base + path, meta={"spider_type": "list"})

    def parse(self, response):
        yield {"path": response.url[len(base):], "status": response.status, "title": response.css("title::text").get(),
               "encoding": response.meta.get("page_encoding"), "retries": response.meta.get("retry_after_times"),
               "agent": response.request.headers.get("User-Agent", b"").decode()}

process = CrawlerProcess({"DOWNLOADER_MIDDLEWARES": MIDDLEWARES, "ROBOTSTXT_OBEY": False, "LOG_LEVEL": "INFO",
                          "CRAWLFLEET_RETRY_AFTER_TIMES": 1, "TELNETCONSOLE_ENABLED": False})
crawler = process.create_crawler(Probe)
def keep(item):
    items.append(item)

crawler.signals.connect(keep, signal=scrapy.signals.item_scraped)
process.crawl(crawler)
process.start()
print("RESULT " + json.dumps(sorted(items, key=lambda item: item["path"]), ensure_ascii=False), flush=True)
"""


async def run_here(function, *args):  # no reactor in these tests: the thread hop is the unit tests' business
    return function(*args)


def test_buffered_stats_reach_redis_in_one_round_trip_per_flush(cf):
    redis = cf.redis()
    stats = Stats(redis, "crawler")
    buffered = BufferedStats(stats, interval=3600)
    buffered.incr("other:200")
    assert buffered.flush()  # the script is loaded now: what follows is the steady state
    trips = []  # a pipeline, or a command sent alone
    make_pipeline, execute = redis.pipeline, redis.execute_command
    redis.pipeline = lambda *a, **k: trips.append("pipeline") or make_pipeline(*a, **k)
    redis.execute_command = lambda *a, **k: trips.append(a[0]) or execute(*a, **k)
    for _ in range(5):
        buffered.incr("list:200")
    buffered.incr("list:404", 2)
    buffered.incr("universal:200")
    assert stats.value("list:200", 60) == 0  # nothing sent yet
    trips.clear()
    assert buffered.flush()
    assert len(trips) == 1, trips
    redis.pipeline, redis.execute_command = make_pipeline, execute
    assert stats.value("list:200", 60) == 5 and stats.value("list:200", "lifetime") == 5
    assert stats.value("list:404", 300) == 2 and stats.value("universal:200", 3600) == 1
    assert redis.exists(keys.stats_crawler("list", 404, 60))
    buffered.incr("list:200")
    buffered.close()  # the last counts go out on close
    assert stats.value("list:200", "lifetime") == 6


def test_buffered_stats_on_a_redis_cluster(cf_cluster):
    stats = Stats(cf_cluster.redis(), "crawler")
    buffered = BufferedStats(stats, interval=3600)
    buffered.incr("list:200", 3)
    buffered.incr("list:500")
    buffered.close()
    assert stats.value("list:200", 60) == 3 and stats.value("list:500", "lifetime") == 1


def test_buffered_stats_survive_redis_going_away(cf):
    import redis as redis_py

    class Switch:  # Stats on a server that refuses connections, then on the live one
        module = "crawler"

        def __init__(self, down: Stats, up: Stats) -> None:
            self.current, self.up = down, up

        def incr_many(self, counts):
            self.current.incr_many(counts)

    live = Stats(cf.redis(), "crawler")
    switch = Switch(Stats(redis_py.Redis(port=1, socket_connect_timeout=1), "crawler"), live)
    buffered = BufferedStats(switch, interval=3600)
    buffered.incr("list:200", 4)
    assert not buffered.flush()  # a real ConnectionError, caught
    assert buffered.pending() == {"list:200": 4}
    switch.current = live
    buffered.close()
    assert live.value("list:200", "lifetime") == 4


def test_block_lands_in_redis_with_the_retry_after_as_ttl(cf):
    redis = cf.redis()
    crawler = get_crawler(Spider, {"CRAWLFLEET_REDIS_URL": cf.settings.redis_url, "CRAWLFLEET_RETRY_AFTER_MAX": 300})
    middleware = RetryAfterMiddleware.from_crawler(crawler)
    middleware.run = run_here
    request = Request("http://www.shop.example.com/a")
    response = Response(request.url, status=429, headers={"Retry-After": "120"}, request=request)
    retry = asyncio.run(middleware.process_response(request, response))
    assert isinstance(retry, Request) and retry.meta["retry_after_times"] == 1
    block = keys.block("example.com")
    assert 110_000 < redis.pttl(block) <= 120_000
    seconds, micros = redis.time()
    assert int(redis.get(block)) / 1e6 == pytest.approx(seconds + micros / 1e6 + 120, abs=10)
    # a shorter block never shortens a longer one; a longer one extends it, up to the maximum
    DomainBlocker(redis).block("example.com", 5)
    assert redis.pttl(block) > 110_000
    asyncio.run(middleware.process_response(request, Response(request.url, status=503,
                                                               headers={"Retry-After": "86400"}, request=request)))
    assert 290_000 < redis.pttl(block) <= 300_000


def test_block_domain_is_the_block_of_the_politeness_step(cf):
    redis = cf.redis()
    until = block_domain(redis, "blocked.example", 30)
    seconds, micros = redis.time()
    assert until == pytest.approx(seconds + micros / 1e6 + 30, abs=5)
    assert int(redis.get(keys.block("blocked.example"))) / 1e6 == until
    # a block is only ever extended: a shorter one leaves the end where it was, a longer one moves it
    assert block_domain(redis, "blocked.example", 1) == until
    assert block_domain(redis, "blocked.example", 60) > until


def test_the_middleware_chain_counts_decodes_and_blocks(cf):
    redis = cf.redis()
    settings = {"CRAWLFLEET_REDIS_URL": cf.settings.redis_url, "DOWNLOADER_MIDDLEWARES": MIDDLEWARES}
    crawler = get_crawler(Spider, settings)
    crawler._apply_settings()
    crawler.spider = Spider.from_crawler(crawler, "universal")
    chain = DownloaderMiddlewareManager.from_crawler(crawler)
    found = {type(middleware): middleware for middleware in chain.middlewares}
    found[RetryAfterMiddleware].run = run_here
    counters = found[HttpStatusCounterMiddleware].counters
    try:
        check_chain(chain, redis)
    finally:
        counters.close()
    stats = Stats(redis, "crawler")
    assert {status: stats.value(f"list:{status}", 60) for status in (200, 301, 429, "error")} == {
        200: 1, 301: 1, 429: 1, "error": 1}
    assert redis.exists(keys.stats_crawler("list", 301, 60))


def check_chain(chain: DownloaderMiddlewareManager, redis) -> None:

    page = f"<html><head><meta charset=gb2312><title>标题</title></head><body>{CHINESE}</body></html>"

    async def gzipped_gbk(request):
        return HtmlResponse(request.url, request=request, body=gzip.compress(page.encode("gbk")),
                            headers={"Content-Type": "text/html; charset=utf-8", "Content-Encoding": "gzip"})

    async def moved(request):
        return Response(request.url, status=301, headers={"Location": "/new"}, request=request)

    async def too_many(request):
        return Response(request.url, status=429, headers={"Retry-After": "30"}, request=request)

    async def timed_out(request):
        raise TCPTimedOutError()

    def fetch(download, url):
        return asyncio.run(chain.download_async(download, Request(url, meta={"spider_type": "list"})))

    decoded = fetch(gzipped_gbk, "http://a.fleet.test/page")
    assert isinstance(decoded, HtmlResponse) and decoded.css("title::text").get() == "标题"
    assert decoded.meta["page_encoding"] == "gb18030" and decoded.encoding == "utf-8"
    assert b"Mozilla/5.0" in decoded.request.headers[b"User-Agent"]
    redirect = fetch(moved, "http://a.fleet.test/old")
    assert isinstance(redirect, Request) and redirect.url == "http://a.fleet.test/new"
    retry = fetch(too_many, "http://busy.fleet.test/x")
    assert isinstance(retry, Request) and retry.meta["retry_after_times"] == 1 and "not_before" in retry.meta
    assert 0 < redis.pttl(keys.block("busy.fleet.test")) <= 30_000
    failed = fetch(timed_out, "http://slow.fleet.test/")
    assert isinstance(failed, Request) and failed.meta["retry_times"] == 1  # Scrapy's RetryMiddleware retries it


def test_a_real_crawl_on_the_reactor(cf, procs):
    script = f"MIDDLEWARES = {MIDDLEWARES!r}\n{CRAWL}"
    proc = procs.python("-c", script, env=cf.env, name="probe-crawl")
    assert proc.wait(timeout=120) == 0, procs.log(proc)[-3000:]
    line = next(line for line in procs.log(proc).splitlines() if line.startswith("RESULT "))
    busy, page = json.loads(line[len("RESULT "):])
    assert busy["path"] == "/busy" and busy["status"] == 200 and busy["retries"] == 1
    assert page["title"] == "标题" and page["encoding"] == "gb18030"
    assert page["agent"].startswith("Mozilla/5.0")
    redis = cf.redis()
    assert 0 < redis.pttl(keys.block("127.0.0.1")) <= 60_000  # written from a thread, awaited by the coroutine
    stats = Stats(redis, "crawler")
    assert stats.value("list:200", "lifetime") == 2 and stats.value("list:429", "lifetime") == 1
