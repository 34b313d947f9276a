"""The proxy pool's pure parts: proxies and their credentials, list pages, the chooser, the middleware's decisions."""

from __future__ import annotations

from typing import Any

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse, Response
from twisted.internet.error import ConnectionRefusedError as TxConnectionRefused

from messaging.settings import SETTINGS, load
from spiders.middlewares.proxy import FleetProxyMiddleware, meta_proxy_id
from spiders.proxies.chooser import LivePool, ProxyChooser
from spiders.proxies.collect import DEFAULT_RULE, build_rule, load_rule
from spiders.proxies.model import Proxy
from spiders.proxies.store import document_from_entry
from spiders.proxies.validator import proxy_authorization
from tests.plugins.proxies import LocalProxy, list_page_html

pytestmark = pytest.mark.unit


def proxy(n: int, **kwargs: Any) -> Proxy:
    return Proxy(f"10.0.0.{n}", 8000 + n, alive=True, **kwargs)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeStore:
    def __init__(self, proxies: list[Proxy]) -> None:
        self.live = proxies
        self.failures: list[dict[str, tuple[int, str]]] = []

    def record_failures(self, failures: dict[str, tuple[int, str]]) -> list[str]:
        self.failures.append(dict(failures))
        return []

    def proxies(self, live_only: bool = False) -> list[Proxy]:
        return list(self.live)


def pool_of(*proxies: Proxy, clock: FakeClock | None = None) -> LivePool:
    pool = LivePool(lambda: FakeStore(list(proxies)), refresh=1.0, cooldown=30.0, clock=clock or FakeClock())
    pool.set_live(proxies)
    return pool


# --- a proxy and its credentials ------------------------------------------------------------------------------------
def test_a_proxy_url_carries_quoted_credentials_that_nothing_else_shows() -> None:
    p = Proxy("10.1.2.3", 3128, user="ann", password="p@ss:w/rd", alive=True)
    assert p.url == "http://ann:p%40ss%3Aw%2Frd@10.1.2.3:3128"
    assert p.id == "10.1.2.3:3128" == str(p) and p.address == "10.1.2.3"
    assert "p@ss" not in repr(p) and "ann" not in repr(p)
    public = p.public()
    assert public["has_credentials"] and "p@ss" not in str(public) and "ann" not in str(public)
    assert proxy_authorization(p) == b"Basic YW5uOnBAc3M6dy9yZA=="  # base64("ann:p@ss:w/rd")
    assert proxy_authorization(proxy(1)) is None
    assert Proxy("10.1.2.3", 3128, exit_ip="198.51.100.7").address == "198.51.100.7"


def test_list_entries_become_pool_documents_or_nothing() -> None:
    doc = document_from_entry({"ip": " 1.2.3.4 ", "port": "8080", "type": "HTTPS", "speed": "0.3s", "location": "X"},
                              source="http://list/")
    assert doc == {"_id": "1.2.3.4:8080", "host": "1.2.3.4", "port": 8080, "scheme": "http", "user": "",
                   "password": "", "source": "http://list/", "type": "HTTPS", "speed": "0.3s", "location": "X"}
    assert document_from_entry({"ip": "Proxy.Example.NET", "port": 80})["_id"] == "proxy.example.net:80"
    for bad in ({"ip": "1.2.3.4"}, {"ip": "1.2.3.4", "port": "0"}, {"ip": "1.2.3.4", "port": "http"},
                {"ip": "not a host", "port": "80"}, {"port": "80"}):
        assert document_from_entry(bad) is None, bad


# --- list pages -------------------------------------------------------------------------------------------------------
def test_the_default_rule_reads_a_table_of_the_seed_columns() -> None:
    proxies = [LocalProxy("127.0.0.5", 3128, None), LocalProxy("127.0.0.6", 8080, None)]
    response = HtmlResponse("http://lists.test/free/", body=list_page_html(proxies).encode(), encoding="utf-8")
    result = build_rule(load_rule("")).parse_list(response)
    assert result.errors == []
    assert result.items == [
        {"ip": "127.0.0.5", "port": "3128", "location": "Loopback", "anonymity": "high", "type": "HTTP",
         "speed": "0.1s", "alive_time": "1 days"},
        {"ip": "127.0.0.6", "port": "8080", "location": "Loopback", "anonymity": "high", "type": "HTTP",
         "speed": "0.2s", "alive_time": "2 days"},
    ]


def test_a_rule_comes_as_json_or_from_a_file_and_may_follow_pages(tmp_path: Any) -> None:
    rule = {"list_from": "//li", "ip": "@data-ip", "port": "span", "next_page": "//a[@rel='next']"}
    path = tmp_path / "rule.json"
    path.write_text(__import__("json").dumps(rule))
    assert load_rule(f"@{path}") == rule == load_rule(__import__("json").dumps(rule))
    assert load_rule(None) == DEFAULT_RULE
    with pytest.raises(ValueError):
        load_rule('{"ip": "td[1]"}')
    body = b"<ul><li data-ip='10.0.0.1'><span>81</span></li></ul><a rel='next' href='/p2'>next</a>"
    result = build_rule(rule).parse_list(HtmlResponse("http://lists.test/p1", body=body, encoding="utf-8"))
    assert result.items == [{"ip": "10.0.0.1", "port": "81"}]
    assert [link.url for link in result.links] == ["http://lists.test/p2"]


# --- the chooser ------------------------------------------------------------------------------------------------------
def test_candidates_rotate_per_domain_and_skip_excluded_and_cooling_proxies() -> None:
    clock = FakeClock()
    chooser = ProxyChooser(pool_of(proxy(1), proxy(2), proxy(3), clock=clock))
    assert [chooser.candidates("a.test")[0].id for _ in range(2)] == ["10.0.0.1:8001"] * 2  # asking is not using
    first = [chooser.choose("a.test").id for _ in range(4)]
    assert first == ["10.0.0.1:8001", "10.0.0.2:8002", "10.0.0.3:8003", "10.0.0.1:8001"]
    chooser.used("a.test", proxy(3))  # the worker's politeness step took a batch through the third one
    assert chooser.candidates("a.test")[0].id == "10.0.0.1:8001"
    assert chooser.candidates("b.test")[0].id == "10.0.0.1:8001"  # each domain has its own turn
    assert [p.id for p in chooser.candidates("c.test", exclude={"10.0.0.1:8001"})] == ["10.0.0.2:8002",
                                                                                       "10.0.0.3:8003"]
    chooser.report_failure("10.0.0.2:8002", "ConnectionRefusedError")
    assert "10.0.0.2:8002" not in {p.id for p in chooser.candidates("a.test")}
    clock.now = 31.0  # the cooldown is over: it is back until the pool says otherwise
    assert "10.0.0.2:8002" in {p.id for p in chooser.candidates("a.test")}
    assert ProxyChooser(pool_of()).choose("a.test") is None


def test_failures_are_written_in_one_batch_per_round_and_kept_when_the_write_fails() -> None:
    store = FakeStore([proxy(1)])
    pool = LivePool(lambda: store, refresh=1.0)
    pool.report_failure("10.0.0.2:8002", "HTTP 403")
    pool.report_failure("10.0.0.2:8002", "TimeoutError")
    pool.sync()
    assert store.failures == [{"10.0.0.2:8002": (2, "TimeoutError")}]
    assert pool.loaded and [p.id for p in pool.live()] == ["10.0.0.1:8001"]

    def down(failures: Any) -> list[str]:
        raise OSError("mongo down")

    store.record_failures = down  # type: ignore[method-assign]
    pool.report_failure("10.0.0.1:8001", "HTTP 407")
    with pytest.raises(OSError):
        pool.sync()
    assert pool._failures == {"10.0.0.1:8001": (1, "HTTP 407")}


# --- the middleware ---------------------------------------------------------------------------------------------------
class Stats:
    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def inc_value(self, key: str, n: int = 1) -> None:
        self.values[key] = self.values.get(key, 0) + n


def middleware(*proxies: Proxy, types: tuple[str, ...] = ("list",), retries: int = 5) -> FleetProxyMiddleware:
    return FleetProxyMiddleware(ProxyChooser(pool_of(*proxies)), list(types), retries=retries,
                                exceptions=(TxConnectionRefused, TimeoutError), stats=Stats())


def run(coroutine: Any) -> Any:
    """Drive a coroutine that never really waits (the pool is loaded)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    raise AssertionError("the coroutine waited")


def request(url: str = "http://news.fleet.test/a.html", **meta: Any) -> Request:
    return Request(url, meta={"spider_type": "list", **meta})


def test_requests_of_the_configured_spider_types_get_a_proxy() -> None:
    mw = middleware(proxy(1), Proxy("10.0.0.9", 9000, user="u", password="secret", alive=True))
    req = request()
    run(mw.process_request(req))
    assert req.meta["proxy"] == "http://10.0.0.1:8001" and req.meta["proxy_id"] == "10.0.0.1:8001"
    other = request()
    run(mw.process_request(other))
    assert other.meta["proxy"] == "http://u:secret@10.0.0.9:9000" and other.meta["proxy_id"] == "10.0.0.9:9000"
    plain = request(spider_type="universal")
    run(mw.process_request(plain))
    assert "proxy" not in plain.meta
    forced = request(spider_type="universal", proxy_pool=True)
    run(mw.process_request(forced))
    assert forced.meta["proxy"]
    refused = request(proxy_pool=False)
    run(mw.process_request(refused))
    assert "proxy" not in refused.meta


def test_a_proxy_chosen_at_take_time_is_kept() -> None:
    mw = middleware(proxy(1), proxy(2))
    req = request(proxy="http://u:secret@10.0.0.2:8002")
    run(mw.process_request(req))
    assert req.meta["proxy"] == "http://u:secret@10.0.0.2:8002" and req.meta["proxy_id"] == "10.0.0.2:8002"
    assert meta_proxy_id(Request("http://x.test/", meta={"proxy": "http://10.0.0.3:81"})) == "10.0.0.3:81"


def test_a_failed_proxy_is_reported_and_the_request_goes_through_another() -> None:
    mw = middleware(proxy(1), proxy(2), proxy(3))
    req = request(proxy="http://10.0.0.1:8001")
    run(mw.process_request(req))
    retry = mw.process_exception(req, TxConnectionRefused())
    assert isinstance(retry, Request) and retry.dont_filter and retry.url == req.url
    assert retry.meta["proxy_tried"] == ["10.0.0.1:8001"] and retry.meta["proxy_id"] != "10.0.0.1:8001"
    assert mw.chooser.pool._failures == {"10.0.0.1:8001": (1, "ConnectionRefusedError")}
    banned = mw.process_response(retry, Response(retry.url, status=407, request=retry))
    assert isinstance(banned, Request) and len(banned.meta["proxy_tried"]) == 2
    assert banned.meta["proxy_id"] not in banned.meta["proxy_tried"]
    ok = Response(req.url, status=200, request=req)
    assert mw.process_response(req, ok) is ok
    assert mw.process_exception(req, ValueError("not a network error")) is None
    assert mw.stats.values == {"proxy/failures": 2, "proxy/retries": 2, "proxy/requests": 2}


def test_after_the_retries_scrapy_takes_over_and_without_proxies_requests_go_direct() -> None:
    mw = middleware(proxy(1), proxy(2), retries=1)
    req = request(proxy="http://10.0.0.1:8001", proxy_tried=["10.0.0.2:8002"])
    assert mw.process_exception(req, TimeoutError()) is None
    response = Response(req.url, status=403, request=req)
    assert mw.process_response(req, response) is response
    lonely = middleware(proxy(1))
    req = request(proxy="http://10.0.0.1:8001")
    retry = lonely.process_exception(req, TimeoutError())  # its only proxy cools down: the retry goes direct
    assert isinstance(retry, Request) and "proxy" not in retry.meta
    assert lonely.stats.values["proxy/direct"] == 1


def test_the_proxy_settings_are_declared() -> None:
    proxy_settings = {name for name, setting in SETTINGS.items() if setting.group == "proxy"}
    assert {"CRAWLFLEET_PROXY_TIMEOUT", "CRAWLFLEET_PROXY_MAX_FAILURES", "CRAWLFLEET_PROXY_SPIDER_TYPES",
            "CRAWLFLEET_PROXY_CHECK_CONCURRENCY", "CRAWLFLEET_PROXY_COLLECTION"} <= proxy_settings
    settings = load({"CRAWLFLEET_RUN_DIR": "/nonexistent"})
    assert settings["CRAWLFLEET_PROXY_TIMEOUT"] == 4.0 and settings["CRAWLFLEET_PROXY_MAX_FAILURES"] == 3
