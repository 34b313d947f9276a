"""Stop requests wait under ``stop:<userid>:<crawlid>:<uuid>``; the Redis monitor purges the crawl's tasks."""

from __future__ import annotations

from messaging import keys
from messaging.kafka_monitor.batch import Batch, Incoming
from messaging.kafka_monitor.plugins import Plugin
from messaging.validation import STOP


class StopPlugin(Plugin):
    name = "stop"
    kinds = frozenset({STOP})

    def handle(self, request: Incoming, batch: Batch) -> None:
        data = request.data
        batch.store(request, keys.stop_request(data["userid"], data["crawlid"], data["uuid"]))
