"""Info requests (seed 4.1.2.2, "Query 插件") wait under ``info:<userid>:<crawlid>:<uuid>`` for the Redis monitor."""

from __future__ import annotations

from messaging import keys
from messaging.kafka_monitor.batch import Batch, Incoming
from messaging.kafka_monitor.plugins import Plugin
from messaging.validation import INFO


class InfoPlugin(Plugin):
    name = "info"
    kinds = frozenset({INFO})

    def handle(self, request: Incoming, batch: Batch) -> None:
        data = request.data
        batch.store(request, keys.info_request(data["userid"], data["crawlid"], data["uuid"]))
