"""Plugins of the Kafka monitor: small classes with a common interface, chained in the order of a setting.

A plugin names the request kinds it handles and the counter it bumps. For each poll, every plugin in turn sees the
valid requests of its kinds that no earlier plugin rejected: first all of them at once (:meth:`Plugin.prepare`, for
batched reads), then one by one (:meth:`Plugin.handle`), which either queues a Redis write on the batch
(:class:`messaging.kafka_monitor.batch.Batch`) or raises :class:`~messaging.validation.Rejected` with a reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from messaging.validation import Rejected

if TYPE_CHECKING:
    from messaging.kafka_monitor.batch import Batch, Incoming

__all__ = ["Plugin", "Rejected"]


class Plugin:
    """Base class: set ``name`` (the counter, ``stats:kafka-monitor:<name>:<window>``) and ``kinds``."""

    name: ClassVar[str] = ""
    kinds: ClassVar[frozenset[str]] = frozenset()

    def prepare(self, requests: list[Incoming], batch: Batch) -> None:
        """Batched work before :meth:`handle` (e.g. one pipeline of reads for the whole poll)."""

    def handle(self, request: Incoming, batch: Batch) -> None:
        """Queue the request's Redis write on ``batch``, or raise :class:`Rejected`."""
        raise NotImplementedError
