"""The Kafka monitor's loop: poll, validate, let the plugin chain write to Redis, report rejections, commit.

Per poll (up to CRAWLFLEET_KAFKA_MONITOR_BATCH records): every record is decoded, recognised and validated; the
valid ones pass through the plugin chain (CRAWLFLEET_KAFKA_MONITOR_PLUGINS, in order); the batch's Redis writes are
done in a few round trips; rejections go to the failed topic (the original, truncated, with the reason) and, when the
request carried a ``uuid``, an answer goes to the outbound topic; Kafka acknowledges them; then the offsets are
committed. When anything before the commit fails (Redis or Kafka unreachable), the consumer seeks back to the batch's
first offsets and tries again after a pause, so a request is never skipped; the idempotence keys make the retry
harmless, and so do the answers' and rejections' ids (their source record's offset): ``messaging.delivery`` sends
each of them once, also to a monitor that gets the batch again after another one died before its commit.

Back-pressure: while ``seeds`` holds more than CRAWLFLEET_SEEDS_HIGH_WATER tasks the monitor pauses its partitions
(``KafkaConsumer.pause``: it stays in the group, fetches nothing) and resumes below CRAWLFLEET_SEEDS_LOW_WATER.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from typing import Any

from kafka import ConsumerRebalanceListener
from kafka.errors import CommitFailedError

from messaging import clients, keys, modules, request_kinds
from messaging.answers import answer_for, failed_record
from messaging.clients import RedisClient
from messaging.delivery import Delivery, Record
from messaging.health import Beat, Health, outage_clear
from messaging.kafka_monitor.batch import DUPLICATE, REDELIVERED, REJECTED, Batch, Incoming
from messaging.kafka_monitor.plugins import Plugin
from messaging.outage import OutageLog
from messaging.plugins import load_plugins
from messaging.service import run_service
from messaging.settings import Settings
from messaging.stats import Stats
from messaging.validation import Rejected, parse_request

MODULE = modules.KAFKA_MONITOR
RETRY_PAUSE = 2.0
WATER_CHECK_INTERVAL = 0.5
logger = logging.getLogger("crawlfleet.kafka_monitor")


def topic_partitions(settings: Settings) -> dict[str, int]:
    count = max(4, settings.incoming_partitions)
    return {settings.topic_incoming: count, settings.topic_outbound: count, settings.topic_failed: count}


class _Assignment(ConsumerRebalanceListener):
    def __init__(self, monitor: KafkaMonitor) -> None:
        self.monitor = monitor

    def on_partitions_revoked(self, revoked: Any) -> None:
        logger.info("kafka-monitor: partitions revoked: %s", _names(revoked))

    def on_partitions_assigned(self, assigned: Any) -> None:
        logger.info("kafka-monitor: partitions assigned: %s", _names(assigned))
        self.monitor.assigned = set(assigned)
        if self.monitor.paused and assigned:
            self.monitor.consumer.pause(*assigned)


def _names(partitions: Any) -> str:
    return ", ".join(sorted(f"{tp.topic}[{tp.partition}]" for tp in partitions)) or "none"


class KafkaMonitor:
    def __init__(self, settings: Settings, redis: RedisClient | None = None,
                 plugins: list[Plugin] | None = None) -> None:
        self.settings = settings
        self.redis = redis if redis is not None else clients.redis_client(settings)
        self.plugins = plugins if plugins is not None else load_plugins(request_kinds.kafka_chain(settings))
        self.stats = Stats(self.redis, MODULE)
        self.consumer: Any = None
        self.delivery = Delivery(settings, self.redis)
        self.assigned: set[Any] = set()
        self.paused = False
        self._stop = threading.Event()
        self._last_water_check = 0.0
        self.outage = OutageLog(logger, "kafka-monitor: a batch (Redis or Kafka; retried from its first offsets)")
        self.water_outage = OutageLog(logger, "kafka-monitor: reading the size of seeds (Redis)")
        self.beat = Beat()  # the consume loop's turns (/livez)

    def health_checks(self, health: Health) -> None:
        """Live while the consume loop turns; ready while its batches reach Redis and Kafka."""
        health.beat("consume", self.beat)
        health.ready("intake", outage_clear(self.outage))

    # --- lifecycle -----------------------------------------------------------------------------------------------
    def connect(self) -> None:
        clients.ensure_topics(self.settings, topic_partitions(self.settings))
        self.consumer = clients.kafka_consumer(
            self.settings, group_id=self.settings.kafka_group, max_poll_records=self.settings.kafka_monitor_batch,
            max_partition_fetch_bytes=max(1 << 20, self.settings.max_message_bytes * 2), fetch_max_bytes=64 << 20)
        self.consumer.subscribe([self.settings.topic_incoming], listener=_Assignment(self))

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close(autocommit=False)
        self.delivery.close(timeout=10)

    def run(self) -> None:
        """Consume until :meth:`stop`; every failure before a commit is retried from the batch's first offsets."""
        while not self._stop.is_set():
            self.beat.tick()
            self.check_water()
            records = self.consumer.poll(timeout_ms=500)
            if not records:
                continue
            try:
                self.process(records)
            except Exception as exc:  # Redis or Kafka unreachable: retry the batch, never skip it
                self._rewind(records, exc)
            else:
                self.outage.ok()

    def _rewind(self, records: dict[Any, list[Any]], exc: BaseException) -> None:
        self.outage.failed(exc)
        for tp, batch in records.items():
            if batch and tp in self.consumer.assignment():
                self.consumer.seek(tp, batch[0].offset)
        self._stop.wait(RETRY_PAUSE)

    # --- back-pressure -------------------------------------------------------------------------------------------
    def check_water(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_water_check < WATER_CHECK_INTERVAL:
            return
        self._last_water_check = now
        try:
            size = int(self.redis.zcard(keys.SEEDS))
        except Exception as exc:  # Redis away: the batch write will fail and be retried anyway
            self.water_outage.failed(exc)  # once per outage, not twice a second
            return
        self.water_outage.ok()
        partitions = list(self.consumer.assignment())
        if not self.paused and size > self.settings.seeds_high_water:
            self.paused = True
            if partitions:
                self.consumer.pause(*partitions)
            logger.warning("kafka-monitor: paused consuming: seeds holds %d tasks, above the high-water mark %d",
                           size, self.settings.seeds_high_water)
        elif self.paused and size < self.settings.seeds_low_water:
            self.paused = False
            if partitions:
                self.consumer.resume(*partitions)
            logger.warning("kafka-monitor: resumed consuming: seeds holds %d tasks, below the low-water mark %d",
                           size, self.settings.seeds_low_water)

    # --- one batch -----------------------------------------------------------------------------------------------
    def process(self, records: dict[Any, list[Any]]) -> list[Incoming]:
        incoming = [Incoming(r.topic, r.partition, r.offset, r.value or b"") for batch in records.values()
                    for r in batch]
        max_bytes = self.settings.max_message_bytes
        for item in incoming:
            try:
                item.request = parse_request(item.raw, max_bytes)
            except Rejected as rejection:
                item.rejection, item.outcome = rejection, REJECTED
            except Exception as exc:  # a bug must not turn one message into a poison pill that blocks its partition
                logger.exception("kafka-monitor: cannot read %s[%d]@%d", item.topic, item.partition, item.offset)
                item.rejection, item.outcome = Rejected("$", f"unreadable message ({type(exc).__name__})"), REJECTED
        batch = Batch(self.redis, self.settings.intake_dedup_ttl, self.settings.request_ttl)
        for plugin in self.plugins:
            mine = [item for item in incoming if item.request and not item.rejection and item.kind in plugin.kinds]
            if not mine:
                continue
            plugin.prepare(mine, batch)
            for item in mine:
                item.plugin = plugin.name
                try:
                    plugin.handle(item, batch)
                except Rejected as rejection:
                    item.rejection, item.outcome = rejection, REJECTED
                except Exception as exc:  # a plugin's bug rejects this request instead of blocking the partition
                    logger.exception("kafka-monitor: plugin %s failed on %s[%d]@%d", plugin.name, item.topic,
                                     item.partition, item.offset)
                    item.rejection = Rejected("$", f"plugin {plugin.name} failed: {type(exc).__name__}: {exc}")
                    item.outcome = REJECTED
        written = batch.write()
        self._report(incoming)
        self._commit()
        self._count(written, incoming)
        return incoming

    def _report(self, incoming: list[Incoming]) -> None:
        records: list[Record] = []
        rejected = 0
        for item in incoming:
            source = f"{item.topic}:{item.partition}:{item.offset}"
            if item.rejection is not None:
                rejected += 1
                records.append(Record(self.settings.topic_failed, failed_record(item), None, f"rejected:{source}"))
                logger.debug("kafka-monitor: rejected %s[%d]@%d: %s", item.topic, item.partition, item.offset,
                             item.rejection.reason)
            answer = answer_for(item)
            if answer is not None:
                records.append(Record(self.settings.topic_outbound, answer, answer["uuid"], f"answer:{source}"))
        self.delivery.send(records, timeout=30)
        if rejected:
            logger.info("kafka-monitor: rejected %d of %d requests (reasons on %s)", rejected, len(incoming),
                        self.settings.topic_failed)

    def _commit(self) -> None:
        try:
            self.consumer.commit()
        except CommitFailedError as exc:
            # The group rebalanced meanwhile: the new owner gets these records again and the idempotence keys
            # turn them into duplicates.
            logger.warning("kafka-monitor: commit failed after a rebalance (records will be redelivered): %s", exc)

    def _count(self, written: Counter[str], incoming: list[Incoming]) -> None:
        counts = Counter(written)
        counts["rejected"] = sum(1 for item in incoming if item.outcome == REJECTED)
        counts["duplicate"] = sum(1 for item in incoming if item.outcome == DUPLICATE)
        counts["redelivered"] = sum(1 for item in incoming if item.outcome == REDELIVERED)
        for plugin, count in counts.items():
            if count:
                try:
                    self.stats.incr(plugin, count)
                except Exception:  # counting must never fail a batch that is already committed
                    logger.exception("kafka-monitor: could not count %s", plugin)


def run(settings: Settings) -> None:
    """``crawlfleet kafka-monitor``: run until SIGTERM/SIGINT, with heartbeat and /metrics."""
    monitor = KafkaMonitor(settings)
    run_service(monitor, settings, MODULE, lambda url: (
        f"kafka-monitor: consuming {settings.topic_incoming} as group {settings.kafka_group} "
        f"(plugins: {', '.join(plugin.name for plugin in monitor.plugins)}; metrics {url})"))
