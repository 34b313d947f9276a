"""Every worker hears of a domain's block (a 429/503's Retry-After) the moment any worker sets it.

The politeness step refuses a blocked domain (``block:{<domain>}``, see :func:`frontier.client.block_domain`),
but a worker reserves a site's hits up to CRAWLFLEET_PACE_HORIZON ahead and sends them without asking Redis again:
the hits reserved before the 429 would still reach the site while it asked to be left alone. So the block script
also publishes ``<domain> <microseconds left>`` on :data:`messaging.keys.BLOCKS_CHANNEL`, and each worker runs one
:class:`BlockListener`, a thread subscribed to that channel, which hands every block to the worker (its scheduler
holds the domain's requests until the block ends).

The same thread, on the same connection, hears the crawls' state changes (``crawls:states``: a crawl paused,
resumed or stopped, :mod:`messaging.pause`) when given ``on_crawl_state``, so that a worker hands back a paused
crawl's tasks within milliseconds.

Pub/sub delivers at most once: a listener that was disconnected when a block was published misses it. It then
only loses the early warning — the reservations of the requests it holds are no earlier than the block's end when
they are renewed, and new ones are refused — and it logs the outage once (:class:`messaging.outage.OutageLog`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from messaging import keys
from messaging.clients import RedisClient, as_text
from messaging.outage import OutageLog
from messaging.pause import parse_state_message

logger = logging.getLogger(__name__)

POLL_SECONDS = 1.0  # a stop is noticed within this time
RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0)  # waits between reconnections while Redis is away, the last one repeated


def parse_block(data: bytes | str) -> tuple[str, float] | None:
    """``(domain, seconds left)`` from a message of the block channel; None for a malformed one (logged)."""
    domain, _, micros = as_text(data).strip().rpartition(" ")
    try:
        left = int(micros) / 1_000_000
    except ValueError:
        left = -1.0
    if not domain or left < 0:
        logger.warning("ignored a malformed message on %s: %r", keys.BLOCKS_CHANNEL, data)
        return None
    return domain, left


class BlockListener:
    """A thread that calls ``on_block(domain, until)`` for each block published by any worker of the cluster.

    ``until`` is on ``clock`` (default: ``time.monotonic``), the clock the scheduler holds requests by: the message
    carries the time left, so hosts need no agreement on the time. ``on_block`` runs on the listener's thread (a
    Scrapy worker passes it through ``reactor.callFromThread``)."""

    def __init__(self, redis: RedisClient, on_block: Callable[[str, float], None], *,
                 clock: Callable[[], float] = time.monotonic, name: str = "blocks",
                 on_crawl_state: Callable[[str, str], None] | None = None) -> None:
        self.redis = redis
        self.on_block = on_block
        self.on_crawl_state = on_crawl_state  # (crawlid, state) of each crawls:states message, on this thread
        self.clock = clock
        self.received = 0  # blocks handed on (for tests and stats)
        self.subscribed = threading.Event()  # set while subscribed (tests wait for it before publishing)
        self._stop = threading.Event()
        self._outage = OutageLog(logger, f"{name}: block channel (Redis)")
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> BlockListener:
        self._thread.start()
        return self

    def stop(self, timeout: float = 2 * POLL_SECONDS) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                self._listen()
                failures = 0
            except Exception as exc:  # Redis away or the connection dropped: subscribe again after a while
                self.subscribed.clear()
                self._outage.failed(exc)
                self._stop.wait(RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)])
                failures += 1

    def _listen(self) -> None:
        client: Any = self.redis  # redis-py's pubsub() is not annotated
        pubsub = client.pubsub(ignore_subscribe_messages=True)
        try:
            channels = [keys.BLOCKS_CHANNEL] + ([keys.CRAWL_STATES_CHANNEL] if self.on_crawl_state else [])
            pubsub.subscribe(*channels)
            while not self._stop.is_set():
                message = pubsub.get_message(timeout=POLL_SECONDS)
                if not self.subscribed.is_set() and pubsub.subscribed:
                    self.subscribed.set()
                    self._outage.ok()
                if message is None or message.get("type") != "message":
                    continue
                if as_text(message.get("channel") or b"") == keys.CRAWL_STATES_CHANNEL:
                    self._crawl_state(message["data"])
                else:
                    self._hand_on(message["data"])
        finally:
            pubsub.close()

    def _hand_on(self, data: bytes | str) -> None:
        block = parse_block(data)
        if block is None:
            return
        domain, left = block
        self.received += 1
        try:
            self.on_block(domain, self.clock() + left)
        except Exception:  # the worker's handler must not end the listener
            logger.exception("handling the block of %s failed", domain)

    def _crawl_state(self, data: bytes | str) -> None:
        change = parse_state_message(data)
        if change is None or self.on_crawl_state is None:
            return
        try:
            self.on_crawl_state(*change)
        except Exception:  # the worker's handler must not end the listener
            logger.exception("handling the state change of crawl %s failed", change[0])
