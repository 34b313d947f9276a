"""Requests from the manager to the cluster go through Kafka, exactly as ``crawlfleet submit`` sends them.

A request is validated first with the Kafka monitor's own code (:func:`messaging.validation.parse_request`: the
same schemas, limits and reasons), so a bad crawl is refused at once with its JSON path and message; a valid one gets
a ``uuid``, goes to the incoming topic, and the answer with that uuid is read from the outbound topic
(:class:`messaging.answers.AnswerWaiter`, positioned before sending so no answer is missed): ``accepted`` /
``duplicate`` / ``rejected`` from the Kafka monitor for a crawl, the Redis monitor's answer for a stop or a
site-config change. No answer in time is :data:`UNCONFIRMED`, not an error: the request is in Kafka and a monitor may
still carry it out (the pages say so; the API answers 202). Blocking: the web layer calls :meth:`KafkaGateway.ask`
in a thread.
"""

from __future__ import annotations

import threading
import uuid as uuidlib
from typing import Any

from messaging import clients, request_kinds
from messaging.answers import AnswerTimeout, AnswerWaiter
from messaging.settings import Settings
from messaging.validation import Rejected, parse_request

UNCONFIRMED = "unconfirmed"  # sent, no answer in time: neither done nor failed

class KafkaGateway:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        request_kinds.use_settings(settings)  # kinds of one's own are checked like the built-in ones
        self._producer: Any = None
        self._lock = threading.Lock()

    @staticmethod
    def check(request: dict[str, Any], max_bytes: int) -> tuple[str, dict[str, Any]]:
        """(kind, request) when valid; :class:`Rejected` with the reason otherwise."""
        parsed = parse_request(request, max_bytes)
        return parsed.kind, parsed.data

    def _ready_producer(self) -> Any:
        with self._lock:
            if self._producer is None:
                from messaging.kafka_monitor.monitor import topic_partitions

                clients.ensure_topics(self.settings, topic_partitions(self.settings))
                self._producer = clients.kafka_producer(self.settings)
            return self._producer

    def ask(self, request: dict[str, Any], kind: str | None = None, timeout: float | None = None) -> dict[str, Any]:
        """Validate, send, wait for the answer. Returns the answer, or ``{"status": "rejected"|"error", "reason"}``."""
        request = dict(request)
        request.setdefault("uuid", uuidlib.uuid4().hex)
        try:
            found_kind, data = self.check(request, self.settings.max_message_bytes)
        except Rejected as rejection:
            return {"status": "rejected", "reason": rejection.reason, "path": rejection.path}
        if kind is not None and found_kind != kind:
            return {"status": "rejected", "reason": f"$: a {kind} request was expected, this is a {found_kind} one",
                    "path": "$"}
        producer = self._ready_producer()
        wait = timeout if timeout is not None else self.settings.answer_timeout
        try:
            with AnswerWaiter(self.settings) as waiter:
                producer.send(self.settings.topic_incoming, data, key=data.get("crawlid")).get(timeout=30)
                return waiter.wait([data["uuid"]], wait)[data["uuid"]]
        except AnswerTimeout as exc:  # in Kafka all the same: a monitor may still carry it out
            return {"status": UNCONFIRMED, "reason": f"sent; not confirmed yet: {exc}; it may still take effect",
                    "uuid": data["uuid"]}

    def close(self) -> None:
        with self._lock:
            if self._producer is not None:
                self._producer.close(timeout=5)
                self._producer = None
