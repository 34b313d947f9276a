"""The write buffer behind the MongoDB pipeline: batches, one write at a time in a thread, retries without end.

Why a buffer of its own: a task is acknowledged only once its items are durably stored, so each item carries a
:class:`~twisted.internet.defer.Deferred` that fires when the batch holding it was acknowledged by the store, and
never because the store is down. The buffer knows nothing of Scrapy or MongoDB: it is given a blocking ``write``
callable (run in a thread) and a Twisted clock, so its timing (flush period, back-off, outage reports, the bounded
wait at close) runs in simulated time in the unit tests.

- Items wait in a FIFO. A write takes up to ``batch`` of them, when that many wait or every ``flush_seconds``;
  there is at most one write (or one retry of it) at a time, so batches land in order and a slow store is not
  hit by a pile of parallel writes.
- A write that raises is retried with the very same batch after a back-off (``backoff_initial`` doubling up to
  ``backoff_max``); new items keep queueing behind it. The log gets one line when the store is lost, one when it
  is back (and, if ``report_every`` is given, one every so many seconds while it stays down): never a traceback per
  attempt (only the first failure of an outage carries one, and only when the error is not of the expected,
  ``transient`` kinds).
- ``write`` returns the positions of items the store refused for good (a document too large, an invalid one):
  retrying those cannot help, so their Deferreds errback with :class:`Refused`, and the others fire.
- Back-pressure: ``on_backlog(True, waiting)`` once when ``capacity`` items wait, ``on_backlog(False, waiting)``
  once when they drain below half of it.
- :meth:`WriteBuffer.close` writes everything left, retrying up to ``timeout`` seconds, and tells how many items
  were not written. Their Deferreds never fire: an item that is not stored must not look processed.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.internet.threads import deferToThread
from twisted.python.failure import Failure

from messaging.reactor import running_reactor

logger = logging.getLogger(__name__)

Write = Callable[[Sequence["Pending"]], Mapping[int, str]]


class Refused(Exception):
    """The store refused this item for good (it was not written, and retrying would not write it)."""


@dataclass(slots=True)
class Pending:
    """One item waiting to be written."""

    collection: str
    key: str
    document: dict[str, Any]
    item: Any
    done: Deferred[Any]


class WriteBuffer:
    """Batches items into a blocking ``write`` run by ``run_in_thread``; see the module docstring."""

    def __init__(self, write: Write, *, batch: int, flush_seconds: float, capacity: int,
                 on_backlog: Callable[[bool, int], None] | None = None,
                 on_written: Callable[[int, int], None] | None = None,
                 clock: IReactorTime | None = None, run_in_thread: Callable[..., Deferred[Any]] | None = None,
                 backoff_initial: float = 0.5, backoff_max: float = 10.0, report_every: float | None = None,
                 transient: tuple[type[BaseException], ...] = (), store: str = "the store") -> None:
        self.clock = clock if clock is not None else running_reactor()
        self.run_in_thread = run_in_thread or deferToThread
        self.write = write
        self.batch = max(1, int(batch))
        self.flush_seconds = flush_seconds
        self.capacity = max(1, int(capacity))
        self.on_backlog = on_backlog or (lambda full, waiting: None)
        self.on_written = on_written or (lambda stored, refused: None)
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.report_every = report_every
        self.transient = transient
        self.store = store
        self.written = 0  # items acknowledged by the store
        self.refused = 0
        self.full = False
        self._queue: deque[Pending] = deque()
        self._inflight: list[Pending] | None = None  # the batch being written, or waiting for its retry
        self._retry: Any = None  # IDelayedCall of the next attempt
        self._failures = 0  # consecutive failed attempts of the current outage
        self._down_since: float | None = None  # when the first failed attempt of the outage started
        self._attempt_started = 0.0
        self._last_report = 0.0
        self._closing = False
        self._gave_up = False  # close() stopped waiting: no new attempts
        self._drained: list[Deferred[int]] = []
        self._loop = LoopingCall(self._tick)
        self._loop.clock = self.clock

    # --- the interface -----------------------------------------------------------------------------------------
    @property
    def waiting(self) -> int:
        """Items not written yet (queued, or in the batch being written)."""
        return len(self._queue) + len(self._inflight or ())

    @property
    def down(self) -> bool:
        return self._down_since is not None

    def start(self) -> None:
        if self.flush_seconds > 0 and not self._loop.running:
            self._loop.start(self.flush_seconds, now=False)

    def add(self, collection: str, key: str, document: dict[str, Any], item: Any) -> Deferred[Any]:
        """Queue one item; the Deferred fires with ``item`` once its batch is acknowledged by the store."""
        done: Deferred[Any] = Deferred()
        self._queue.append(Pending(collection, key, document, item, done))
        self._check_backlog()
        if len(self._queue) >= self.batch or self._closing:
            self._flush()
        return done

    def close(self, timeout: float = 30.0) -> Deferred[int]:
        """Write every waiting item, retrying up to ``timeout`` seconds; fires with how many were not written."""
        self._closing = True
        if self._loop.running:
            self._loop.stop()
        drained: Deferred[int] = Deferred()
        if not self.waiting:
            drained.callback(0)
            return drained
        self._drained.append(drained)
        give_up = self.clock.callLater(timeout, self._give_up)

        def drained_in_time(result: int | Failure) -> int | Failure:
            if give_up.active():
                give_up.cancel()
            return result

        drained.addBoth(drained_in_time)
        self._flush()
        return drained

    # --- writing -----------------------------------------------------------------------------------------------
    def _tick(self) -> None:
        if self._queue:
            self._flush()

    def _flush(self) -> None:
        if self._inflight is not None or not self._queue or self._gave_up:
            return  # one write at a time: the one under way takes the next batch when it is done
        take = min(self.batch, len(self._queue))
        self._inflight = [self._queue.popleft() for _ in range(take)]
        self._attempt()

    def _attempt(self) -> None:
        self._retry = None
        self._attempt_started = self.clock.seconds()
        batch = self._inflight
        assert batch is not None
        attempt = maybeDeferred(self.run_in_thread, self.write, batch)
        attempt.addCallbacks(self._written, self._failed)
        attempt.addErrback(self._bug)

    def _written(self, refused: Mapping[int, str] | None) -> None:
        batch, self._inflight = self._inflight or [], None
        if self._down_since is not None:
            logger.warning("%s is back after %.1fs of failing writes: %d items written, %d still waiting", self.store,
                           self.clock.seconds() - self._down_since, len(batch), self.waiting)
            self._down_since = None
        self._failures = 0
        refused = refused or {}
        stored = len(batch) - len(refused)
        self.written += stored
        self.refused += len(refused)
        self._check_backlog()
        self.on_written(stored, len(refused))
        for position, pending in enumerate(batch):
            reason = refused.get(position)
            if pending.done.called:
                continue  # its waiter went away (cancelled at shutdown): nothing to tell
            if reason is None:
                pending.done.callback(pending.item)
            else:
                logger.warning("%s refused the item of %s: %s", self.store, pending.key, reason)
                pending.done.errback(Failure(Refused(f"{self.store} refused the item: {reason}")))
        if self._closing or len(self._queue) >= self.batch:
            self._flush()
        self._maybe_drained()

    def _failed(self, failure: Failure) -> None:
        self._failures += 1
        now = self.clock.seconds()
        delay = min(self.backoff_max, self.backoff_initial * 2 ** (self._failures - 1))
        kind = type(failure.value).__name__
        if self._down_since is None:
            self._down_since, self._last_report = self._attempt_started, now
            expected = failure.check(*self.transient) if self.transient else None
            logger.warning("%s write failed (%s: %s): %d items waiting, retrying with back-off up to %.0fs",
                           self.store, kind, _one_line(failure.getErrorMessage()), self.waiting,
                           self.backoff_max, exc_info=None if expected else failure.value)
        elif self.report_every is not None and now - self._last_report >= self.report_every:
            self._last_report = now
            logger.warning("%s still failing after %.0fs (%s): %d items waiting", self.store,
                           now - self._down_since, kind, self.waiting)
        if self._gave_up:
            return
        self._retry = self.clock.callLater(delay, self._attempt)

    def _bug(self, failure: Failure) -> None:
        # Only a bug of this class gets here (an item's own callbacks cannot raise into it): log it and make sure a
        # batch is never left stranded without an attempt scheduled.
        logger.error("write buffer failed", exc_info=failure.value)
        if self._inflight is not None and self._retry is None:
            self._retry = self.clock.callLater(self.backoff_max, self._attempt)

    # --- back-pressure and closing -----------------------------------------------------------------------------
    def _check_backlog(self) -> None:
        waiting = self.waiting
        if not self.full and waiting >= self.capacity:
            self.full = True
            self.on_backlog(True, waiting)
        elif self.full and waiting < self.capacity / 2:
            self.full = False
            self.on_backlog(False, waiting)

    def _maybe_drained(self) -> None:
        if self._closing and not self.waiting:
            self._fire_drained(0)

    def _give_up(self) -> None:
        self._gave_up = True
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
            self._retry = None
        self._fire_drained(self.waiting)

    def _fire_drained(self, left: int) -> None:
        drained, self._drained = self._drained, []
        for waiter in drained:
            waiter.callback(left)


def _one_line(message: str, limit: int = 160) -> str:
    line = " ".join(message.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
