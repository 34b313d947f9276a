"""Request kinds, schemas and rejection reasons (messaging.validation), without services."""

from __future__ import annotations

import json

import pytest

from deploy.cli_messaging import read_messages
from messaging import keys
from messaging.validation import (
    CRAWL,
    INFO,
    SITE,
    STATS,
    STOP,
    Rejected,
    compiled,
    detect_kind,
    parse_request,
)

pytestmark = pytest.mark.unit

LIST_RULE = {"first_page_xpath": {"list_from": "//ul[@id='news']/li", "second_page_url": "a/@href",
                                  "title": "a/text()", "日期": "span/text()", "continue": True,
                                  "next_page": "//a[@rel='next']/@href"},
             "second_page_xpath": {"body": "//div[@class='article']"}, "required": ["title"]}
UNIVERSAL_RULE = {"rules": [{"allow": r"/a/\d{4}/", "deny": [r"^http://v\.", "logout"], "allow_domains": "ifeng.com",
                             "restrict_xpaths": ["//div[@id='nav']"], "follow": True,
                             "extract": {"title": "//h1/text()",
                                         "when": "//time[re:test(@datetime, '^2')]/@datetime"}}],
                  "start": "sitemap", "required": ["title"]}
CRAWL_REQUEST = {"userid": "u1", "crawlid": "c-1", "url": "http://news.example.com/list", "spider_type": "list",
                 "rule": LIST_RULE, "priority": 200, "maxdepth": 3, "cookie": {"session": "abc"}, "max_pages": 100,
                 "domain_max_pages": 10}


def reason_of(message: object, **overrides: object) -> str:
    if isinstance(message, dict):
        message = {**message, **overrides}
        message = {key: value for key, value in message.items() if value is not DROP}
    with pytest.raises(Rejected) as caught:
        parse_request(message if isinstance(message, bytes | str) else json.dumps(message).encode())
    return caught.value.reason


DROP = object()


@pytest.mark.parametrize(("message", "kind"), [
    (CRAWL_REQUEST, CRAWL),
    ({**CRAWL_REQUEST, "spider_type": "universal", "rule": UNIVERSAL_RULE}, CRAWL),
    ({"action": "info", "userid": "u1", "crawlid": "c-1", "uuid": "9f0c"}, INFO),
    ({"stats": "crawler", "userid": "u1", "uuid": "a-1"}, STATS),
    ({"action": "rate", "userid": "u1", "domain": "example.com", "rate": 5, "window": 2.5}, SITE),
    ({"action": "blacklist-remove", "userid": "u1", "domain": "www.example.co.uk", "uuid": "x"}, SITE),
    ({"action": "stop", "userid": "u1", "crawlid": "c-1", "uuid": "u-2"}, STOP),
])
def test_valid_requests_of_every_kind(message, kind):
    request = parse_request(json.dumps(message).encode())
    assert request.kind == kind
    assert request.data == message


def test_canonical_content_and_digest_ignore_key_order_and_spacing():
    one = parse_request(json.dumps(CRAWL_REQUEST).encode())
    other = parse_request(json.dumps(dict(reversed(list(CRAWL_REQUEST.items()))), indent=2).encode())
    assert one.canonical == other.canonical and one.digest == other.digest
    assert parse_request(json.dumps({**CRAWL_REQUEST, "priority": 1}).encode()).digest != one.digest


@pytest.mark.parametrize(("overrides", "path", "words"), [
    ({"url": "ftp://example.com/"}, "$.url", "scheme 'ftp' is not http or https"),
    ({"url": "/relative/path"}, "$.url", "not an absolute http(s) URL"),
    ({"url": "http:///no-host"}, "$.url", "no host"),
    ({"url": "http://exa mple.com/"}, "$.url", "white space, a control"),
    ({"url": "http://example.com:99999/"}, "$.url", "Port out of range"),
    ({"url": "http://example.com/" + "a" * 3000}, "$.url", "3019 characters is longer than allowed"),
    ({"url": DROP}, "$", "'url' is a required property"),
    ({"priority": "high"}, "$.priority", "not of type integer"),
    ({"priority": 256}, "$.priority", "greater than the maximum of 255"),
    ({"maxdepth": -1}, "$.maxdepth", "less than the minimum of 0"),
    ({"spider_type": "deep"}, "$.spider_type", "is not one of"),
    ({"crawlid": "has space"}, "$.crawlid", "is not a user, crawl or job id"),
    ({"userid": ""}, "$.userid", "shorter than allowed"),
    ({"cookie": {"a": 1}}, "$.cookie.a", "not of type string"),
    ({"extra": True}, "$", "'extra' was unexpected"),
    ({"rule": {}}, "$.rule", "'first_page_xpath' is a required property"),
    ({"rule": {"first_page_xpath": {"list_from": "//ul["}}}, "$.rule.first_page_xpath.list_from",
     "is not a valid XPath: Invalid expression"),
    ({"rule": {"first_page_xpath": {"list_from": "//a[nope(@x)]"}}}, "$.rule.first_page_xpath.list_from",
     "Unregistered function"),
    ({"rule": {"first_page_xpath": {"list_from": "//li", "continue": "yes"}}}, "$.rule.first_page_xpath.continue",
     "not of type boolean"),
    ({"rule": {"first_page_xpath": {"list_from": "//li", "bad.name": "//x"}}}, "$.rule.first_page_xpath",
     "is not an item field name"),
    ({"rule": {**LIST_RULE, "required": ["title", "title"]}}, "$.rule.required", "non-unique"),
    ({"spider_type": "universal", "rule": {"rules": [{"allow": ["ok", "(["]}]}}, "$.rule.rules[0].allow[1]",
     "is not a valid regular expression"),
    ({"spider_type": "universal", "rule": {"rules": [{"deny": "*oops"}]}}, "$.rule.rules[0].deny",
     "nothing to repeat"),
    ({"spider_type": "universal", "rule": {"rules": [{"allow_domains": ["a..b"]}]}},
     "$.rule.rules[0].allow_domains[0]", "is not a host or domain name"),
    ({"spider_type": "universal", "rule": {"rules": []}}, "$.rule.rules", "should be non-empty"),
    ({"spider_type": "universal", "rule": {"rules": [{"follow": True}], "start": "ftp"}}, "$.rule.start",
     "is not one of"),
    ({"spider_type": "universal", "rule": LIST_RULE}, "$.rule", "'rules' is a required property"),
])
def test_crawl_rejections_name_the_first_error(overrides, path, words):
    reason = reason_of(CRAWL_REQUEST, **overrides)
    assert reason.startswith(path + ": "), reason
    assert words in reason, reason


@pytest.mark.parametrize(("raw", "words"), [
    (b"{", "invalid JSON"),
    (b"", "invalid JSON"),
    (b'{"a": NaN}', "invalid JSON"),
    (b"[" * 5000 + b"]" * 5000, "depth limit"),
    (b'{"action":"info","userid":"\\ud800","crawlid":"c","uuid":"u"}', "surrogate"),
    (b"\xff\xfe{}", "not UTF-8"),
    (b"[1, 2]", "a request is a JSON object, not an array"),
    (b'"text"', "not a string"),
    (b"null", "not null"),
    (b'{"hello": "world"}', "unknown request kind"),
    (b'{"action": "explode", "userid": "u"}', "$.action: 'explode' is not a known action"),
    (b'{"stats": "everything", "userid": "u", "uuid": "x"}', "$.stats"),
    (b'{"action": "rate", "userid": "u", "domain": "example.com"}', "'rate' is a required property"),
    (b'{"action": "rate", "userid": "u", "domain": "example.com", "rate": 1, "window": 0}', "$.window"),
    (b'{"action": "info", "userid": "u", "crawlid": "c"}', "'uuid' is a required property"),
    (b'{"action": "stop", "userid": "u", "crawlid": "c", "uuid": "u u"}', "$.uuid"),
])
def test_malformed_messages_get_specific_reasons(raw, words):
    assert words in reason_of(raw)


def test_oversize_messages_are_refused_before_parsing():
    big = json.dumps({**CRAWL_REQUEST, "cookie": {"c": "x" * 4000}}).encode()
    with pytest.raises(Rejected, match="larger than the limit of 1000 bytes"):
        parse_request(big, max_bytes=1000)
    with pytest.raises(Rejected, match="larger than the limit"):
        parse_request({**CRAWL_REQUEST, "cookie": {"c": "x" * 4000}}, max_bytes=1000)


def test_detect_kind_by_fields():
    assert detect_kind({"url": "x"}) == CRAWL
    assert detect_kind({"stats": "all"}) == STATS
    assert detect_kind({"action": "blacklist"}) == SITE


def test_fast_validator_agrees_with_the_reference():
    good = [CRAWL_REQUEST, {**CRAWL_REQUEST, "spider_type": "universal", "rule": UNIVERSAL_RULE}]
    bad = [{**CRAWL_REQUEST, "url": "mailto:x@example.com"}, {**CRAWL_REQUEST, "priority": 1.5},
           {**CRAWL_REQUEST, "rule": {"first_page_xpath": {"list_from": "//["}}},
           {**CRAWL_REQUEST, "spider_type": "universal", "rule": {"rules": [{"allow": "(["}]}},
           {**CRAWL_REQUEST, "crawlid": "ü"}]
    schema = compiled("crawl.json")
    for message in good:
        assert schema.fast.is_valid(message) and schema.reference.is_valid(message)
    for message in bad:
        assert not schema.fast.is_valid(message) and not schema.reference.is_valid(message), message


def test_cli_reads_json_arrays_and_lines():
    assert read_messages('[{"a": 1}, {"b": 2}]') == [{"a": 1}, {"b": 2}]
    assert read_messages('{"a": 1}\nnot json\n\n{"b": 2}\n') == [{"a": 1}, "not json", {"b": 2}]
    assert read_messages("  ") == []


def test_stats_keys_parse_back():
    assert keys.parse_stats_key("stats:crawler:list:200:60") == keys.StatsKey("crawler", "list:200", "60")
    assert keys.parse_stats_key(b"stats:kafka-monitor:crawl:lifetime").window == "lifetime"
    assert keys.parse_stats_key("stats:kafka-monitor:crawl:step3600").window == "step3600"
    assert keys.parse_stats_key("stats:redis-monitor:10.0.0.7").ip == "10.0.0.7"
    assert keys.parse_stats_key("stats:redis-monitor:::1").ip == "::1"
    assert keys.intake_seen("ab").startswith("intake:seen:{seeds}:")
