"""What a failed task counts as, and a crawl_finished send that fails leaves nothing behind to be delivered late."""

from __future__ import annotations

from typing import Any

import pytest
from scrapy.http import HtmlResponse, Request
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.internet.error import TimeoutError as TwistedTimeout
from twisted.python.failure import Failure

from messaging.counts import failure_reason
from messaging.settings import load
from spiders.worker.tracker import _reason

pytestmark = pytest.mark.unit


def test_an_http_error_counts_by_status_and_a_download_error_by_its_type():
    response = HtmlResponse("http://site.test/", status=404, body=b"", request=Request("http://site.test/"))
    assert _reason(Failure(HttpError(response, "Ignoring non-200 response"))) == "HTTP 404"
    assert _reason(Failure(TwistedTimeout("took too long"))) == "TimeoutError"
    assert failure_reason(status=500) == "HTTP 500"
    assert failure_reason(error="a\nb") == "a b"


class _Future:
    def get(self, timeout: float) -> Any:
        raise TimeoutError("Kafka away")


class _Sender:
    def __init__(self) -> None:
        self.forced = False

    def force_close(self) -> None:
        self.forced = True


class _Producer:
    """A producer whose send times out while the record stays buffered (what kafka-python does)."""

    def __init__(self) -> None:
        self._sender = _Sender()
        self.buffered: list[Any] = []
        self.closed = False

    def send(self, topic: str, value: Any, key: Any = None) -> _Future:
        self.buffered.append(value)
        return _Future()

    def flush(self, timeout: float) -> None:
        pass

    def close(self, timeout: float) -> None:
        self.closed = True


def test_a_timed_out_crawl_finished_is_aborted_in_the_producer_not_delivered_late(tmp_path, monkeypatch):
    from master.service import MasterService
    from messaging import clients

    monkeypatch.setattr(clients, "zk_client", lambda settings: object())  # no ZooKeeper needed for a send
    service = MasterService(load({"CRAWLFLEET_RUN_DIR": str(tmp_path)}), identifier="m")
    first = _Producer()
    service._producer = first
    with pytest.raises(TimeoutError):
        service._send({"crawlid": "c", "event": "crawl_finished"})
    assert first._sender.forced and first.closed  # its buffered copy is dropped, not sent when Kafka returns
    assert service._producer is None  # the next attempt gets a new producer


class _Registry:
    def __init__(self, heartbeats: dict[str, float]) -> None:
        self.heartbeats = heartbeats
        self.retired: list[str] = []

    def expired(self, ttl: float, now: float) -> list[str]:
        return [job for job, beat in self.heartbeats.items() if beat < now - ttl]

    def live(self) -> dict[str, float]:
        return dict(self.heartbeats)

    def health(self, now: float, ttl: float, slow_after: float) -> dict[str, Any]:
        from frontier.registry import health_of

        return {job: health_of(job, beat, None, now, ttl, slow_after) for job, beat in self.heartbeats.items()}

    def retire(self, job: str, latest: float, now: float) -> bool:
        self.retired.append(job)
        del self.heartbeats[job]
        return True

    def forget(self, job: str, now: float) -> None:
        pass

    def retired_since(self, since: float) -> list[str]:
        return [job for job in self.retired if job not in self.heartbeats]


class _Requeuer:
    def requeue(self, job: str) -> int:
        return 0

    def pending_jobs(self, retired: list[str]) -> list[str]:
        return []  # every retired job's tasks are back already


def test_after_a_redis_outage_the_master_waits_a_ttl_before_retiring_silent_workers(tmp_path, monkeypatch):
    from master.service import MasterService
    from messaging import clients

    monkeypatch.setattr(clients, "zk_client", lambda settings: object())
    service = MasterService(load({"CRAWLFLEET_RUN_DIR": str(tmp_path), "CRAWLFLEET_HEARTBEAT_TTL": "15"}), "m")
    service.stats = type("Stats", (), {"incr": lambda *a: None})()
    registry = service.registry = _Registry({"w1": 100.0, "w2": 101.0, "w3": 102.0})
    service._leaves(_Requeuer(), 140.0)  # Redis was away 40 s: every heartbeat is stale at once
    assert registry.retired == []
    registry.heartbeats.update(w1=150.0, w2=151.0)  # two write again; w3 does not: it is really gone
    service._leaves(_Requeuer(), 156.0)
    assert registry.retired == ["w3"]
    registry.heartbeats["w2"] = 168.0
    service._leaves(_Requeuer(), 170.0)  # one silent worker among live ones: retired at once
    assert "w1" in registry.retired


def test_a_master_that_saw_redis_fail_knows_it_for_one_heartbeat_ttl(tmp_path, monkeypatch):
    import time as time_module

    from master.service import MasterService
    from messaging import clients

    monkeypatch.setattr(clients, "zk_client", lambda settings: object())
    service = MasterService(load({"CRAWLFLEET_RUN_DIR": str(tmp_path), "CRAWLFLEET_HEARTBEAT_TTL": "15"}), "m")
    assert not service._redis_was_away()
    service.leadership.outage.failed(ConnectionError("Redis away"))
    assert service._redis_was_away()  # still away
    service.leadership.outage.ok()
    assert service._redis_was_away()  # back just now: the workers' heartbeats could not be written
    service.leadership.outage.ended_at = time_module.monotonic() - 16
    assert not service._redis_was_away()
