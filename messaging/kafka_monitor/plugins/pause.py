"""Pause and resume requests wait under ``pause:<userid>:<crawlid>:<uuid>`` / ``resume:…``; the Redis monitor's
pause plugins (:mod:`messaging.redis_monitor.plugins.pause`) carry them out and answer."""

from __future__ import annotations

from messaging import keys
from messaging.kafka_monitor.batch import Batch, Incoming
from messaging.kafka_monitor.plugins import Plugin
from messaging.request_kinds import PAUSE, RESUME


class PausePlugin(Plugin):
    name = "pause"
    kinds = frozenset({PAUSE})

    def handle(self, request: Incoming, batch: Batch) -> None:
        data = request.data
        batch.store(request, keys.pause_request(data["userid"], data["crawlid"], data["uuid"]))


class ResumePlugin(Plugin):
    name = "resume"
    kinds = frozenset({RESUME})

    def handle(self, request: Incoming, batch: Batch) -> None:
        data = request.data
        batch.store(request, keys.resume_request(data["userid"], data["crawlid"], data["uuid"]))
