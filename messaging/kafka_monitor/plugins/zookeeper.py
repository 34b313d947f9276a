"""Site-config requests (seed 4.1.2.2, "Zk 插件") wait under ``zk:<action>:<domain>:<userid>:<uuid>``.

The uuid is optional for this kind (a fire-and-forget change); without one, the request's content digest names the
key, so that two different changes never overwrite each other.
"""

from __future__ import annotations

from messaging import keys
from messaging.kafka_monitor.batch import Batch, Incoming
from messaging.kafka_monitor.plugins import Plugin
from messaging.validation import SITE


class ZookeeperPlugin(Plugin):
    name = "zookeeper"
    kinds = frozenset({SITE})

    def handle(self, request: Incoming, batch: Batch) -> None:
        data = request.data
        assert request.request is not None  # plugins see valid requests only, each with its parsed Request
        tag = data.get("uuid") or request.request.digest
        batch.store(request, keys.zk_request(data["action"], data["domain"].lower().rstrip("."), data["userid"], tag))
