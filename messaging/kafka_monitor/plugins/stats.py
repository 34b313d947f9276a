"""Stats requests (seed 4.1.2.2, "Stats 插件") wait under ``statsrequest:<module>:<userid>:<uuid>``."""

from __future__ import annotations

from messaging import keys
from messaging.kafka_monitor.batch import Batch, Incoming
from messaging.kafka_monitor.plugins import Plugin
from messaging.validation import STATS


class StatsPlugin(Plugin):
    name = "stats"
    kinds = frozenset({STATS})

    def handle(self, request: Incoming, batch: Batch) -> None:
        data = request.data
        batch.store(request, keys.stats_request(data["userid"], data["stats"], data["uuid"]))
