"""Alerts: a crawl's events POSTed as signed JSON to a receiver (a webhook), once per event.

A crawl request may carry ``"notify": {"url": …, "on": ["finished", "failed", "stalled", "empty"]}`` (stored in
``crawl:<id>``); crawls without one go to the fleet-wide default (CRAWLFLEET_NOTIFY_URL, CRAWLFLEET_NOTIFY_ON), if
any. The events:

- ``finished``: the crawl's ``crawl_finished`` (its exact counts), when the finisher declares it;
- ``empty``: it finished without a single item (and did not fail);
- ``failed``: it could not run: its start URL failed (``start_failure``), or it finished without a page because its
  tasks were dead-lettered;
- ``stalled``: a running crawl with work left made no progress for CRAWLFLEET_STALL_AFTER (one per stall), with why
  (``reason`` and ``why``, as the crawl page says it: ``messaging.stalls``).

**Once per event.** Every event has a deterministic id (``finished:<crawlid>@<finish time>``,
``stalled:<crawlid>@<since>``…). It is enqueued in Redis (:class:`Outbox`, ``notify:{notify}:event:<id>`` and the
due set ``notify:{notify}:due``) by one call that does nothing when the id is known, so a master that announces a
crawl's end again after a crash, or a new leader that sees the same stall, never adds a second delivery. The leading
master's notifier thread (:mod:`master.notifier`) claims a due notification (held for the attempt's time, so two
masters never post it at once), posts it, and records the outcome: a 2xx marks it delivered and it is never sent
again; a 5xx, 408, 425, 429 or network error makes it due again after a back-off (doubling; Retry-After honoured);
another 4xx, or CRAWLFLEET_NOTIFY_ATTEMPTS attempts, gives it up (logged). The state lives in Redis, so a failover
neither resends a delivered event nor drops a pending one. The receiver can deduplicate on the ``Idempotency-Key``
header (the event id): a master that dies after the receiver's 2xx and before recording it sends it once more.

**Signed.** The body is JSON with the event, its id, the crawl and, per attempt, ``attempt`` and ``timestamp`` (Unix
seconds, also in ``X-Crawlfleet-Timestamp``); ``X-Crawlfleet-Signature: sha256=<hex>`` is the HMAC-SHA256 of the
body's bytes with CRAWLFLEET_NOTIFY_SECRET (:func:`sign`; a receiver checks it with :func:`verify` or three lines of
its own and refuses old timestamps). Neither the secret nor a receiver URL's query or user information (often a
token) is ever logged or shown: :func:`messaging.settings.redact_url`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from messaging import keys
from messaging.clients import RedisClient, as_text
from messaging.clock import NOW_SECONDS_LUA
from messaging.scripts import LUA, lua_script
from messaging.settings import redact_url

FINISHED, FAILED, STALLED, EMPTY = "finished", "failed", "stalled", "empty"
EVENTS = (FINISHED, FAILED, STALLED, EMPTY)
SIGNATURE_HEADER = "X-Crawlfleet-Signature"
TIMESTAMP_HEADER = "X-Crawlfleet-Timestamp"
EVENT_HEADER = "X-Crawlfleet-Event"
IDEMPOTENCY_HEADER = "Idempotency-Key"
USER_AGENT = "crawlfleet-notifier"
PENDING, DELIVERED, GIVEN_UP = "pending", "delivered", "failed"

ENQUEUE = lua_script(LUA / "notify_enqueue.lua", NOW_SECONDS_LUA)
CLAIM = lua_script(LUA / "notify_claim.lua", NOW_SECONDS_LUA)
DONE = lua_script(LUA / "notify_done.lua", NOW_SECONDS_LUA)

__all__ = ["redact_url"]  # re-exported for the pages and logs that show a receiver


# --- who is told what --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    url: str
    on: frozenset[str]

    @classmethod
    def of(cls, notify: str | bytes | None, default_url: str = "", default_on: str = ",".join(EVENTS)) -> Target | None:
        """The crawl's own receiver (its ``notify`` JSON), else the fleet-wide default, else None."""
        if notify:
            data = json.loads(as_text(notify))
            return cls(data["url"], frozenset(data.get("on") or EVENTS))
        if default_url:
            return cls(default_url, frozenset(e.strip() for e in default_on.split(",") if e.strip()))
        return None

    def wants(self, event: str) -> bool:
        return event in self.on


def redacted_request(request: dict[str, Any]) -> dict[str, Any]:
    """A crawl request as pages and logs may show it: its notify URL redacted."""
    notify = request.get("notify")
    if not isinstance(notify, dict) or "url" not in notify:
        return request
    return {**request, "notify": {**notify, "url": redact_url(str(notify["url"]))}}


# --- the events --------------------------------------------------------------------------------------------------
def finish_events(finished: dict[str, Any], dead_letters: int = 0) -> list[dict[str, Any]]:
    """The events a ``crawl_finished`` event (master.finisher) stands for: ``finished``, and ``failed`` or
    ``empty``. Their ids derive from the finish's own ``event_id`` (the crawl and its finish time)."""
    base = {key: value for key, value in finished.items() if key not in ("event", "event_id")}
    base["time"] = finished.get("finished")
    base["dead_letters"] = dead_letters
    events = [{"event": FINISHED, "id": f"{FINISHED}:{finished['event_id']}", **base}]
    reason = None
    if finished.get("start_failure"):
        reason = f"the start URL failed: {finished['start_failure']}"
    elif not finished.get("pages") and dead_letters:
        reason = f"no page was fetched: {dead_letters} tasks were dead-lettered (see crawlfleet.failed)"
    if reason is not None:
        events.append({"event": FAILED, "id": f"{FAILED}:{finished['event_id']}", "reason": reason, **base})
    elif not finished.get("items"):
        events.append({"event": EMPTY, "id": f"{EMPTY}:{finished['event_id']}", **base})
    return events


def stalled_event(crawlid: str, userid: str, since: float, now: float, progress: dict[str, int],
                  reason: str = "unknown", why: str = "") -> dict[str, Any]:
    """A ``stalled`` event: the crawl's counts have not moved since ``since`` (one event per stall), and why
    (``reason``, ``why``: ``messaging.stalls``)."""
    return {"event": STALLED, "id": f"{STALLED}:{crawlid}@{since!r}", "crawlid": crawlid, "userid": userid,
            "time": now, "since": since, "stalled_for": round(now - since, 3), **progress, "reason": reason,
            "why": why}


# --- signing -----------------------------------------------------------------------------------------------------
def sign(secret: str, body: bytes) -> str:
    """``sha256=<hex>``: the HMAC-SHA256 of the body's bytes with the secret."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, signature: str) -> bool:
    """Whether ``signature`` (the header's value) is the body's, compared in constant time."""
    return hmac.compare_digest(sign(secret, body), signature or "")


def delivery(payload: dict[str, Any], attempt: int, timestamp: int, secret: str) -> tuple[bytes, dict[str, str]]:
    """One attempt's body and headers."""
    body = json.dumps({**payload, "attempt": attempt, "timestamp": timestamp}, sort_keys=True,
                      ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT, EVENT_HEADER: str(payload["event"]),
               IDEMPOTENCY_HEADER: str(payload["id"]), TIMESTAMP_HEADER: str(timestamp)}
    if secret:
        headers[SIGNATURE_HEADER] = sign(secret, body)
    return body, headers


# --- the outbox in Redis -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Claimed:
    event_id: str
    url: str
    payload: dict[str, Any]
    attempts: int  # made before this one


class Outbox:
    """Notifications in Redis (``notify:{notify}:…``), each changed by one Lua call."""

    def __init__(self, redis: RedisClient, ttl: float) -> None:
        self.redis = redis
        self.ttl = max(60, int(ttl))
        self._enqueue = ENQUEUE.on(redis)
        self._claim = CLAIM.on(redis)
        self._done = DONE.on(redis)

    def enqueue(self, url: str, payload: dict[str, Any]) -> bool:
        """Queue ``payload`` for ``url`` unless its id is known; True when it was new."""
        body = json.dumps(payload, sort_keys=True, ensure_ascii=False)
        event_id = str(payload["id"])
        return int(self._enqueue(keys=[keys.NOTIFY_DUE, keys.notify_event(event_id)],
                                 args=["", event_id, url, body])) == 1

    def emit(self, target: Target | None, payloads: Iterable[dict[str, Any]]) -> list[str]:
        """Queue the events the target wants; the ids that were new."""
        if target is None:
            return []
        return [p["id"] for p in payloads if target.wants(p["event"]) and self.enqueue(target.url, p)]

    def due(self, now: float, limit: int) -> list[str]:
        return [as_text(e) for e in self.redis.zrangebyscore(keys.NOTIFY_DUE, "-inf", now, start=0, num=limit)]

    def claim(self, event_id: str, hold_until: float, now: float | None = None) -> Claimed | None:
        found = self._claim(keys=[keys.NOTIFY_DUE, keys.notify_event(event_id)],
                            args=["" if now is None else repr(now), event_id, repr(hold_until)])
        if not found:
            return None
        url, body, attempts = (as_text(v) if v is not None else "" for v in found)
        return Claimed(event_id, url, json.loads(body), int(attempts or 0))

    def record(self, event_id: str, outcome: str, status: str = "", error: str = "", retry_at: float = 0.0,
               now: float | None = None) -> bool:
        """``delivered``, ``retry`` (due again at ``retry_at``) or ``failed`` (given up)."""
        return int(self._done(keys=[keys.NOTIFY_DUE, keys.notify_event(event_id)],
                              args=["" if now is None else repr(now), event_id, outcome, status, error[:300],
                                    repr(retry_at), self.ttl])) == 1

    def get(self, event_id: str) -> dict[str, str]:
        return {as_text(k): as_text(v) for k, v in self.redis.hgetall(keys.notify_event(event_id)).items()}
