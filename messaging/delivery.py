"""Records on Kafka exactly once as a consumer of the topic sees them, across broker pauses and restarts (issue 37).

A pause of the broker (SIGSTOP for 30 s) across a crawl's end put two identical ``crawl_finished`` events on the
outbound topic: a produce request timed out while the broker held it, and was sent again — once by the producer's
own retry (idempotence off, acks=1), once more by the master's next attempt after the first one timed out. Three
things close those doors:

1. **Idempotent producing** (:func:`messaging.clients.kafka_producer`: ``acks=all``, idempotence on where the broker
   supports it — Apache Kafka since 0.11, and Tansu, the local broker, whose support ``tests/integration/
   test_delivery.py`` checks): the broker drops a retried batch it already appended (producer id and sequence).
2. **One send per record** (:class:`Delivery`): every record carries an id (the header ``crawlfleet-id``: the
   event's ``event_id``, the answered request's stream entry, the rejected record's offset). A call that gives up
   waiting (:class:`DeliveryPending`, after ``timeout``) leaves the record with the producer, which keeps retrying
   it idempotently for CRAWLFLEET_KAFKA_DELIVERY_TIMEOUT; the caller's next call with the same id waits for that same
   send instead of making another one.
3. **A note, and a check before sending again**: before the first attempt, where the record will be is noted —
   the partition (from the key, as Kafka's own partitioner picks it) and an offset at or before the one it will get
   — in memory and, with a Redis client, under ``delivery:<id>`` (``sending``; ``sent`` once acknowledged, kept for
   CRAWLFLEET_INTAKE_DEDUP_TTL). A ``sent`` note means the record is on the topic: a redelivered request (a monitor
   that died before committing its offsets) is not answered twice. When the producer gave up on a record (its
   delivery timeout passed, a broker restart lost its producer state), or a ``sending`` note outlived its writer (a
   crash between producing and the acknowledgement; a new leader, or the monitor that takes a request over, finds
   it), the record may or may not be on the topic: it is sent again only if a read of its partition from the noted
   offset does not find its id.

What is left: a producer that is still retrying a record in a process that has stopped listening for it (a master
that lost its leadership mid-send; its producer is closed without delivering what it holds, but a request already
at the broker can still land) can race with the process that took over; the check then runs before the late copy
lands. And a broker that loses its log (Tansu keeps topics in memory: a restarted broker starts empty) loses what it
had acknowledged: that is the broker's guarantee, not the producer's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kafka import TopicPartition
from kafka.partitioner.default import murmur2

from messaging import clients, keys
from messaging.bounded import count_evictions, declare_memo
from messaging.clients import RedisClient, as_text
from messaging.settings import Settings

logger = logging.getLogger(__name__)

HEADER = "crawlfleet-id"
DELIVERED_KEPT = 10_000  # ids acknowledged in this process, remembered so that a caller's retry sends nothing
SENDING, SENT = "sending", "sent"
CHECK_POLL_MS = 200
MAX_BLOCK_MS = 10_000  # a send waits at most this long for the topic's metadata (a paused broker)


class DeliveryPending(TimeoutError):
    """Kafka has not acknowledged every record within the timeout; call again with the same records (nothing is
    sent twice: a record still with the producer is waited for, one it gave up on is looked for first)."""


@dataclass(frozen=True)
class Record:
    topic: str
    value: Any
    key: str | None
    id: str
    partition: int | None = None  # where it goes: from the key, as Kafka's partitioner picks it
    since: int | None = None  # an offset of that partition at or before the one the record gets


@dataclass
class _Attempt:
    record: Record
    future: Any


class Delivery:
    """Produces records once each (see the module docstring); thread-safe."""

    def __init__(self, settings: Settings, redis: RedisClient | None = None,
                 producer_factory: Callable[[], Any] | None = None,
                 reader_factory: Callable[[], Any] | None = None) -> None:
        """With ``redis`` the notes of where each record is outlive this process (CRAWLFLEET_INTAKE_DEDUP_TTL); the
        reader (a consumer without a group) answers offsets and reads partitions for the check."""
        self.settings = settings
        self.redis = redis
        self.note_ttl = max(60, int(settings.intake_dedup_ttl))
        self._factory = producer_factory or (lambda: clients.kafka_producer(settings, max_block_ms=MAX_BLOCK_MS))
        self._reader_factory = reader_factory or (
            lambda: clients.kafka_consumer(settings, group_id=None, enable_auto_commit=False))
        self._producer: Any = None
        self._reader: Any = None
        self._lock = threading.RLock()
        self._pending: dict[str, _Attempt] = {}
        self._delivered: OrderedDict[str, None] = OrderedDict()
        declare_memo("delivered_ids")
        self._acked: list[Record] = []  # acknowledged, their notes not yet marked sent
        self._next_offset: dict[TopicPartition, int] = {}  # after the last record this process saw acknowledged
        self.checks = 0  # partitions read before a send again (tests, logs)
        self.found = 0  # records those reads found on the topic already

    # --- the one entry point --------------------------------------------------------------------------------------
    def send(self, records: Sequence[Record], timeout: float = 30.0) -> None:
        """Produce each record once and return when Kafka has acknowledged all of them; :class:`DeliveryPending`
        after ``timeout`` seconds (call again with the same records)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            todo = [r for r in dict((r.id, r) for r in records).values() if r.id not in self._delivered]
            fresh = [r for r in todo if r.id not in self._pending]
            noted = self._recall([r.id for r in fresh])
            placed: list[Record] = []
            for record in fresh:
                note = noted.get(record.id)
                if note is None:
                    placed.append(self._placed(record, deadline))
                    continue
                record = replace(record, partition=note[0], since=note[1])
                if note[2] == SENT or self._on_topic(record, deadline):
                    self._acknowledged(record, -1)  # an earlier attempt (another process, a crash) got it there
                else:
                    placed.append(record)
            self._note([r for r in placed if r.id not in noted], SENDING)
            for record in placed:
                self._start(record)
            try:
                self._settle([self._pending[r.id] for r in todo if r.id in self._pending], deadline)
            finally:
                done, self._acked = self._acked, []
                self._note(done, SENT)

    def abandon(self) -> None:
        """Close the producer without delivering what it still holds (a leader that lost its leadership: its
        successor decides, with the notes, what was sent)."""
        with self._lock:
            producer, self._producer = self._producer, None
            self._pending.clear()
        if producer is not None:
            clients.discard_producer(producer)

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            if self._producer is not None:
                self._producer.close(timeout=timeout)
                self._producer = None
            if self._reader is not None:
                self._reader.close(autocommit=False)
                self._reader = None

    # --- steps ----------------------------------------------------------------------------------------------------
    def _placed(self, record: Record, deadline: float) -> Record:
        """The record with its partition and an offset to look for it from (noted before anything is sent). The
        first record of a topic learns the end offsets of all its partitions, in one request."""
        partition = self._partition(record)
        tp = TopicPartition(record.topic, partition)
        if tp not in self._next_offset:
            partitions = [TopicPartition(record.topic, p) for p in sorted(self._kafka().partitions_for(record.topic))]
            ends = self._offsets().end_offsets(partitions, timeout_ms=_ms_left(deadline))
            for each, end in ends.items():
                self._next_offset.setdefault(each, int(end))
        return replace(record, partition=partition, since=self._next_offset[tp])

    def _note(self, records: list[Record], state: str) -> None:
        """Where each record is (or will be), in Redis (one round trip): ``sending`` before it is sent, ``sent`` once
        Kafka acknowledged it."""
        if self.redis is None or not records:
            return
        pipe = self.redis.pipeline(transaction=False)
        for r in records:
            pipe.set(keys.delivery_note(r.id), f"{r.topic}\t{r.partition}\t{r.since}\t{state}", ex=self.note_ttl)
        pipe.execute()

    def _start(self, record: Record) -> None:
        future = self._kafka().send(record.topic, record.value, key=record.key, partition=record.partition,
                                    headers=[(HEADER, record.id.encode())])
        self._pending[record.id] = _Attempt(record, future)

    def _settle(self, attempts: list[_Attempt], deadline: float) -> None:
        """Wait for the attempts; one the producer gave up on is looked for on the topic, and sent again if absent."""
        waiting = list(attempts)
        while waiting:
            left: list[_Attempt] = []
            for attempt in waiting:
                future_wait(attempt.future, deadline)
                record = attempt.record
                if not attempt.future.is_done:
                    left.append(attempt)
                elif attempt.future.succeeded():
                    self._acknowledged(record, getattr(attempt.future.value, "offset", -1))
                elif self._on_topic(record, deadline):
                    self._acknowledged(record, -1)
                else:
                    logger.warning("Kafka did not take %s (%s): sending it again", record.id,
                                   attempt.future.exception)
                    self._start(record)
                    left.append(self._pending[record.id])
            if left and time.monotonic() >= deadline:
                raise DeliveryPending(f"Kafka has not acknowledged {len(left)} record(s) yet; the producer keeps "
                                      "them, the next call waits for the same sends")
            waiting = left

    def _acknowledged(self, record: Record, offset: int | None) -> None:
        self._pending.pop(record.id, None)
        self._delivered[record.id] = None
        while len(self._delivered) > DELIVERED_KEPT:
            self._delivered.popitem(last=False)
            count_evictions("delivered_ids")
        if offset is not None and offset >= 0:  # -1: the broker had it already (a deduplicated retry)
            tp = TopicPartition(record.topic, int(record.partition or 0))
            self._next_offset[tp] = max(self._next_offset.get(tp, 0), offset + 1)
        self._acked.append(record)

    # --- the check --------------------------------------------------------------------------------------------------
    def _on_topic(self, record: Record, deadline: float) -> bool:
        """Whether the record's partition holds its id, from its noted offset on (a log that restarted empty is read
        from its beginning). :class:`DeliveryPending` when the read cannot finish in time."""
        tp = TopicPartition(record.topic, int(record.partition or 0))
        reader = self._offsets()
        end = int(reader.end_offsets([tp], timeout_ms=_ms_left(deadline))[tp])
        start = int(record.since or 0)
        if end < start:  # the log is shorter than when the note was taken: the broker started empty
            start = int(reader.beginning_offsets([tp], timeout_ms=_ms_left(deadline))[tp])
        self.checks += 1
        reader.assign([tp])
        reader.seek(tp, start)
        wanted = (HEADER, record.id.encode())
        while reader.position(tp) < end:
            if time.monotonic() >= deadline:
                raise DeliveryPending(f"could not read {tp.topic}[{tp.partition}] to check for {record.id} in time")
            for batch in reader.poll(timeout_ms=CHECK_POLL_MS).values():
                if any(wanted in (r.headers or []) for r in batch):
                    self.found += 1
                    logger.info("%s was on %s[%d] already: not sent again", record.id, tp.topic, tp.partition)
                    return True
        return False

    # --- clients and notes ----------------------------------------------------------------------------------------
    def _kafka(self) -> Any:
        if self._producer is None:
            self._producer = self._factory()
            if not clients.is_idempotent(self._producer):
                logger.warning("the Kafka producer is not idempotent (broker too old, or "
                               "CRAWLFLEET_KAFKA_IDEMPOTENCE off): a retry after a timeout may repeat a record")
        return self._producer

    def _offsets(self) -> Any:
        if self._reader is None:
            self._reader = self._reader_factory()
        return self._reader

    def _partition(self, record: Record) -> int:
        """Where Kafka's default partitioner puts the record's key (murmur2 over all partitions, as the Java client
        does); a record without a key goes where its id hashes."""
        partitions = sorted(self._kafka().partitions_for(record.topic))
        key = (record.key if record.key is not None else record.id).encode()
        return int(partitions[(murmur2(key) & 0x7FFFFFFF) % len(partitions)])

    def _recall(self, ids: list[str]) -> dict[str, tuple[int, int, str]]:
        """Notes an earlier attempt left in Redis: (partition, offset, ``sending`` | ``sent``) by record id."""
        if self.redis is None or not ids:
            return {}
        pipe = self.redis.pipeline(transaction=False)
        for record_id in ids:
            pipe.get(keys.delivery_note(record_id))
        found: dict[str, tuple[int, int, str]] = {}
        for record_id, raw in zip(ids, pipe.execute(), strict=True):
            if raw is not None:
                _topic, partition, since, state = as_text(raw).split("\t")
                found[record_id] = (int(partition), int(since), state)
        return found


def _ms_left(deadline: float) -> int:
    """Milliseconds until ``deadline`` (monotonic), at least one second: a lookup that cannot finish raises."""
    return max(1000, int((deadline - time.monotonic()) * 1000))


def future_wait(future: Any, deadline: float) -> None:
    """Wait for a kafka-python future until ``deadline`` (monotonic), without raising its error."""
    left = deadline - time.monotonic()
    if left <= 0:
        return
    try:
        future.get(timeout=left)
    except Exception:  # failed or timed out: the caller looks at future.is_done / succeeded()
        pass
