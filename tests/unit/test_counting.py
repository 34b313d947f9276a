"""What a failed task counts as, and a crawl_finished send that times out is waited for, never sent twice."""

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


def test_an_http_error_counts_by_status_and_a_download_error_by_its_type_with_its_downloads():
    request = Request("http://site.test/", meta={"retry_times": 2})  # Scrapy's RetryMiddleware tried it twice more
    response = HtmlResponse("http://site.test/", status=500, body=b"", request=request)
    assert _reason(Failure(HttpError(response, "Ignoring non-200 response"))) == ("HTTP 500", 500, 3)
    timeout = Failure(TwistedTimeout("took too long"))
    assert _reason(timeout) == ("TimeoutError", None, 1)
    timeout.request = Request("http://site.test/", meta={"retry_times": 1})  # Scrapy sets it on a download error
    assert _reason(timeout) == ("TimeoutError", None, 2)
    assert failure_reason(status=500) == "HTTP 500"
    assert failure_reason(error="a\nb") == "a b"


class _Future:
    """A send the broker holds (paused): not done until :meth:`land`."""

    def __init__(self) -> None:
        self.is_done = False
        self.value: Any = None

    def get(self, timeout: float) -> Any:
        if not self.is_done:
            raise TimeoutError("Kafka away")
        return self.value

    def land(self, offset: int) -> None:
        self.is_done, self.value = True, type("Metadata", (), {"offset": offset})()

    def succeeded(self) -> bool:
        return self.is_done


class _Producer:
    """Records what is sent; every send is held until the test lands it."""

    config = {"enable_idempotence": True}

    def __init__(self) -> None:
        self.sent: list[tuple[Any, _Future]] = []

    def partitions_for(self, topic: str) -> set[int]:
        return {0, 1, 2, 3}

    def send(self, topic: str, value: Any, key: Any = None, partition: Any = None, headers: Any = None) -> _Future:
        future = _Future()
        self.sent.append((value, future))
        return future


class _Reader:
    def end_offsets(self, partitions: list[Any], timeout_ms: int | None = None) -> dict[Any, int]:
        return dict.fromkeys(partitions, 0)


def test_a_timed_out_crawl_finished_is_waited_for_not_sent_again(tmp_path, monkeypatch):
    from master.service import MasterService
    from messaging import clients
    from messaging.delivery import Delivery, DeliveryPending

    monkeypatch.setattr(clients, "zk_client", lambda settings: object())  # no ZooKeeper needed for a send
    service = MasterService(load({"CRAWLFLEET_RUN_DIR": str(tmp_path)}), identifier="m")
    producer = _Producer()
    service.delivery = Delivery(service.settings, producer_factory=lambda: producer, reader_factory=_Reader)
    event = {"crawlid": "c", "event": "crawl_finished", "event_id": "c@1"}
    monkeypatch.setattr("master.service.SEND_SECONDS", 0.05)
    with pytest.raises(DeliveryPending):
        service._send(event)
    with pytest.raises(DeliveryPending):
        service._send(event)  # the finisher's next attempt: the same send is waited for ...
    assert len(producer.sent) == 1  # ... no second copy is made
    producer.sent[0][1].land(7)
    service._send(event)  # Kafka took it
    service._send(event)  # and an attempt after that sends nothing
    assert len(producer.sent) == 1


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
