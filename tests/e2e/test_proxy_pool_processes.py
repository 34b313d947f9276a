"""The proxy pool on real services: the store in MongoDB, and collect / validate / list / serve as processes with
real local forward proxies (one broken on purpose, one asking for credentials) on the demo web."""

from __future__ import annotations

import json
import urllib.request
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from deploy.procs import free_port, wait_for
from spiders.proxies.store import CheckResult, ProxyStore, document_from_entry
from tests.plugins.proxies import list_page, list_page_html, proxy_farm  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e

NEWS = "news.fleet.test"
SECRET = "s3cret-Pa55"
CREDENTIAL_RULE = {"list_from": "//table[@id='proxies']//tr[td[2]]", "ip": "td[1]", "port": "td[2]",
                   "location": "td[3]", "anonymity": "td[4]", "type": "td[5]", "speed": "td[6]",
                   "alive_time": "td[7]", "user": "td[8]", "password": "td[9]"}


def store_of(cf: Any, max_failures: int = 3) -> ProxyStore:
    return ProxyStore(cf.mongo()["proxies"], max_failures)


def test_the_store_upserts_by_ip_port_and_forgets_proxies_that_keep_failing(cf: Any) -> None:
    clock = [datetime(2026, 11, 24, 7, 30, tzinfo=UTC)]
    store = ProxyStore(cf.mongo()["proxies"], max_failures=3, now=lambda: clock[0])
    docs = [document_from_entry({"ip": f"10.0.0.{n}", "port": 80, "speed": f"{n}s"}) for n in (1, 2)]
    assert store.upsert_collected(docs) == 2
    assert store.proxies(live_only=True) == []  # unchecked proxies are not live
    store.record_checks([CheckResult("10.0.0.1:80", True, 0.25), CheckResult("10.0.0.2:80", False, error="refused")])
    clock[0] += timedelta(minutes=5)
    again = [document_from_entry({"ip": "10.0.0.1", "port": 80, "speed": "9s"})]
    assert store.upsert_collected(again) == 0  # collected again: the list's figures, the validator's knowledge kept
    (live,) = store.proxies(live_only=True)
    assert (live.id, live.info["speed"], live.speed, live.failures) == ("10.0.0.1:80", "9s", 0.25, 0)
    assert live.last_success == datetime(2026, 11, 24, 7, 30)  # naive UTC, as pymongo reads dates back
    assert store.record_failures({"10.0.0.2:80": (1, "HTTP 403")}) == []
    assert store.record_checks([CheckResult("10.0.0.2:80", False, error="timeout")]) == ["10.0.0.2:80"]
    assert store.get("10.0.0.2:80") is None and [p.id for p in store.proxies()] == ["10.0.0.1:80"]
    assert store.record_failures({"10.0.0.1:80": (2, "ConnectionLost")}) == []  # 2 < 3: still in the pool
    assert store.get("10.0.0.1:80").failures == 2


def _get(url: str) -> tuple[int, dict[str, Any]]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_collect_validate_list_and_serve(cf: Any, procs: Any, proxy_farm: Any, list_page: Any,  # noqa: F811
                                         demoweb: dict[str, Any]) -> None:
    good = proxy_farm.start()
    private = proxy_farm.start(auth=f"ann:{SECRET}")
    broken = proxy_farm.start(broken=True)
    page = list_page.publish(list_page_html([good, private, broken], credentials=True))
    env = {**proxy_farm.env, "CRAWLFLEET_PROXY_TEST_URL": f"http://{NEWS}:{demoweb['port']}/",
           "CRAWLFLEET_PROXY_CHECK_INTERVAL": "0.5", "CRAWLFLEET_PROXY_MAX_FAILURES": "3"}

    collect = procs.crawlfleet("proxies", "collect", "--url", page, "--rule", json.dumps(CREDENTIAL_RULE), env=env)
    assert collect.wait(120) == 0, procs.log(collect)
    assert "collected 3 proxies (3 new, 0 invalid entries)" in procs.log(collect)
    store = store_of(cf)
    by_id = {p.id: p for p in store.proxies()}
    assert set(by_id) == {good.id, private.id, broken.id}
    assert by_id[private.id].url == f"http://ann:{SECRET}@{private.id}" and not by_id[good.id].alive
    assert by_id[good.id].info == {"location": "Loopback", "anonymity": "high", "type": "HTTP", "speed": "0.1s",
                                   "alive_time": "1 days"}

    port = free_port()
    serve = procs.crawlfleet("proxies", "serve", "--port", str(port), env=env)
    procs.wait_log(serve, "proxy API listening", timeout=60)

    def settled() -> bool:  # the background checks: the broken one removed after 3 failures, the others alive
        ids = {p.id for p in store.proxies(live_only=True)}
        return ids == {good.id, private.id} and store.get(broken.id) is None

    wait_for(settled, 60, "the validator to keep the good proxies and remove the broken one")
    for proxy in (good, private):
        assert proxy.forwarded(NEWS) >= 1  # the checks really went through them (with credentials for one)
    assert private.stats()["refused"] == {}
    status, answer = _get(f"http://127.0.0.1:{port}/proxies")
    assert status == 200 and answer["count"] == 2
    assert {p["id"] for p in answer["proxies"]} == {good.id, private.id}
    assert all(p["alive"] and p["speed_seconds"] is not None and p["last_success"] for p in answer["proxies"])
    status, answer = _get(f"http://127.0.0.1:{port}/proxy")
    assert status == 200 and answer["proxy"]["id"] in {good.id, private.id}

    listed = procs.crawlfleet("proxies", "list", "--json", env=env)
    assert listed.wait(60) == 0
    assert {json.loads(line)["id"] for line in procs.log(listed).splitlines() if line.startswith("{")} == {
        good.id, private.id}

    procs.stop_all()  # the server and every proxy stop: a pass of `validate` now removes nothing at once
    validate = procs.crawlfleet("proxies", "validate", env=env)
    assert validate.wait(60) == 0, procs.log(validate)
    assert "checked 2 proxies: 0 alive, 2 failed" in procs.log(validate)
    assert store.proxies(live_only=True) == [] and {p.failures for p in store.proxies()} == {1}
    for _, proc, _ in procs.started:
        assert SECRET not in procs.log(proc), "a proxy's password reached a log"


def test_the_api_answers_404_without_live_proxies(cf: Any, procs: Any) -> None:
    port = free_port()
    serve = procs.crawlfleet("proxies", "serve", "--port", str(port), "--no-validate", env=cf.env)
    procs.wait_log(serve, "proxy API listening", timeout=60)
    assert _get(f"http://127.0.0.1:{port}/proxy") == (404, {"error": "no live proxy"})
    assert _get(f"http://127.0.0.1:{port}/proxies?all=1") == (200, {"count": 0, "proxies": []})
