"""Plugins of the Redis monitor: each owns a kind of request (its stream) and turns one request into an answer.

:meth:`Plugin.handle` gets the request (the JSON the Kafka monitor stored) and a :class:`Context` with the
connections, and returns the answer's fields; raising :class:`Refused` makes a ``rejected`` answer with its reason
(the request is well formed but names nothing to act on), any other exception an ``error`` answer with its message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from messaging import clients
from messaging.clients import RedisClient
from messaging.settings import Settings


class Refused(Exception):
    """The request cannot be carried out as asked (e.g. a stop of a crawl that does not exist): ``rejected``."""

    def __init__(self, reason: str, **fields: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.fields = fields


@dataclass
class Context:
    """What the plugins use: Redis, the settings, and ZooKeeper/MongoDB clients opened on first use."""

    redis: RedisClient
    settings: Settings
    _zk: Any = field(default=None, repr=False)
    _mongo: Any = field(default=None, repr=False)

    def zk(self) -> Any:
        if self._zk is None:
            self._zk = clients.zk_client(self.settings)
        return self._zk

    def mongo(self) -> Any:
        if self._mongo is None:
            self._mongo = clients.mongo_client(self.settings, serverSelectionTimeoutMS=2000)
        return self._mongo[self.settings.mongo_db]

    def close(self) -> None:
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
        if self._mongo is not None:
            self._mongo.close()


class Plugin:
    """Base class: ``name`` (its counter, ``stats:redis-monitor:<name>:<window>``) and ``kind`` (``info``, ``stats``,
    ``site``, ``stop``: the plugin reads the stream :func:`messaging.keys.request_stream` of that kind)."""

    name: ClassVar[str] = ""
    kind: ClassVar[str] = ""

    def handle(self, key: str, request: dict[str, Any], context: Context) -> dict[str, Any]:
        raise NotImplementedError
