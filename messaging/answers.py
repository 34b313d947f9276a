"""Answers on ``crawlfleet.outbound`` and rejections on ``crawlfleet.failed``: their format, sending, awaiting.

Every answer is a JSON object with the request's ``uuid``, its ``kind`` and a ``status`` (``ok``, ``accepted``,
``duplicate``, ``rejected`` or ``error``), plus the kind's fields. A client that wants an answer takes the end
offsets of every outbound partition *before* it sends its request (:class:`AnswerWaiter`), then reads from there
until the answer with its uuid arrives: no consumer group, nothing committed, no answer missed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from kafka import TopicPartition

from messaging import clients, keys
from messaging.kafka_monitor.batch import DUPLICATE as WAS_DUPLICATE
from messaging.kafka_monitor.batch import ENQUEUED, REDELIVERED, Incoming
from messaging.settings import Settings

FAILED_EXCERPT = 4096  # characters of a rejected message kept on the failed topic
OK, ACCEPTED, DUPLICATE, REJECTED, ERROR = "ok", "accepted", "duplicate", "rejected", "error"


class AnswerTimeout(TimeoutError):
    """No answer with that uuid arrived in time; ``found`` holds the answers that did."""

    def __init__(self, message: str, found: dict[str, dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.found = found or {}


def answer(request: dict[str, Any], kind: str, status: str = OK, **fields: Any) -> dict[str, Any]:
    """An answer to ``request`` (which carries the uuid)."""
    return {"uuid": request.get("uuid"), "kind": kind, "status": status, "userid": request.get("userid"), **fields}


def answer_for(item: Incoming) -> dict[str, Any] | None:
    """The Kafka monitor's own answer to a request with a uuid: a rejection, or a crawl request's outcome."""
    uuid = item.uuid
    if uuid is None:
        return None
    if item.rejection is not None:
        return {"uuid": uuid, "kind": item.kind or "unknown", "status": REJECTED, "reason": item.rejection.reason,
                "path": item.rejection.path}
    if item.kind == "crawl":
        # what happened to the request, not to this delivery: a redelivered record that was accepted is accepted
        status = DUPLICATE if item.outcome == WAS_DUPLICATE else ACCEPTED
        enqueued = item.detail.get("enqueued", False) if item.outcome == REDELIVERED else item.outcome == ENQUEUED
        return answer(item.data, "crawl", status, crawlid=item.data["crawlid"], url=item.data.get("url"),
                      enqueued=enqueued)
    return None


def failed_record(item: Incoming) -> dict[str, Any]:
    """What goes to the failed topic: the reason, where the message came from, and the message (truncated)."""
    assert item.rejection is not None
    text = item.raw.decode("utf-8", errors="replace")
    return {
        "reason": item.rejection.reason,
        "path": item.rejection.path,
        "error": item.rejection.message,
        "kind": item.kind or None,
        "uuid": item.uuid,
        "source": {"topic": item.topic, "partition": item.partition, "offset": item.offset},
        "original": text[:FAILED_EXCERPT],
        "original_bytes": len(item.raw),
        "truncated": len(text) > FAILED_EXCERPT,
    }


def dead_letter_record(task: str, reason: str, crawlid: str = "", userid: str = "", at: float | None = None,
                       stage: str = "dispatch", path: str = "$.url") -> dict[str, Any]:
    """What goes to the failed topic for a task the master could not place (a *dead letter*): like a rejection, the
    reason and the original (the task as it was in ``seeds``, truncated), plus the crawl it belongs to."""
    return {
        "reason": f"{stage}: {reason}",
        "path": path,
        "error": reason,
        "kind": "task",
        "stage": stage,
        "crawlid": crawlid or None,
        "userid": userid or None,
        "uuid": None,
        "time": at,
        "original": task[:FAILED_EXCERPT],
        "original_bytes": len(task.encode("utf-8", "surrogatepass")),
        "truncated": len(task) > FAILED_EXCERPT,
    }


STREAM_LOOKUP = 10_000  # entries of a request stream searched for an unanswered request


def waiting_in_redis(redis: Any, kind: str, uuid: str) -> bool:
    """Whether a request not answered yet has reached Redis (a Kafka monitor routed it to its kind's stream, where
    it waits for a Redis monitor); False: it is still in Kafka, not read by a Kafka monitor yet. Request keys end
    with the request's uuid (``messaging.keys``)."""
    for _, fields in redis.xrange(keys.request_stream(kind), count=STREAM_LOOKUP):
        key = fields.get(b"key") or fields.get("key") or b""
        if (key.decode() if isinstance(key, bytes) else str(key)).endswith(f":{uuid}"):
            return True
    return False


def partitions_of(consumer: Any, topic: str, timeout: float = 15.0) -> list[TopicPartition]:
    """Every partition of ``topic`` (waits for the metadata)."""
    deadline = time.monotonic() + timeout
    while True:
        partitions = consumer.partitions_for_topic(topic)
        if partitions:
            return [TopicPartition(topic, partition) for partition in sorted(partitions)]
        if time.monotonic() > deadline:
            raise AnswerTimeout(f"topic {topic} has no partitions (does it exist?)")
        consumer.topics()  # refreshes the metadata
        time.sleep(0.1)


class AnswerWaiter:
    """Reads the outbound topic from the end offsets taken at construction, looking for answers by uuid."""

    def __init__(self, settings: Settings, topic: str | None = None) -> None:
        self.topic = topic or settings.topic_outbound
        self.consumer = clients.kafka_consumer(settings, group_id=None, enable_auto_commit=False)
        self.partitions = partitions_of(self.consumer, self.topic)
        self.consumer.assign(self.partitions)
        for partition, offset in self.consumer.end_offsets(self.partitions).items():
            self.consumer.seek(partition, offset)
        for partition in self.partitions:
            self.consumer.position(partition)  # resolve now, before the request is sent

    def wait(self, uuids: Iterable[str], timeout: float) -> dict[str, dict[str, Any]]:
        """Answers for every uuid; :class:`AnswerTimeout` (with those that did arrive) when time runs out."""
        wanted = set(uuids)
        found: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + timeout
        while wanted - found.keys():
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sorted(wanted - found.keys())
                raise AnswerTimeout(f"no answer within {timeout:g}s for {', '.join(missing[:5])}"
                                    f"{' …' if len(missing) > 5 else ''} (is a monitor running?)", found)
            for records in self.consumer.poll(timeout_ms=int(min(left, 0.5) * 1000)).values():
                for record in records:
                    message = _json(record.value)
                    if isinstance(message, dict) and message.get("uuid") in wanted:
                        found.setdefault(message["uuid"], message)
        return found

    def close(self) -> None:
        self.consumer.close(autocommit=False)

    def __enter__(self) -> AnswerWaiter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _json(raw: bytes | None) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None
