"""The Scrapy dupefilter on the Bloom filter, against a real Redis (spiders/dupefilter.py, redirect marking)."""

import json
import subprocess
import sys
import textwrap

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from frontier.bloom import BloomSpec
from frontier.bloom.filter import stored_spec
from messaging import keys
from messaging.settings import load
from messaging.stats import Stats
from spiders.dupefilter import BloomDupeFilter
from spiders.middlewares.redirect_dedup import RedirectDedupMiddleware

pytestmark = pytest.mark.e2e


def _crawler(cf, **overrides):
    settings = {"DUPEFILTER_CLASS": "spiders.dupefilter.BloomDupeFilter", **overrides}
    return get_crawler(settings_dict=settings)


@pytest.fixture
def dupefilter(cf, monkeypatch):
    for name, value in cf.env.items():
        if name.startswith("CRAWLFLEET_"):
            monkeypatch.setenv(name, value)
    crawler = _crawler(cf)
    df = BloomDupeFilter.from_crawler(crawler)
    df.open()
    yield df, crawler
    df.close("finished")


def test_request_seen_once_per_crawl(dupefilter):
    df, crawler = dupefilter
    first = Request("http://shop.test/item?b=2&a=1", meta={"crawlid": "c1"})
    again = Request("HTTP://SHOP.TEST:80/item?a=1&b=2#reviews", meta={"crawlid": "c1"})
    other_crawl = Request("http://shop.test/item?a=1&b=2", meta={"crawlid": "c2"})
    assert df.request_seen(first) is False
    assert df.request_seen(again) is True
    assert df.request_seen(other_crawl) is False  # per-crawl scope: another crawl has its own filter
    assert df.request_seen(Request("http://shop.test/item?a=1&b=2")) is False  # no crawl id: the global filter
    assert df.request_seen(Request("http://shop.test/item?a=1&b=2", method="POST", body=b"q=1",
                                   meta={"crawlid": "c1"})) is False
    assert crawler.stats.get_value("dupefilter/new") == 4
    assert crawler.stats.get_value("dupefilter/duplicate") == 1


def test_batch_api_counts_and_keeps_order(dupefilter, cf):
    df, crawler = dupefilter
    links = [Request(f"http://news.test/story/{i}", meta={"crawlid": "c9"}) for i in range(50)]
    assert df.seen_batch(links[:30]) == [False] * 30
    assert df.seen_batch(links) == [True] * 30 + [False] * 20
    assert [r.url for r in df.filter_new([*links[45:], Request("http://news.test/new", meta={"crawlid": "c9"})])] \
        == ["http://news.test/new"]
    counters = Stats(cf.redis(), "crawler")
    assert counters.value("dupefilter:new", "lifetime") == 51
    assert counters.value("dupefilter:duplicate", "lifetime") == 35
    assert crawler.stats.get_value("dupefilter/duplicate") == 35


def test_per_crawl_filters_expire_and_global_ones_do_not(dupefilter, cf):
    df, _ = dupefilter
    df.seen_batch([Request("http://a.test/1", meta={"crawlid": "ttl"}), Request("http://a.test/1")])
    redis = cf.redis()
    crawl_keys = df.bloom("crawl:ttl").key_names()
    assert len(crawl_keys) > 2
    assert all(0 < redis.ttl(key) <= load(cf.env).bloom_crawl_ttl for key in crawl_keys if redis.exists(key))
    assert redis.ttl(keys.bloom_meta("global")) == -1
    spec = stored_spec(redis, "crawl:ttl", BloomSpec(capacity=1))
    assert spec.capacity == load(cf.env).bloom_crawl_capacity


def test_global_scope_shares_one_filter(cf, monkeypatch):
    for name, value in cf.env.items():
        if name.startswith("CRAWLFLEET_"):
            monkeypatch.setenv(name, value)
    df = BloomDupeFilter.from_crawler(_crawler(cf, CRAWLFLEET_BLOOM_NAMESPACE="global", CRAWLFLEET_BLOOM_SHARDS=4))
    assert df.bloom("global").spec.shards == 4
    assert df.request_seen(Request("http://a.test/x", meta={"crawlid": "one"})) is False
    assert df.request_seen(Request("http://a.test/x", meta={"crawlid": "two"})) is True
    df.close()


def test_redirect_middleware_marks_the_final_url(dupefilter, cf):
    df, crawler = dupefilter
    middleware = RedirectDedupMiddleware.from_crawler(crawler)
    meta = {"crawlid": "r1", "redirect_urls": ["http://old.test/page"]}
    request = Request("https://new.test/page", meta=meta)
    response = HtmlResponse("https://new.test/page", body=b"<html></html>", request=request)
    assert middleware.process_response(request, response) is response
    assert df.request_seen(Request("https://new.test/page", meta={"crawlid": "r1"})) is True
    assert df.request_seen(Request("http://old.test/page", meta={"crawlid": "r1"})) is True
    plain = Request("https://plain.test/", meta={"crawlid": "r1"})
    middleware.process_response(plain, HtmlResponse("https://plain.test/", body=b"", request=plain))
    assert df.request_seen(Request("https://plain.test/", meta={"crawlid": "r1"})) is False  # not a redirect
    assert Stats(cf.redis(), "crawler").value("dupefilter:redirect", "lifetime") == 2


CRAWL = textwrap.dedent('''
    import json, sys, threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    import scrapy
    from scrapy.crawler import CrawlerProcess

    PAGES = {
        "/": '<a href="/a?y=2&x=1">a</a> <a href="/a?x=1&y=2#top">a again</a> <a href="/jump">jump</a>'
             ' <a href="/final">final</a> <a href="/b">b</a>',
        "/a": '<a href="/b">b</a> <a href="/">home</a>',
        "/b": '<a href="/a?x=1&y=2">a</a>',
        "/final": '<a href="/">home</a>',
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/jump":
                self.send_response(302); self.send_header("Location", "/final"); self.end_headers(); return
            body = PAGES.get(self.path.split("?")[0], "").encode()
            self.send_response(200); self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    fetched = []

    class Walk(scrapy.Spider):
        name = "walk"
        async def start(self):
            yield scrapy.Request(base + "/", meta={"crawlid": "walk"})
        def parse(self, response):
            fetched.append(response.url)
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, meta={"crawlid": "walk"})

    process = CrawlerProcess({
        "DUPEFILTER_CLASS": "spiders.dupefilter.BloomDupeFilter",
        "DOWNLOADER_MIDDLEWARES": {"spiders.middlewares.redirect_dedup.RedirectDedupMiddleware": 590},
        "LOG_LEVEL": "WARNING", "ROBOTSTXT_OBEY": False, "TELNETCONSOLE_ENABLED": False,
        "CONCURRENT_REQUESTS": 1,
    })
    crawler = process.create_crawler(Walk)
    process.crawl(crawler)
    process.start()
    print(json.dumps({"fetched": fetched, "stats": {k: v for k, v in crawler.stats.get_stats().items()
                                                    if k.startswith("dupefilter")}, "base": base}))
''')


def test_a_real_scrapy_crawl_fetches_each_page_once(cf):
    done = subprocess.run([sys.executable, "-c", CRAWL], env=cf.env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    paths = sorted(url.replace(outcome["base"], "") for url in outcome["fetched"])
    assert paths == ["/", "/a?y=2&x=1", "/b", "/final"], outcome  # /a once for 3 spellings; /final once
    assert outcome["stats"]["dupefilter/filtered"] >= 4
    assert outcome["stats"]["dupefilter/new"] == 5  # /, /a, /jump, /final, /b
