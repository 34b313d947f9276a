"""One poll's worth of requests and the Redis writes they cause, done in a few round trips.

The plugins queue writes on a :class:`Batch`; :meth:`Batch.write` then does them all at once:

- crawl tasks go into ``seeds`` through the one push mechanism (:data:`messaging.tasks.PUSH_SEEDS`, which also
  counts each new task as pending for its crawl), guarded per request by the idempotence key
  ``intake:seen:{seeds}:<digest>`` (``SET NX EX``): the task is added (``ZADD NX``) only when that succeeds. Both keys
  share the hash tag of ``seeds``, so the check and the enqueue are one atomic step on a single server and on a Redis
  Cluster alike: a redelivered request (the monitor died after the write, before the commit) is skipped, and a crash
  between the check and the enqueue cannot happen. The guard remembers which record set it (topic, partition,
  offset) and what came of it, so the answer says what happened to the *request*: a redelivery of the record that
  was accepted is ``accepted`` again (outcome ``redelivered``), another request with the same content ``duplicate``;
- other requests become a key (``info:…``, ``statsrequest:…``, ``zk:…``, ``stop:…``) holding the request's JSON,
  written with ``SET NX EX`` and, in the same Lua call (``lua/request_store.lua``), an entry of their kind's stream
  ``requests:{requests}:<kind>`` that the Redis monitors read through a consumer group (no keyspace scan). A
  redelivery before the Redis monitor answered finds the key and is a no-op; one after the answer repeats an
  idempotent action (an info or stats answer, the same site change, the same stop).

The caller commits the Kafka offsets only after :meth:`Batch.write` returned.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from messaging import keys
from messaging.clients import RedisClient
from messaging.scripts import lua_script
from messaging.tasks import PUSH_SEEDS, CrawlFields, Task, push_seeds_call
from messaging.validation import Rejected, Request, content_digest

ENQUEUED, QUEUED_ALREADY, DUPLICATE, STORED, REJECTED = "enqueued", "queued-already", "duplicate", "stored", "rejected"
REDELIVERED = "redelivered"  # the same Kafka record again (a retry or a redelivery): already accepted, not re-enqueued

# The intake's guarded push (lua/intake_push.lua): PUSH_SEEDS itself, run as a local function, then the guard of
# each request's delivery. Queued on the batch's pipeline as EVAL (LuaScript.queue_eval: a cluster pipeline).
KAFKA_MONITOR_LUA = Path(__file__).with_name("lua")  # the Kafka monitor's scripts
INTAKE_PUSH = lua_script(KAFKA_MONITOR_LUA / "intake_push.lua",
                         prefix="local function push(KEYS, ARGV)\n" + PUSH_SEEDS.source + "\nend\n")
REQUEST_STORE = lua_script(KAFKA_MONITOR_LUA / "request_store.lua")  # the request key and its stream entry


@dataclass
class Incoming:
    """One Kafka record on its way through the monitor."""

    topic: str
    partition: int
    offset: int
    raw: bytes
    request: Request | None = None
    rejection: Rejected | None = None
    outcome: str = ""
    plugin: str = ""  # the plugin that wrote it (its counter)
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.request.kind if self.request else ""

    @property
    def data(self) -> dict[str, Any]:
        return self.request.data if self.request else {}

    @property
    def delivery(self) -> str:
        """Which Kafka record this is: the same on a redelivery, different for another request."""
        return f"{self.topic}/{self.partition}/{self.offset}"

    @property
    def uuid(self) -> str | None:
        uuid = self.data.get("uuid")
        if uuid is None and self.rejection is not None:
            uuid = _uuid_of_rejected(self.raw)
        return uuid if isinstance(uuid, str) and 0 < len(uuid) <= 64 else None


def _uuid_of_rejected(raw: bytes) -> str | None:
    # A rejected request may still carry a uuid that a waiting client wants an answer for.
    from messaging.validation import decode  # local: only needed for rejections

    try:
        message = decode(raw)
    except Rejected:
        return None
    return message.get("uuid") if isinstance(message, dict) else None


class Batch:
    """The writes one poll's plugins queued; :meth:`write` performs them."""

    def __init__(self, redis: RedisClient, dedup_ttl: int, request_ttl: int) -> None:
        self.redis = redis
        self.dedup_ttl = dedup_ttl
        self.request_ttl = request_ttl
        self.scratch: dict[str, Any] = {}  # per-poll state the plugins share between prepare() and handle()
        self._tasks: list[tuple[Incoming, Task]] = []
        self._stores: list[tuple[Incoming, str]] = []

    def enqueue(self, request: Incoming, task: Task) -> None:
        """Put the request's task into ``seeds`` (unless the request was seen before)."""
        self._tasks.append((request, task))

    def store(self, request: Incoming, key: str) -> None:
        """Leave the request under ``key`` and in its kind's stream for the Redis monitors."""
        self._stores.append((request, key))

    def write(self) -> Counter[str]:
        """Do every queued write (two round trips); returns how many requests each plugin wrote."""
        pipe = self.redis.pipeline(transaction=False)
        if self._tasks:
            seen = [keys.intake_seen(content_digest(request.data)) for request, _ in self._tasks]  # uuid left out
            script_keys, args = push_seeds_call([task for _, task in self._tasks], seen, self.dedup_ttl)
            deliveries = [request.delivery for request, _ in self._tasks]
            INTAKE_PUSH.queue_eval(pipe, script_keys, [len(deliveries), *deliveries, *args])
        for request, key in self._stores:
            REQUEST_STORE.queue_eval(pipe, [key, keys.request_stream(request.kind)],
                                     [request.request.canonical if request.request else "", self.request_ttl])
        results = pipe.execute() if len(pipe) else []
        written: Counter[str] = Counter()
        if self._tasks:
            enqueued: Counter[str] = Counter()
            for (request, task), code in zip(self._tasks, results[0], strict=True):
                code = int(code)
                request.outcome = {1: ENQUEUED, 0: QUEUED_ALREADY, 2: REDELIVERED, 3: REDELIVERED}.get(code, DUPLICATE)
                if request.outcome == REDELIVERED:
                    request.detail["enqueued"] = code == 2  # what the first delivery did
                    continue  # written and counted when it was first delivered
                if request.outcome == ENQUEUED:
                    enqueued[task.crawlid] += 1
                if request.outcome != DUPLICATE:
                    written[request.plugin] += 1
            self._count_enqueued(enqueued)
            results = results[1:]
        for (request, _), created in zip(self._stores, results, strict=True):
            request.outcome = STORED if int(created) else DUPLICATE
            if created:
                written[request.plugin] += 1
        return written

    def _count_enqueued(self, enqueued: Counter[str]) -> None:
        if not enqueued:
            return
        pipe = self.redis.pipeline(transaction=False)
        for crawlid, count in enqueued.items():
            pipe.hincrby(keys.crawl(crawlid), CrawlFields.ENQUEUED, count)
        pipe.execute()
