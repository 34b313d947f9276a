"""A Scrapy request one's own spider yields travels as a task and comes back the same on another worker; one that
cannot travel is refused with a reason that says why (spiders.travel, spiders.worker.own)."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.http import FormRequest, JsonRequest
from scrapy.utils.test import get_crawler

from messaging.tasks import Task, queue_score
from spiders.travel import CannotTravel, pack, unpack
from spiders.worker.crawls import CrawlInfo
from spiders.worker.own import Traveller

pytestmark = pytest.mark.unit
LIMIT = 65536


class Shop(Spider):
    name = "shop"

    def parse_item(self, response: Any, kind: str = "") -> None:
        pass

    def on_error(self, failure: Any) -> None:
        pass

    parse_alias = parse_item


class Other:
    def parse(self, response: Any) -> None:
        pass


@pytest.fixture
def spider() -> Shop:
    return Shop()


@pytest.fixture
def fingerprinter() -> Any:
    return get_crawler(Shop).request_fingerprinter


def travelled(request: Request, spider: Shop, fingerprinter: Any) -> tuple[Request, Task]:
    traveller = Traveller(spider, fingerprinter, CrawlInfo("c1", "shop.shop", state="running", userid="u"), LIMIT)
    task = traveller.task(request, Task("http://shop.test/", "c1", "shop.shop", depth=2))
    again = Task.decode(task.encode())  # through Redis
    assert again == task and again.encode() == task.encode()
    return traveller.request(again), again


def test_every_field_to_dict_keeps_comes_back(spider: Shop, fingerprinter: Any) -> None:
    request = Request("http://shop.test/p?b=2&a=1", callback=spider.parse_item, errback=spider.on_error,
                      cb_kwargs={"kind": "book", "n": [1, 2.5, None]}, meta={"cookiejar": 3, "ref": {"x": "y"}},
                      method="PUT", headers={"X-Token": ["a", "b"]}, body=b"\xff\x00binary", cookies={"s": "1"},
                      priority=7, dont_filter=True, flags=["f"], encoding="latin-1")
    back, task = travelled(request, spider, fingerprinter)
    assert back.url == request.url and back.method == "PUT" and back.body == request.body
    assert back.callback == spider.parse_item and back.errback == spider.on_error
    assert back.cb_kwargs == request.cb_kwargs and back.cookies == {"s": "1"}
    assert back.headers.getlist("X-Token") == [b"a", b"b"]
    assert back.priority == 7 and back.dont_filter and back.flags == ["f"] and back.encoding == "latin-1"
    assert back.meta == {"cookiejar": 3, "ref": {"x": "y"}, "depth": 3}
    assert task.depth == 3 and task.referer == "http://shop.test/" and task.callback == "parse_item"
    assert bytes.fromhex(task.request["fp"]) == fingerprinter.fingerprint(request)[:16]


def test_request_classes_come_back_as_themselves(spider: Shop, fingerprinter: Any) -> None:
    form = FormRequest("http://shop.test/login", formdata={"user": "ann", "pw": "x y"}, callback=spider.parse_alias)
    back, task = travelled(form, spider, fingerprinter)
    assert type(back) is FormRequest and back.method == "POST" and back.body == b"user=ann&pw=x+y"
    assert back.headers[b"Content-Type"] == b"application/x-www-form-urlencoded"
    assert task.callback in ("parse_item", "parse_alias") and back.callback == spider.parse_item
    json_request = JsonRequest("http://shop.test/api", data={"q": 1}, dumps_kwargs={"sort_keys": False})
    back, task = travelled(json_request, spider, fingerprinter)
    assert type(back) is JsonRequest and back.body == b'{"q": 1}' and back.dumps_kwargs == {"sort_keys": False}
    assert back.callback is None  # parse: the default


def test_the_same_request_is_the_same_task_member(spider: Shop, fingerprinter: Any) -> None:
    one = travelled(Request("http://shop.test/a", meta={"b": 1, "a": 2}), spider, fingerprinter)[1]
    two = travelled(Request("http://shop.test/a", meta={"a": 2, "b": 1}), spider, fingerprinter)[1]
    assert one.encode() == two.encode()
    plain = Task("http://shop.test/a", "c1", "list")
    assert '"request"' not in plain.encode()  # a rule task is encoded as it always was


@pytest.mark.parametrize(("make", "what", "words"), [
    (lambda s: Request("http://a/", callback=lambda r: None), "callback", "is not a method of the spider"),
    (lambda s: Request("http://a/", callback=Other().parse), "callback", "is not a method of the spider"),
    (lambda s: Request("http://a/", callback=functools.partial(s.parse_item, kind="x")), "callback", "not a method"),
    (lambda s: Request("http://a/", errback=print), "errback", "is not a method of the spider"),
    (lambda s: Request("http://a/", meta={"item": object()}), "meta", "holds a builtins.object, not JSON"),
    (lambda s: Request("http://a/", meta={"pair": (1, 2)}), "meta", "not JSON"),
    (lambda s: Request("http://a/", meta={1: "x"}), "meta", "has the key 1, not a string"),
    (lambda s: Request("http://a/", cb_kwargs={"when": float("nan")}), "cb_kwargs", "not a JSON number"),
    (lambda s: Request("http://a/", method="POST", body=b"x" * (LIMIT + 1)), "size", "CRAWLFLEET_REQUEST_MAX_BYTES"),
])
def test_what_cannot_travel_is_refused_with_its_reason(spider: Shop, fingerprinter: Any, make: Any, what: str,
                                                       words: str) -> None:
    with pytest.raises(CannotTravel, match=words) as refused:
        pack(make(spider), spider, fingerprinter, LIMIT)
    assert refused.value.what == what and refused.value.reason == f"untravelable: {what}"


def test_a_local_class_cannot_travel(spider: Shop, fingerprinter: Any) -> None:
    class Local(Request):
        pass

    with pytest.raises(CannotTravel, match="cannot be imported by that name"):
        pack(Local("http://a/"), spider, fingerprinter, LIMIT)


def test_the_fleet_and_one_download_keys_stay_behind(spider: Shop, fingerprinter: Any) -> None:
    meta = {"task": object(), "task_member": "m", "download_slot": "a", "fleet_slot": 1, "depth": 4,
            "fleet_render": True, "mine": 1}
    packed = pack(Request("http://a/", meta=meta), spider, fingerprinter, LIMIT)
    assert packed.meta == {"fleet_render": True, "mine": 1} and packed.depth == 4


def test_unpack_refuses_a_callback_the_spider_lacks(spider: Shop) -> None:
    with pytest.raises(ValueError, match="no method 'gone'"):
        unpack("http://a/", "gone", {}, {"fp": "00"}, spider)


def test_a_request_priority_orders_its_site_queue_before_the_crawl_priority_and_depth() -> None:
    assert queue_score(100, 0, order=1) < queue_score(100, 0) < queue_score(100, 0, order=-1)
    assert queue_score(255, 5, order=0) < queue_score(0, 0, order=0)  # rule tasks: as before
    assert queue_score(100, 1, order=10**12) == queue_score(100, 1, order=2**30)  # bounded: an exact double


def test_an_items_key_is_its_pages_fingerprint_and_its_place_whatever_the_pipelines_did() -> None:
    """The fleet's store keys one's own spider's items by (request fingerprint, place in the page's output), so a page
    processed again after a crash writes the same documents: by the item's identity, and for an item a pipeline
    replaced by another object, the first place no item has or will have."""
    from types import SimpleNamespace

    from spiders.worker.tracker import InProgress, TaskTracker

    tracker = TaskTracker(None, None, lambda url: True, lambda finished: None)  # type: ignore[arg-type]
    task = Task("http://shop.test/", "c1", "shop.shop", request={"fp": "ab"})
    tracker.tasks["m"] = InProgress(SimpleNamespace(member="m"), task)  # type: ignore[arg-type]
    response = SimpleNamespace(meta={"task_member": "m"})
    first, second, third = {"n": 1}, {"n": 2}, {"n": 3}
    for item in (first, second, third):
        tracker.item_produced(response, item)
    assert tracker.item_key(response, third) == "ab:2"
    assert tracker.item_key(response, {"n": 1, "cleaned": True}) == "ab:3"  # a new object: no place of the others
    assert tracker.item_key(response, first) == "ab:0" and tracker.item_key(response, second) == "ab:1"
    assert tracker.item_key(SimpleNamespace(meta={}), first) is None  # not from a task (start() items)


def test_the_workers_modules_install_no_reactor_when_imported() -> None:
    """Scrapy installs the asyncio reactor after the worker's modules are imported (``crawlfleet worker`` imports the
    scheduler first): a module that imported ``twisted.internet.reactor`` at its top would install epoll's."""
    import subprocess
    import sys

    modules = ("spiders.worker.scheduler", "spiders.addon", "spiders.middlewares.cookies",
               "spiders.pipelines.own_items", "spiders.worker.start")
    code = f"import sys, {', '.join(modules)}; sys.exit('twisted.internet.reactor' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0
