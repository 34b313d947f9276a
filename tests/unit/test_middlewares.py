"""The worker's downloader middlewares and BufferedStats, with fakes instead of Redis."""

from __future__ import annotations

import asyncio
import codecs
import logging
import random
import threading

import pytest
from scrapy import Request, Spider
from scrapy.http import HtmlResponse, Response, TextResponse, XmlResponse
from scrapy.utils.test import get_crawler
from twisted.internet.error import ConnectionRefusedError as TxConnectionRefused

from messaging.stats import BufferedStats
from spiders import signals as fleet_signals
from spiders.middlewares.adaptive import FLUSH_SECONDS, DownloadSampleMiddleware
from spiders.middlewares.decode import DecodeMiddleware
from spiders.middlewares.retry_after import RetryAfterMiddleware
from spiders.middlewares.status import HttpStatusCounterMiddleware
from spiders.middlewares.useragent import BUNDLED, RotatingUserAgentMiddleware, read_user_agents

pytestmark = pytest.mark.unit

CHINESE = "中文网页正文提取，基于行块分布函数。今天天气很好，我们去公园散步。" * 10


# --- BufferedStats -----------------------------------------------------------------------------------------------
class FakeStats:
    module = "fake"

    def __init__(self) -> None:
        self.sent: list[dict[str, int]] = []
        self.failing = False
        self.called = threading.Event()

    def incr_many(self, counts):
        self.called.set()
        if self.failing:
            raise ConnectionError("redis is down")
        self.sent.append(dict(counts))


def test_buffered_stats_batches_counts_into_one_call():
    fake = FakeStats()
    stats = BufferedStats(fake, interval=3600)  # the thread stays asleep: flushes are explicit here
    stats.incr("list:200")
    stats.incr("list:200", 2)
    stats.incr("list:404")
    stats.incr("list:500", 0)
    assert fake.sent == []  # incr never talks to Redis
    assert stats.flush()
    assert fake.sent == [{"list:200": 3, "list:404": 1}]
    assert stats.flush() and len(fake.sent) == 1  # nothing pending: no call
    stats.close()


def test_buffered_stats_keeps_counts_when_a_flush_fails_and_logs_state_changes_once(caplog):
    fake = FakeStats()
    stats = BufferedStats(fake, interval=3600)
    fake.failing = True
    with caplog.at_level(logging.INFO, logger="messaging.stats"):
        stats.incr("list:200")
        assert not stats.flush()
        stats.incr("list:200")
        assert not stats.flush()
        assert stats.pending() == {"list:200": 2}
        fake.failing = False
        assert stats.flush()
        stats.close()
    assert fake.sent == [{"list:200": 2}]
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 2, lines  # one when it broke, one when it came back
    assert "writing to Redis" in lines[0] and "failing" in lines[0] and "works again" in lines[1]


def test_buffered_stats_thread_flushes_and_close_sends_the_rest():
    fake = FakeStats()
    stats = BufferedStats(fake, interval=0.01)
    stats.incr("a")
    assert fake.called.wait(5), "the flush thread never ran"
    stats.incr("b", 5)
    stats.close()
    total: dict[str, int] = {}
    for batch in fake.sent:
        for plugin, amount in batch.items():
            total[plugin] = total.get(plugin, 0) + amount
    assert total == {"a": 1, "b": 5}
    assert stats.pending() == {}


def test_buffered_stats_counts_from_many_threads_without_losing_any():
    fake = FakeStats()
    stats = BufferedStats(fake, interval=3600)
    threads = [threading.Thread(target=lambda: [stats.incr("x") for _ in range(1000)]) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stats.close()
    assert fake.sent == [{"x": 4000}]


# --- User-Agent --------------------------------------------------------------------------------------------------
def test_bundled_user_agents_are_real_browsers():
    agents = read_user_agents(BUNDLED)
    assert 25 <= len(agents) <= 40
    assert all(agent.startswith("Mozilla/5.0 (") for agent in agents)
    for family in ("Chrome/", "Firefox/", "Edg/", "Version/", "Android", "iPhone", "Windows", "Macintosh", "Linux"):
        assert any(family in agent for agent in agents), family


def test_user_agent_rotates_and_keeps_an_existing_header():
    middleware = RotatingUserAgentMiddleware(["UA-1", "UA-2", "UA-3"], rng=random.Random(7))
    seen = set()
    for i in range(60):
        request = Request(f"http://a.fleet.test/{i}")
        assert middleware.process_request(request) is None
        seen.add(request.headers[b"User-Agent"].decode())
    assert seen == {"UA-1", "UA-2", "UA-3"}
    own = Request("http://a.fleet.test/", headers={"User-Agent": "mine"})
    middleware.process_request(own)
    assert own.headers.getlist(b"User-Agent") == [b"mine"]


def test_user_agents_from_settings_list_file_or_bundle(tmp_path):
    assert RotatingUserAgentMiddleware.from_crawler(
        get_crawler(settings_dict={"USER_AGENTS": ["A", "B"]})).user_agents == ["A", "B"]
    listing = tmp_path / "agents.txt"
    listing.write_text("# mine\nAgent/1\n\n  Agent/2  \n")
    assert RotatingUserAgentMiddleware.from_crawler(
        get_crawler(settings_dict={"USER_AGENTS_FILE": str(listing)})).user_agents == ["Agent/1", "Agent/2"]
    assert RotatingUserAgentMiddleware.from_crawler(get_crawler()).user_agents == read_user_agents(BUNDLED)
    with pytest.raises(ValueError):
        RotatingUserAgentMiddleware([])


# --- decoding ----------------------------------------------------------------------------------------------------
def decode(response: Response) -> Response:
    return DecodeMiddleware().process_response(response.request, response)


def html_response(body: bytes, content_type: str | None = "text/html", cls: type[Response] = HtmlResponse,
                  url: str = "http://a.fleet.test/p") -> Response:
    headers = {"Content-Type": content_type} if content_type else {}
    return cls(url, body=body, headers=headers, request=Request(url))


def test_gbk_page_behind_a_lying_utf8_header_comes_out_right():
    page = f"<html><head><meta charset=utf-8><title>标题</title></head><body><p>{CHINESE}</p></body></html>"
    response = html_response(page.encode("gbk"), "text/html; charset=utf-8")
    decoded = decode(response)
    assert isinstance(decoded, HtmlResponse)
    assert decoded.encoding == "utf-8" and decoded.body == page.encode("utf-8")
    assert decoded.css("title::text").get() == "标题"
    assert decoded.meta["page_encoding"] == response.request.meta["page_encoding"] == "gb18030"
    assert decoded.headers[b"Content-Type"] == b"text/html; charset=utf-8"
    assert decoded.request is response.request and decoded.url == response.url and decoded.status == 200


def test_gb2312_declared_page_is_read_as_gb18030():
    page = f"<html><head><meta charset=gb2312></head><body>{CHINESE}朱镕基</body></html>"  # 镕 is not in GB2312
    decoded = decode(html_response(page.encode("gb18030"), "text/html"))
    assert "朱镕基" in decoded.text and decoded.meta["page_encoding"] == "gb18030"


def test_bom_wins_over_the_header():
    page = f"<html><body>{CHINESE}</body></html>"
    decoded = decode(html_response(codecs.BOM_UTF8 + page.encode("utf-8"), "text/html; charset=iso-8859-1"))
    assert decoded.text == page and decoded.meta["page_encoding"] == "utf-8"
    utf16 = decode(html_response(codecs.BOM_UTF16_LE + page.encode("utf-16-le"), "text/html"))
    assert utf16.text == page and utf16.body == page.encode("utf-8")


def test_broken_bytes_become_replacement_characters_not_exceptions():
    body = "<html><body>好的".encode() + b"\xff\xfe\xfd\x80" + "结束</body></html>".encode()
    decoded = decode(html_response(body, "text/html; charset=utf-8"))
    assert decoded.text.startswith("<html><body>")
    assert "\ufffd" in decoded.text or decoded.meta["page_encoding"] != "utf-8"
    assert decode(html_response(b"", "text/html")).text == ""


def test_html_is_sniffed_in_text_responses_and_other_types_pass_unchanged():
    words = "Le café est très bon à Montréal, déjà célèbre pour ses crêpes et ses pâtisseries. " * 5
    body = f"<!DOCTYPE html><html><body><p>{words}</p></body></html>".encode()
    decoded = decode(html_response(body, "text/plain", cls=TextResponse))
    assert isinstance(decoded, HtmlResponse) and words in decoded.text
    assert decoded.headers[b"Content-Type"] == b"text/html; charset=utf-8"
    for response in (
        html_response(b'{"a": "<html>"}', "application/json", cls=TextResponse),
        html_response(b"<?xml version='1.0'?><urlset></urlset>", "application/xml", cls=XmlResponse),
        html_response(b"\x89PNG\r\n\x1a\n", "image/png", cls=Response),
        html_response(b"plain words", "text/plain", cls=TextResponse),
    ):
        assert decode(response) is response
        assert "page_encoding" not in response.request.meta


# --- Retry-After -------------------------------------------------------------------------------------------------
class FakeBlocker:
    def __init__(self, failing: bool = False) -> None:
        self.blocks: list[tuple[str, float]] = []
        self.failing = failing

    def block(self, domain: str, seconds: float) -> float:
        if self.failing:
            raise ConnectionError("redis is down")
        self.blocks.append((domain, seconds))
        return 0.0


async def run_here(function, *args):  # the test's stand-in for deferToThread
    return function(*args)


def retry_after(blocker=None, **options) -> RetryAfterMiddleware:
    options = {"default": 60.0, "maximum": 600.0, "times": 3, "monotonic": lambda: 1000.0,
               "wall_clock": lambda: 1_800_000_000.0, "run": run_here, **options}
    return RetryAfterMiddleware(blocker or FakeBlocker(), **options)


def respond(middleware, request, status, headers=None):
    response = Response(request.url, status=status, headers=headers or {}, request=request)
    return asyncio.run(middleware.process_response(request, response)), response


def test_429_blocks_the_domain_and_retries_not_before_the_retry_after():
    blocker = FakeBlocker()
    middleware = retry_after(blocker)
    request = Request("https://www.shop.example.co.uk/item/1", meta={"crawlid": "c1", "spider_type": "list"})
    retry, _ = respond(middleware, request, 429, {"Retry-After": "30"})
    assert isinstance(retry, Request) and retry is not request
    assert retry.url == request.url and retry.dont_filter
    assert retry.meta["not_before"] == 1030.0 and retry.meta["retry_after_times"] == 1
    assert retry.meta["crawlid"] == "c1" and "not_before" not in request.meta
    assert blocker.blocks == [("example.co.uk", 30.0)]  # the registrable domain


def test_retry_after_default_date_and_cap():
    blocker = FakeBlocker()
    middleware = retry_after(blocker)
    request = Request("http://b.fleet.test/")
    respond(middleware, request, 503)  # no header: the default
    # the wall clock says 1_800_000_000, which is Fri, 15 Jan 2027 08:00:00 GMT
    respond(middleware, request, 429, {"Retry-After": "Fri, 15 Jan 2027 08:00:45 GMT"})  # a date: 45 s from now
    respond(middleware, request, 503, {"Retry-After": "Fri, 15 Jan 2027 09:00:00 GMT"})  # an hour: the cap
    respond(middleware, request, 503, {"Retry-After": "Thu, 14 Jan 2027 08:00:00 GMT"})  # past: no wait
    respond(middleware, request, 429, {"Retry-After": "soon"})  # unreadable: the default
    respond(middleware, request, 429, {"Retry-After": "7200"})  # too long: the cap
    assert [seconds for _, seconds in blocker.blocks] == [60.0, 45.0, 600.0, 0.0, 60.0, 600.0]


def test_gives_up_after_the_configured_retries():
    middleware = retry_after(times=2)
    request = Request("http://c.fleet.test/")
    for attempt in (1, 2):
        request, _ = respond(middleware, request, 429)
        assert request.meta["retry_after_times"] == attempt
    final, response = respond(middleware, request, 429)
    assert final is response and final.status == 429
    assert request.meta["dont_retry"]  # Scrapy's RetryMiddleware leaves it alone too


def test_other_statuses_pass_and_a_redis_failure_still_retries(caplog):
    middleware = retry_after(FakeBlocker(failing=True))
    request = Request("http://d.fleet.test/")
    for status in (200, 404, 500):
        result, response = respond(middleware, request, status)
        assert result is response
    with caplog.at_level(logging.WARNING):
        retry, _ = respond(middleware, request, 503, {"Retry-After": "5"})
    assert isinstance(retry, Request) and retry.meta["not_before"] == 1005.0
    assert "could not block d.fleet.test" in caplog.text


def test_dont_retry_requests_block_but_are_not_retried():
    blocker = FakeBlocker()
    request = Request("http://e.fleet.test/", meta={"dont_retry": True})
    result, response = respond(retry_after(blocker), request, 429)
    assert result is response and blocker.blocks == [("e.fleet.test", 60.0)]


# --- status counting ---------------------------------------------------------------------------------------------
class FakeCounters:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.closed = False

    def incr(self, plugin: str, amount: int = 1) -> None:
        self.counts[plugin] = self.counts.get(plugin, 0) + amount

    def close(self) -> None:
        self.closed = True


def test_statuses_are_counted_by_spider_type_and_errors_too():
    from scrapy.exceptions import IgnoreRequest

    crawler = get_crawler(Spider)
    crawler.spider = Spider("universal")
    counters = FakeCounters()
    middleware = HttpStatusCounterMiddleware(counters, crawler)
    listed = Request("http://a.fleet.test/", meta={"spider_type": "list"})
    for status in (200, 200, 301, 404):
        response = Response(listed.url, status=status, request=listed)
        assert middleware.process_response(listed, response) is response
    plain = Request("http://a.fleet.test/other")  # no spider_type: the spider's name
    middleware.process_response(plain, Response(plain.url, status=503, request=plain))
    assert middleware.process_exception(listed, TxConnectionRefused()) is None
    assert middleware.process_exception(listed, IgnoreRequest("robots.txt")) is None  # not a download
    assert counters.counts == {"list:200": 2, "list:301": 1, "list:404": 1, "universal:503": 1, "list:error": 1}


# --- DownloadSampleMiddleware ------------------------------------------------------------------------------------
class Call:
    """A fake IDelayedCall: the test runs it."""

    def __init__(self, delay: float, function) -> None:
        self.delay, self.function, self.live = delay, function, True

    def active(self) -> bool:
        return self.live

    def cancel(self) -> None:
        self.live = False

    def run(self) -> None:
        self.live = False
        self.function()


def test_download_samples_go_out_in_one_signal_per_batch() -> None:
    crawler = get_crawler(Spider)
    sent: list[list[tuple[str, float, int, bool]]] = []
    crawler.signals.connect(lambda samples, **_: sent.append(samples), signal=fleet_signals.download_samples,
                            weak=False)
    calls: list[Call] = []

    def call_later(delay: float, function) -> Call:
        calls.append(Call(delay, function))
        return calls[-1]

    middleware = DownloadSampleMiddleware(crawler, call_later=call_later)
    for number, status in enumerate((200, 503, 200)):
        request = Request(f"https://a.test/{number}", meta={"download_latency": 0.5})
        middleware.process_response(request, Response(request.url, status=status))
    middleware.process_exception(Request("https://b.test/x"), TimeoutError())
    assert sent == [] and [call.delay for call in calls] == [FLUSH_SECONDS]  # one flush scheduled for the batch
    calls[0].run()
    assert sent == [[("a.test", 0.5, 200, False), ("a.test", 0.5, 503, True),  # per queue key (the domain here)
                     ("a.test", 0.5, 200, False), ("b.test", 0.0, 0, True)]]
    middleware.process_response(request, Response(request.url, status=200))
    assert len(calls) == 2  # the next batch
    middleware.flush()  # the spider closes: what is held goes now, the timer is cancelled
    assert len(sent) == 2 and sent[1] == [("a.test", 0.5, 200, False)] and not calls[1].live
    middleware.flush()
    assert len(sent) == 2  # nothing held, no signal
