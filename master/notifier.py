"""The leading master's notifier: crawl events to their receivers, on a thread of its own (messaging.notify).

The finisher (on the reporting thread) hands every ``crawl_finished`` to :meth:`Notifier.crawl_finished`, which only
enqueues the events it stands for in Redis; the notifier thread (:meth:`Notifier.run`, one per leadership term)
looks for stalled crawls (:class:`master.stalls.StallWatch`) and delivers what is due. Every attempt has a timeout
(CRAWLFLEET_NOTIFY_TIMEOUT) and at most :data:`PER_PASS` deliveries are made per pass, so a slow or dead receiver
delays only other notifications, never dispatch, heartbeats or the finisher (which run on other threads).

Redirects are not followed (a receiver that moved answers 3xx, which gives the notification up, logged): a signed
POST is never re-sent, nor turned into a GET, at an address nobody configured.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

from master.stalls import StallWatch
from messaging import keys
from messaging.clients import RedisClient
from messaging.clock import Clock
from messaging.notify import Claimed, Outbox, Target, delivery, finish_events, redact_url
from messaging.outage import OutageLog
from messaging.settings import Settings

logger = logging.getLogger(__name__)
PER_PASS = 50  # deliveries one pass makes at most (each bounded by the timeout)
RETRYABLE = frozenset({408, 425, 429})  # 4xx answers that mean "later", not "never"
STALL_CHECK_SECONDS = 10.0  # the stall watch looks at least this often


@dataclass(frozen=True)
class Answer:
    status: int  # 0: no HTTP answer (connection refused, timeout, …)
    error: str = ""
    retry_after: float = 0.0


Post = Callable[[str, bytes, dict[str, str], float], Answer]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # urllib then raises the 3xx as an HTTPError


_OPENER = urllib.request.build_opener(_NoRedirect)


def http_post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> Answer:
    """POST with urllib: the receiver's status (any), or 0 and the error's kind (never the URL)."""
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            response.read(65536)
            return Answer(response.status)
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, f"HTTP {exc.code}", retry_after_seconds(exc.headers.get("Retry-After")))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Answer(0, f"{type(reason).__name__}: {reason}"[:200])


def retry_after_seconds(value: str | None) -> float:
    """Retry-After as seconds (a number or an HTTP date); 0 when absent or unreadable."""
    if not value:
        return 0.0
    if value.strip().isdigit():
        return float(value.strip())
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return 0.0


def backoff(attempts: int, first: float, longest: float) -> float:
    """Seconds before the next attempt after ``attempts`` failed ones: first, 2 x first, 4 x first … up to longest."""
    return float(min(longest, first * 2 ** max(0, attempts - 1)))


class Notifier:
    def __init__(self, redis: RedisClient, settings: Settings, clock: Clock, post: Post = http_post) -> None:
        self.redis = redis
        self.settings = settings
        self.clock = clock
        self.post = post
        self.outbox = Outbox(redis, settings.crawl_ttl)
        self.stalls = StallWatch(redis, settings.stall_after, self._emit)
        # the stall watch's record is also what the info answer and the crawl page call stalled after
        # CRAWLFLEET_STALL_SHOW_AFTER (a minute): looked at every few seconds
        self.stall_every = min(STALL_CHECK_SECONDS, settings.stall_show_after / 6,
                               max(settings.notify_interval, settings.stall_after / 5))
        self.outage = OutageLog(logger, "master: notifications (Redis)")
        self._next_stall_check = 0.0
        self._unsigned_said = False

    # --- enqueueing (any thread) ----------------------------------------------------------------------------------
    def crawl_finished(self, event: dict[str, Any]) -> None:
        """The events a finished crawl stands for, enqueued once (called by the finisher before it marks the
        ``crawl_finished`` event sent, so a crash in between enqueues them again: a no-op)."""
        crawlid = event["crawlid"]
        dead = self.redis.hget(keys.DEAD_LETTER_COUNTS, crawlid)
        self._emit(crawlid, self.redis.hget(keys.crawl(crawlid), "notify"), finish_events(event, int(dead or 0)))

    def _emit(self, crawlid: str, notify: Any, events: list[dict[str, Any]]) -> None:
        target = Target.of(notify, self.settings.notify_url, self.settings.notify_on)
        for event_id in self.outbox.emit(target, events):
            logger.info("crawl %s: notification %s queued for %s", crawlid, event_id,
                        redact_url(target.url if target else ""))

    # --- the thread -----------------------------------------------------------------------------------------------
    def run(self, done: threading.Event) -> None:
        """Passes until ``done`` is set (the leadership ended); a Redis outage is logged once, not per pass."""
        while not done.is_set():
            try:
                self.step(self.clock.now())
            except Exception as exc:
                self.outage.failed(exc)
            else:
                self.outage.ok()
            done.wait(self.settings.notify_interval)

    def step(self, now: float) -> int:
        """Stall checks when due, then the due deliveries; returns the attempts made."""
        if now >= self._next_stall_check:
            self.stalls.check(now)
            self._next_stall_check = now + self.stall_every
        attempts = 0
        for event_id in self.outbox.due(now, PER_PASS):
            claimed = self.outbox.claim(event_id, now + 2 * self.settings.notify_timeout + 5, now)
            if claimed is not None:
                self._attempt(claimed, now)
                attempts += 1
        return attempts

    def _attempt(self, claimed: Claimed, now: float) -> None:
        secret = self.settings.notify_secret
        if not secret and not self._unsigned_said:
            logger.warning("CRAWLFLEET_NOTIFY_SECRET is empty: notifications are sent unsigned")
            self._unsigned_said = True
        attempt = claimed.attempts + 1
        body, headers = delivery(claimed.payload, attempt, int(now), secret)
        answer = self.post(claimed.url, body, headers, self.settings.notify_timeout)
        where = redact_url(claimed.url)
        status = str(answer.status or "")
        if 200 <= answer.status < 300:
            self.outbox.record(claimed.event_id, "delivered", status, now=now)
            logger.info("notification %s delivered to %s (HTTP %d, attempt %d)", claimed.event_id, where,
                        answer.status, attempt)
            return
        error = answer.error or f"HTTP {answer.status}"
        refused = answer.status >= 300 and answer.status < 500 and answer.status not in RETRYABLE
        if refused or attempt >= self.settings.notify_attempts:
            self.outbox.record(claimed.event_id, "failed", status, error, now=now)
            why = "the receiver refused it" if refused else f"{attempt} attempts failed"
            logger.error("notification %s to %s given up: %s (%s)", claimed.event_id, where, why, error)
            return
        wait = max(backoff(attempt, self.settings.notify_backoff, self.settings.notify_backoff_max),
                   min(answer.retry_after, self.settings.notify_backoff_max))
        self.outbox.record(claimed.event_id, "retry", status, error, retry_at=now + wait, now=now)
        logger.warning("notification %s to %s failed (%s, attempt %d): next attempt in %.0f s", claimed.event_id,
                       where, error, attempt, wait)
