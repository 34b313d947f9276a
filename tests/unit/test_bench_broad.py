"""The broad benchmark's generated site (pure parts): links across hosts, every page reachable, addresses distinct."""

from __future__ import annotations

from collections import deque

import pytest

from bench.broad_site import BROAD_RULE, host_ip, host_name, page_links
from messaging.validation import CRAWL, first_error

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("pages", "hosts"), [(2000, 10), (2000, 1000), (20, 5)])
def test_every_page_links_two_or_three_pages_of_other_hosts_and_all_are_reachable(pages: int, hosts: int) -> None:
    links = page_links(pages, hosts)
    assert all(1 <= len(targets) <= 3 for targets in links)
    assert sum(len(targets) >= 2 for targets in links) > pages // 2
    assert all(target % hosts != page % hosts for page, targets in enumerate(links) for target in targets)
    seen, todo = {0}, deque([0])
    while todo:
        for target in links[todo.popleft()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    assert len(seen) == pages


def test_hosts_have_distinct_loopback_addresses_and_names() -> None:
    addresses = {host_ip(i) for i in range(5000)}
    assert len(addresses) == 5000 and all(a.startswith("127.") for a in addresses)
    assert host_name(42) == "h42.broad.test"


def test_the_rule_is_a_valid_universal_rule() -> None:
    assert first_error(CRAWL, {"userid": "u", "crawlid": "c", "spider_type": "universal",
                               "url": "http://h0.broad.test/p/0.html", "rule": BROAD_RULE}) is None
