"""The demo web answers like real sites do, deterministically, and plain Scrapy crawls it by name."""

import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from deploy.demoweb import build_sites, fetch, start_demoweb, stop_demoweb
from deploy.demoweb.router import STATS_PATH, Router
from messaging.hostmap import HostMap, parse_hosts
from spiders.resolver import HostMapResolver

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
NEWS, CHINA, BLOG, TRAP = "news.fleet.test", "china.fleet.test", "blog.fleet.test", "trap.fleet.test"
CRAWL_TIMEOUT = 120  # seconds for the Scrapy subprocess; the crawl itself takes a few

# A spider as a Scrapy user would write it: from the home page, follow list pages and articles; one item per
# article, with the address the response came from.
DEMOSITE_SPIDER = '''
import re
from urllib.parse import urlparse

import scrapy


class DemoSiteSpider(scrapy.Spider):
    name = "demosite"

    def __init__(self, url, list_pattern, article_pattern, **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [url]
        self.allowed_domains = [urlparse(url).hostname]
        self.list_re, self.article_re = re.compile(list_pattern), re.compile(article_pattern)

    def parse(self, response):
        if self.article_re.match(urlparse(response.url).path):
            title = response.css("h1::text").get()
            yield {"url": response.url, "ip": str(response.ip_address), "title": title}
            return
        for href in response.css("a::attr(href)").getall():
            path = urlparse(response.urljoin(href)).path
            if self.list_re.match(path) or self.article_re.match(path):
                yield response.follow(href, self.parse)
'''


def get(demoweb, name, path):
    """(status, headers, body) of ``path`` on a demo site, straight to its address (no redirects followed)."""
    return fetch(demoweb["sites"][name], demoweb["port"], name, path)


def site_model(demoweb, name):
    """The site as the server generates it (same seed, same page count)."""
    manifest = demoweb["manifest"]
    return next(site for site in build_sites(manifest["pages"], manifest["seed"]) if site.name == name)


def path_of(url):
    return re.sub(r"^http://[^/]+", "", url)


def test_hosts_file_maps_every_site_to_its_own_loopback_address(demoweb):
    names = parse_hosts(Path(demoweb["hosts_file"]).read_text())
    assert names == demoweb["sites"]
    assert len(set(names.values())) == len(names) >= 4
    assert all(ip.startswith("127.0.0.") for ip in names.values())
    resolver = HostMapResolver(reactor=None, cache_size=0, timeout=1.0,
                               hostmap=HostMap.from_file(demoweb["hosts_file"]))
    answers = []
    resolver.getHostByName("NEWS.fleet.test.").addCallback(answers.append)
    assert answers == [demoweb["sites"][NEWS]]  # answered from the map, synchronously


def test_robots_txt(demoweb):
    for name, site in demoweb["manifest"]["sites"].items():
        status, headers, body = get(demoweb, name, "/robots.txt")
        text = body.decode()
        assert status == 200 and headers["content-type"].startswith("text/plain")
        assert "User-agent: *\nDisallow: /private/\n" in text
        assert f"Sitemap: {site['sitemap']}\n" in text
        assert ("Crawl-delay: 2\n" in text) == (name == BLOG)
        assert get(demoweb, name, "/private/login")[0] == 200  # disallowed, not missing


def test_sitemaps_list_every_article(demoweb):
    for name, site in demoweb["manifest"]["sites"].items():
        status, _, index = get(demoweb, name, "/sitemap.xml")
        assert status == 200 and b"<sitemapindex" in index
        locs = []
        for chunk in re.findall(r"<loc>([^<]+)</loc>", index.decode()):
            status, _, body = get(demoweb, name, path_of(chunk))
            assert status == 200
            locs += re.findall(r"<loc>([^<]+)</loc>", body.decode())
        assert len(set(locs)) == len(locs) == site["articles"]
        assert all(re.match(site["article_pattern"], path_of(loc)) for loc in locs)
        assert all(loc.startswith(site["url"]) for loc in locs)


def test_redirects_lead_to_pages(demoweb):
    news = site_model(demoweb, NEWS)
    url = demoweb["urls"][NEWS]
    cases = {"/latest": (302, news.list_path("world")), "/old/3.html": (301, news.article_path(3)),
             "/index.html": (301, "/"), "/world": (301, "/world/")}
    for path, (code, target) in cases.items():
        status, headers, _ = get(demoweb, NEWS, path)
        assert (status, headers["location"]) == (code, url + target.lstrip("/")), path
        assert get(demoweb, NEWS, target)[0] == 200


def test_errors_and_missing_pages(demoweb):
    news = site_model(demoweb, NEWS)
    assert get(demoweb, NEWS, "/no/such/page.html")[0] == 404
    assert get(demoweb, NEWS, news.article_path(news.articles))[0] == 404  # a deleted story, still linked
    assert get(demoweb, NEWS, "/search?q=fleet")[0] == 500
    assert get(demoweb, NEWS, "/calendar/2024/02/30/")[0] == 404
    answers = json.loads(get(demoweb, NEWS, STATS_PATH)[2])[NEWS]["status"]  # the server's own count
    assert answers["404"] >= 3 and answers["500"] >= 1


def test_chinese_site_is_served_in_gbk(demoweb):
    china = site_model(demoweb, CHINA)
    status, headers, body = get(demoweb, CHINA, china.article_path(7))
    assert status == 200 and headers["content-type"] == "text/html; charset=gbk"
    with pytest.raises(UnicodeDecodeError):
        body.decode("utf-8")
    text = body.decode("gbk")
    assert 'content="text/html; charset=gbk"' in text
    title = re.search(r'<h1 class="main-title">([^<]+)</h1>', text).group(1)
    assert title == china.headline(7).title and re.search(r"[\u4e00-\u9fff]{6}", title)


def test_calendar_is_an_endless_trap(demoweb):
    path = path_of(demoweb["manifest"]["sites"][TRAP]["calendar"])
    status, _, home = get(demoweb, TRAP, "/")
    assert status == 200 and f'href="{path}"'.encode() in home
    seen = []
    for _ in range(40):
        status, _, body = get(demoweb, TRAP, path)
        assert status == 200
        seen.append(path)
        path = re.search(r'class="next" href="([^"]+)"', body.decode()).group(1)
    assert len(set(seen)) == len(seen) and seen == sorted(seen)
    _, _, last_day = get(demoweb, TRAP, "/calendar/9999/12/31/")
    assert b'class="next" href="/calendar/10000/01/01/"' in last_day  # even past year 9999
    assert get(demoweb, TRAP, "/calendar/10000/01/01/")[0] == 200


def test_slow_page_does_not_block_the_server(demoweb):
    delay = demoweb["slow_seconds"]
    with ThreadPoolExecutor(max_workers=1) as pool:
        started = time.monotonic()
        slow = pool.submit(get, demoweb, NEWS, "/live/")
        assert get(demoweb, NEWS, "/robots.txt")[0] == 200
        # ordering, not speed: a server that served one request at a time would have answered the slow one first
        assert not slow.done(), "the fast page waited for the slow one"
        assert slow.result(timeout=delay + 10)[0] == 200
        slow_seconds = time.monotonic() - started
    assert slow_seconds >= delay - 0.05  # the server's own delay: a lower bound, whatever the load


def test_pages_are_deterministic(demoweb):
    """The same seed and page count give the same pages: in another process, and in static mode."""
    manifest = demoweb["manifest"]
    news = site_model(demoweb, NEWS)
    router = Router(build_sites(manifest["pages"], manifest["seed"]), port=demoweb["port"],
                    pages=manifest["pages"], seed=manifest["seed"])
    paths = ["/", news.list_path("politics", 2), news.article_path(11), "/sitemaps/articles-1.xml"]
    served = {path: get(demoweb, NEWS, path)[2] for path in paths}
    assert served == {path: router.route(news, path, {}).body for path in paths}
    assert manifest["sites"][NEWS]["articles"] == manifest["pages"]
    assert manifest["sites"][NEWS]["list_pages"] == {"world": 2, "politics": 2, "business": 2, "tech": 2}

    run_dir = demoweb["run_dir"] / "static"
    static = start_demoweb(run_dir, pages=manifest["pages"], static=True, seed=manifest["seed"])
    try:
        assert static["static"] is True
        _, _, body = fetch(static["sites"][NEWS], static["port"], NEWS, "/_demoweb/manifest.json")
        static_manifest = json.loads(body)
        for name, site in manifest["sites"].items():
            assert static_manifest["sites"][name]["articles"] == site["articles"]
            assert static_manifest["sites"][name]["list_pages"] == site["list_pages"]
        for path, body in served.items():
            static_body = fetch(static["sites"][NEWS], static["port"], NEWS, path)[2]
            # Absolute links (canonical, sitemaps) carry each server's own port.
            assert static_body.replace(f":{static['port']}/".encode(), f":{demoweb['port']}/".encode()) == body
    finally:
        stop_demoweb(run_dir)


def test_plain_scrapy_crawls_a_site_by_name(demoweb, tmp_path):
    site = demoweb["manifest"]["sites"][NEWS]
    news = site_model(demoweb, NEWS)
    spider, items, log = tmp_path / "demosite.py", tmp_path / "items.jsonl", tmp_path / "scrapy.log"
    spider.write_text(DEMOSITE_SPIDER)
    env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "spiders.settings", "CRAWLFLEET_RUN_DIR": str(tmp_path),
           "CRAWLFLEET_HOSTS_FILE": demoweb["hosts_file"]}
    argv = [sys.executable, "-m", "scrapy", "runspider", str(spider), "-O", str(items),
            "-a", f"url={site['url']}", "-a", f"list_pattern={site['list_pattern']}",
            "-a", f"article_pattern={site['article_pattern']}", "-s", f"LOG_FILE={log}",
            # plain Scrapy with the project's resolver: without the fleet's add-on, its own scheduler, dupefilter
            # and robots.txt, none of the fleet's parts
            "-s", "ADDONS={}", "-s", "ROBOTSTXT_OBEY=True"]
    result = subprocess.run(argv, cwd=REPO, env=env, timeout=CRAWL_TIMEOUT, capture_output=True, text=True)
    log_text = log.read_text() if log.exists() else ""
    assert result.returncode == 0, result.stderr[-3000:] + log_text[-3000:]

    crawled = [json.loads(line) for line in items.read_text().splitlines()]
    expected = {site["url"] + news.article_path(article_id)[1:] for article_id in range(site["articles"])}
    assert sorted(item["url"] for item in crawled) == sorted(expected)
    assert {item["ip"] for item in crawled} == {site["ip"]}
    assert all(item["title"] for item in crawled)
    assert "'robotstxt/request_count': 1" in log_text  # robots.txt was fetched (and obeyed) through the name


def test_a_second_demo_web_on_its_own_address_range_starts_beside_the_first(demoweb, tmp_path):
    from deploy.demoweb import DemoWebError

    second = start_demoweb(tmp_path / "second", pages=5, first_ip="127.0.1.11")  # the session's runs meanwhile
    try:
        assert second["running"] and second["sites"][NEWS] == "127.0.1.11"
        assert set(second["sites"].values()).isdisjoint(demoweb["sites"].values())
        hosts = parse_hosts(Path(second["hosts_file"]).read_text())
        assert hosts[NEWS] == "127.0.1.11" and hosts["apps.fleet.test"] == "127.0.1.25"
        status, _, body = fetch("127.0.1.11", second["port"], NEWS, "/robots.txt")
        assert status == 200 and b"User-agent" in body
        status, _, _ = fetch(demoweb["sites"][NEWS], demoweb["port"], NEWS, "/robots.txt")
        assert status == 200  # the first one still answers
    finally:
        stop_demoweb(tmp_path / "second")
    with pytest.raises(DemoWebError, match="must all be loopback"):
        start_demoweb(tmp_path / "third", pages=5, first_ip="10.0.0.1")
