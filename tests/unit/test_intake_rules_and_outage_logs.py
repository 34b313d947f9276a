"""The intake and the monitors: one host rule, anchored patterns, request regexes, outage logging."""

from __future__ import annotations

import copy
import json
import logging
import threading

import pytest
import redis as redis_py

from deploy.procs import wait_for
from messaging import keys
from messaging.clock import ManualClock
from messaging.domains import InvalidDomain, domain_of
from messaging.redis_monitor.monitor import RedisMonitor
from messaging.redis_monitor.plugins.info import InfoPlugin
from messaging.settings import load
from messaging.validation import Rejected, load_schema, parse_request

pytestmark = pytest.mark.unit

CRAWL = {"userid": "alice", "crawlid": "news-1", "spider_type": "universal", "url": "http://news.example.com/",
         "rule": {"rules": [{"allow": "/article/", "extract": {"title": "//h1/text()"}}]}}


def crawl(**changes: object) -> dict:
    message = copy.deepcopy(CRAWL)
    message.update(changes)
    return message


def with_rule(allow: str | None = None, extract: str | None = None) -> dict:
    message = crawl()
    if allow is not None:
        message["rule"]["rules"][0]["allow"] = allow
    if extract is not None:
        message["rule"]["rules"][0]["extract"] = {"title": extract}
    return message


def rejection(message: dict) -> Rejected:
    with pytest.raises(Rejected) as caught:
        parse_request(json.dumps(message))
    return caught.value


# --- 1. one host rule, at intake and in the key builder ----------------------------------------------------------
@pytest.mark.parametrize("host", ["a{b}.com", "a}b.com", "a*b.com", "a\\b.com", "a^b.com", "a|b.com",
                                  "a%7bb%7d.com", "a..b.com", "x" * 64 + ".com"])
def test_a_host_the_key_builder_refuses_is_refused_at_intake(host):
    error = rejection(crawl(url=f"http://{host}/page"))
    assert error.path == "$.url" and "host" in error.message
    with pytest.raises(InvalidDomain):
        keys.queue("job", host)
    with pytest.raises(InvalidDomain):
        domain_of(f"http://{host}/page")
    from messaging.domains import host_problem  # the one rule both apply

    assert host_problem(host) is not None


@pytest.mark.parametrize("url", ["http://news.example.com/", "http://127.0.0.1:8080/", "http://[::1]:8080/x",
                                 "http://bücher.de/", "http://_dmarc.example.com/", "http://NEWS.Example.COM./"])
def test_hosts_that_work_today_still_pass_and_get_keys(url):
    assert parse_request(json.dumps(crawl(url=url))).data["url"] == url
    assert keys.queue("job", domain_of(url)).startswith("job:{")


# --- 4. anchored patterns: no trailing newline -------------------------------------------------------------------
@pytest.mark.parametrize(("message", "path"), [
    (crawl(crawlid="r5n-03012\n"), "$.crawlid"),
    (crawl(userid="alice\n"), "$.userid"),
    (crawl(uuid="q-1\n"), "$.uuid"),
    ({"action": "info", "userid": "alice", "crawlid": "c\n", "uuid": "q"}, "$.crawlid"),
    ({"action": "rate", "userid": "alice", "domain": "example.com\n", "rate": 5}, "$.domain"),
    (with_rule(extract=None) | {"rule": {"rules": [{"extract": {"title\n": "//h1"}}]}},
     "$.rule.rules[0].extract"),
])
def test_a_trailing_newline_is_refused(message, path):
    assert rejection(message).path == path


def test_every_schema_pattern_is_anchored_at_the_very_end():
    patterns = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                patterns.append(node["pattern"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for name in ("common.json", "crawl.json", "info.json", "rule-list.json", "rule-universal.json", "site.json",
                 "stats.json", "stop.json"):
        walk(load_schema(name))
    assert patterns
    for pattern in patterns:
        assert pattern.startswith("^") and pattern.endswith("$(?!\\n)"), pattern


# --- 5. regexes from requests -------------------------------------------------------------------------------------
def test_a_catastrophic_regex_runs_in_linear_time_in_the_worker():
    from messaging.regexes import compile_user_regex

    request = parse_request(json.dumps(with_rule(allow="(a+)+$")))  # valid: the worker runs it with RE2
    regex = compile_user_regex(request.data["rule"]["rules"][0]["allow"])
    # 2 s at 24 characters in Python's re, four times longer for every two more: at 5,000 it would never end
    assert regex.search("a" * 5000 + "b") is None
    assert regex.search("xaaa") is not None


@pytest.mark.parametrize(("pattern", "words"), [
    ("a{4294967296}", "repetition number is too large"),
    ("(?=a)b", "linear-time"),
    ("(a)\\1", "linear-time"),
    ("(", "missing )"),
])
def test_regexes_the_linear_time_engine_cannot_run_are_refused_with_a_reason(pattern, words):
    error = rejection(with_rule(allow=pattern))
    assert error.path == "$.rule.rules[0].allow"
    assert words in error.message and "unreadable" not in error.message


@pytest.mark.parametrize("xpath", ["//h1[re:test(., 'a{4294967296}')]", "//h1[re:test(., '(?<=a)b')]",
                                   "re:replace(//h1, 'a{4294967296}', 'g', 'b')"])
def test_regexes_inside_xpath_re_functions_are_checked_too(xpath):
    error = rejection(with_rule(extract=xpath))
    assert error.path == "$.rule.rules[0].extract.title" and "unreadable" not in error.message


def test_xpath_re_functions_run_on_re2_once_installed():
    import parsel

    from messaging.regexes import install_exslt_functions

    install_exslt_functions()
    page = parsel.Selector(text="<html><body><p>" + "a" * 5000 + "b</p><h1>Title 42</h1></body></html>")
    assert page.xpath("//p[re:test(., '(a+)+$')]").getall() == []  # linear time, not a stalled worker
    assert page.xpath("//h1[re:test(., 'title \\d+', 'i')]/text()").get() == "Title 42"
    assert page.xpath("re:replace(//h1, '\\d', 'g', 'N')").get() == "Title NN"
    assert page.xpath("re:match(//h1, '(\\w+) (\\d+)')/text()").getall() == ["Title 42", "Title", "42"]


# --- 7. an outage is logged by its changes of state ---------------------------------------------------------------
class UnreachableRedis:
    """Stands for a Redis that is down (every pass fails) until ``back`` is set."""

    def __init__(self) -> None:
        self.passes = 0
        self.back = threading.Event()

    def register_script(self, script: str):
        return lambda **kwargs: 0

    def _pass(self) -> None:
        self.passes += 1
        if not self.back.is_set():
            raise redis_py.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    def xgroup_create(self, *args, **kwargs):
        self._pass()

    def xreadgroup(self, *args, **kwargs):
        self._pass()
        return []

    def xautoclaim(self, *args, **kwargs):
        return [b"0-0", [], []]

    def xinfo_consumers(self, *args, **kwargs):
        return []


def test_a_redis_outage_logs_a_bounded_number_of_lines(caplog):
    down = UnreachableRedis()
    settings = load({"CRAWLFLEET_REDIS_MONITOR_INTERVAL": "0.001", "CRAWLFLEET_RUN_DIR": "/nonexistent"})
    monitor = RedisMonitor(settings, redis=down, producer=object(), plugins=[InfoPlugin()])
    caplog.set_level(logging.DEBUG, logger="crawlfleet.redis_monitor")
    runner = threading.Thread(target=monitor.run, daemon=True)
    runner.start()
    try:
        wait_for(lambda: down.passes >= 200, 30, "200 failing passes")
        down.back.set()
        seen = down.passes
        wait_for(lambda: down.passes >= seen + 5, 30, "passes after Redis came back")
    finally:
        monitor.stop()
        runner.join(timeout=10)
    lines = [r for r in caplog.records if r.name == "crawlfleet.redis_monitor" and r.levelno >= logging.INFO]
    assert len(lines) == 2, [r.getMessage() for r in lines]  # lost, back: not one traceback per pass
    assert "failing" in lines[0].getMessage() and "ConnectionError" in lines[0].getMessage()
    assert lines[0].exc_info is None
    assert "works again" in lines[1].getMessage()


def test_a_long_outage_says_it_is_still_on_every_interval(caplog):
    from messaging.outage import OutageLog

    clock = ManualClock(1000.0)
    outage = OutageLog(logging.getLogger("test.outage"), "redis", every=30, clock=clock)
    caplog.set_level(logging.INFO, logger="test.outage")
    for _ in range(100):  # 100 s of failures, one a second
        outage.failed(ConnectionError("refused"))
        clock.advance(1)
    outage.ok()
    outage.ok()
    messages = [r.getMessage() for r in caplog.records if r.name == "test.outage"]
    assert len(messages) == 5, messages  # lost; still down at 30, 60, 90 s; back
    assert "still failing after 30s" in messages[1] and "still failing after 90s" in messages[3]
    assert "works again after 100.0s" in messages[4]
