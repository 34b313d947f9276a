"""Pause and resume plugins: carry out a pause or resume request (:mod:`messaging.pause`) and answer it.

The answer: ``crawlid``, ``state`` (``paused`` or ``running``), ``changed`` (false when the crawl already was so:
the same request carried out twice, by a monitor that took over a dead one's entry, answers the same), ``since``
(paused: since when, Redis time; resumed: since when it had been paused) and ``parked`` (tasks of the crawl parked
out of ``seeds`` by a pause, or put back by a resume; the workers park and put back their own queues and leases).
A crawl that is stopped, finished or unknown is answered ``rejected`` with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from messaging import pause
from messaging.clients import RedisClient
from messaging.redis_monitor.plugins import Context, Plugin, Refused
from messaging.request_kinds import PAUSE, RESUME

_CHANGES: dict[str, Callable[[RedisClient, str], pause.Change]] = {PAUSE: pause.pause, RESUME: pause.resume}


class _Change(Plugin):
    """Carry out the change of the plugin's kind and answer it; a crawl it cannot change: ``rejected``."""

    def handle(self, key: str, request: dict[str, Any], context: Context) -> dict[str, Any]:
        try:
            change = _CHANGES[self.kind](context.redis, request["crawlid"])
        except pause.NotPausable as exc:
            raise Refused(str(exc), crawlid=exc.crawlid, state=exc.state or None) from None
        return {"crawlid": change.crawlid, "state": change.state, "changed": change.changed, "since": change.since,
                "parked": change.moved}


class PausePlugin(_Change):
    name = "pause"
    kind = PAUSE


class ResumePlugin(_Change):
    name = "resume"
    kind = RESUME
