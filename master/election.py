"""Which master dispatches: a ZooKeeper election, and an epoch that fences an old leader out of Redis.

Every ``crawlfleet master`` contends in ``<root>/master/election`` (kazoo's ``Election`` recipe: an ephemeral
sequential lock node; the lowest holds the lock). The winner takes a new **epoch** (``INCR master:{seeds}:epoch``)
and leads until its ZooKeeper connection is *suspended* (not merely lost: a suspended session may already be expired
on the server, and another master may be leading), until it is told to stop, or until a Redis write is refused
because a newer epoch exists. The dispatch scripts compare their epoch with the current one, so a leader that was
paused (GC, SIGSTOP, a network partition) and wakes up after a standby took over cannot write: its stage step is
refused, and its half-moved batches are settled by the new leader (``master.staging``).

With a short session timeout (CRAWLFLEET_ZK_TIMEOUT, 4–6 s) a standby takes over within about that time after the
leader's host dies or the leader is killed with SIGKILL (its ephemeral node disappears when the session expires).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from messaging import keys
from messaging.clients import RedisClient
from messaging.outage import OutageLog

logger = logging.getLogger(__name__)


class Leadership:
    """Contend, lead with an epoch, step down on suspension; ``run`` returns when :meth:`stop` is called."""

    def __init__(self, zk: Any, redis: RedisClient, path: str, identifier: str) -> None:
        self.zk = zk
        self.redis = redis
        self.path = path
        self.identifier = identifier
        self.stopping = threading.Event()
        self._election: Any = None
        self._lock = threading.Lock()
        self.contending = False  # in the election now: leading, or its node waiting behind the leader's
        self.outage = OutageLog(logger, "master: the election (ZooKeeper, or Redis for the epoch)")

    def run(self, lead: Callable[[int, threading.Event], None]) -> None:
        """Call ``lead(epoch, lost)`` each time this process wins; ``lost`` is set when it must step down."""
        from kazoo.exceptions import KazooException
        from kazoo.protocol.states import KazooState

        def back(state: str) -> bool:  # a standby waiting in the election learns of ZooKeeper's return here
            if state == KazooState.CONNECTED:
                self.outage.ok()
            return False

        self.zk.add_listener(back)
        while not self.stopping.is_set():
            with self._lock:
                self._election = self.zk.Election(self.path, self.identifier)
            try:
                self._contend(lead)
            except KazooException as exc:  # connection trouble while contending: wait for it to come back
                self.outage.failed(exc)
                self.stopping.wait(1.0)
            except Exception as exc:  # Redis away (the epoch), or the leader's loop failed: one line per outage
                self.outage.failed(exc)
                self.stopping.wait(1.0)

    def _contend(self, lead: Callable[[int, threading.Event], None]) -> None:
        self.contending = True
        try:
            self._election.run(self._lead, lead)
        finally:
            self.contending = False

    def standing(self) -> str | None:
        """A readiness check: None while this master leads or stands by in the election, else why not."""
        from kazoo.protocol.states import KazooState

        if self.zk.state != KazooState.CONNECTED:
            return f"ZooKeeper session {str(self.zk.state).lower()}"
        if not self.contending:
            return "not in the election"
        return None

    def stop(self) -> None:
        self.stopping.set()
        with self._lock:
            if self._election is not None:
                self._election.cancel()

    def _lead(self, lead: Callable[[int, threading.Event], None]) -> None:
        from kazoo.protocol.states import KazooState

        lost = threading.Event()

        def on_state(state: str) -> bool:
            if state != KazooState.CONNECTED:
                lost.set()
                return True  # remove this listener
            return False

        self.zk.add_listener(on_state)
        led = False
        try:
            if self.zk.state != KazooState.CONNECTED or self.stopping.is_set():
                return
            epoch = int(self.redis.incr(keys.MASTER_EPOCH))
            self.outage.ok()
            logger.info("leading the dispatch with epoch %d (%s)", epoch, self.identifier)
            led = True
            lead(epoch, lost)
        finally:
            self.zk.remove_listener(on_state)
            if led:  # not once per failed attempt to take an epoch while Redis is away
                logger.info("stepped down (%s)", "stopping" if self.stopping.is_set() else "leadership lost")
