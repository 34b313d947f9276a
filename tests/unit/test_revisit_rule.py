"""The crawl rule's ``revisit`` field and the crawl's ``until`` validated at intake (messaging.validation)."""

from __future__ import annotations

import pytest

from messaging.validation import Rejected, parse_request

pytestmark = pytest.mark.unit

LIST_RULE = {"first_page_xpath": {"list_from": "//ul/li", "second_page_url": "a/@href"},
             "second_page_xpath": {"body": "//article"}}
UNIVERSAL_RULE = {"rules": [{"allow": "/news/"}]}


def crawl(rule: dict, spider_type: str = "list", **extra: object) -> dict:
    return {"userid": "u", "crawlid": "c", "url": "http://a.example.com/", "spider_type": spider_type,
            "rule": rule, **extra}


@pytest.mark.parametrize("revisit", [
    {"pages": "all", "interval": 3600},
    {"pages": "list", "interval": 600, "min": 60, "max": 86400},
    {"pages": r"^http://a\.example\.com/(news|shop)/$", "interval": 60.5, "min": 60.5, "max": 60.5},
])
@pytest.mark.parametrize("spider_type,rule", [("list", LIST_RULE), ("universal", UNIVERSAL_RULE)])
def test_valid_revisit_fields_are_accepted(revisit: dict, spider_type: str, rule: dict) -> None:
    request = parse_request(crawl({**rule, "revisit": revisit}, spider_type, until=1.9e9))
    assert request.data["rule"]["revisit"] == revisit


@pytest.mark.parametrize("revisit,path,words", [
    ({"interval": 60}, "$.rule.revisit", "'pages' is a required property"),
    ({"pages": "all"}, "$.rule.revisit", "'interval' is a required property"),
    ({"pages": "all", "interval": 0}, "$.rule.revisit.interval", "less than the minimum"),
    ({"pages": "all", "interval": "60"}, "$.rule.revisit.interval", "not of type number"),
    ({"pages": "all", "interval": 60, "every": 5}, "$.rule.revisit", "Additional properties"),
    ({"pages": "(a+)+\\1", "interval": 60}, "$.rule.revisit.pages", ""),
    ({"pages": "(?<=x)y", "interval": 60}, "$.rule.revisit.pages", ""),
    ({"pages": "all", "interval": 60, "min": 120}, "$.rule.revisit.min", "above the interval"),
    ({"pages": "all", "interval": 60, "max": 30}, "$.rule.revisit.max", "below the interval"),
])
def test_bad_revisit_fields_are_rejected_with_their_path(revisit: dict, path: str, words: str) -> None:
    with pytest.raises(Rejected) as caught:
        parse_request(crawl({**LIST_RULE, "revisit": revisit}))
    assert caught.value.path == path
    assert words in caught.value.message


def test_until_must_be_a_time() -> None:
    with pytest.raises(Rejected) as caught:
        parse_request(crawl(LIST_RULE, until="tomorrow"))
    assert caught.value.path == "$.until"
