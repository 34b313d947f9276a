"""A worker killed with SIGKILL in the middle of a crawl loses no page: its leases return, the crawl finishes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deploy.demo_rules import DEMO_UNIVERSAL_RULE
from deploy.procs import kill_hard, wait_for
from frontier.client import FrontierReader
from messaging import keys
from tests.plugins.demoweb import own_demoweb

pytestmark = pytest.mark.e2e

NEWS = "news.fleet.test"
ARTICLES = 1000  # with its list pages, a crawl of about 1,100 pages: the kill at 400 items is well inside it


@pytest.fixture
def big_demoweb(tmp_path: Path) -> Iterator[dict[str, Any]]:
    with own_demoweb(tmp_path / "web", ARTICLES) as status:
        yield status


def test_kill_9_of_a_worker_mid_crawl_loses_nothing(fleet: Any, big_demoweb: dict[str, Any]) -> None:
    fleet.use_demoweb(big_demoweb)
    fleet.start(masters=2)
    victim, survivor = "crash-victim", "crash-survivor"
    victim_proc, _ = fleet.start_workers("universal", [victim, survivor])
    fleet.submit({"userid": "dave", "crawlid": "news-big", "spider_type": "universal", "url": fleet.url(NEWS, "/"),
                  "rule": DEMO_UNIVERSAL_RULE})
    collection = fleet.cf.mongo()["news-big"]
    wait_for(lambda: collection.estimated_document_count() >= 400, 120, "400 items stored before the kill")
    _, in_flight = FrontierReader(fleet.redis).queue_depths([victim])[victim]
    kill_hard(victim_proc.pid)

    fleet.wait_finished(["news-big"], 240)
    urls = [item["url"] for item in fleet.items("news-big")]
    assert len(urls) == len(set(urls)) == ARTICLES
    served = fleet.served(NEWS)
    twice = {path: n for path, n in served.items() if n > 1 and path != "/search"}
    assert len(twice) <= in_flight, f"{len(twice)} pages fetched twice, the victim held {in_flight}: {twice}"
    assert fleet.redis.zscore(keys.RETIRED_WORKERS, victim) is not None  # the master retired (fenced) it
