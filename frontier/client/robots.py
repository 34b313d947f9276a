"""The cluster's robots.txt records of one host: the rules, the one claim on their fetch, an outage (RFC 9309).

The keys (``robots:{<domain>}:<host>``, ``…:lock``, ``…:down``) share the domain's hash tag; each operation is one
call. The policy on top — what to memoise, when to claim, how long an outage lasts — is
:class:`frontier.robots_cache.RobotsCache`'s; this is the part that touches Redis.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from frontier.client import lua
from messaging import keys
from messaging.clients import RedisClient, as_text
from messaging.scripts import run_scripts


def _time_arg(now: float | None) -> str:
    return "" if now is None else repr(float(now))


class RobotsRecords:
    """robots.txt in Redis, by (domain, host); ``token`` names the claims of one process."""

    def __init__(self, redis: RedisClient) -> None:
        self.redis = redis
        self._claim = lua.ROBOTS_CLAIM.on(redis)
        self._store = lua.ROBOTS_STORE.on(redis)
        self._down = lua.ROBOTS_DOWN.on(redis)
        self._renew = lua.ROBOTS_RENEW.on(redis)

    def claim(self, domain: str, host: str, token: str, lock_ms: int, now: float | None = None) -> list[str]:
        """The host's rules, or its outage, or the claim of the fetch for ``token`` (``lua/robots_claim.lua``), in
        one call: ``["cached", body]``, ``["down", seconds to the next attempt, why]``, ``["claimed", ""]``, or the
        claim's time left when it is held already (``["mine", ms]``: by ``token``; ``["pending", ms]``)."""
        reply = self._claim(keys=self._keys(domain, host), args=[_time_arg(now), token, lock_ms])
        return [as_text(part) for part in reply]

    def store(self, domain: str, host: str, token: str, body: str, ttl_ms: int) -> None:
        """Publish the host's robots.txt for ``ttl_ms``, end its outage, release the claim."""
        self._store(keys=self._keys(domain, host), args=[token, body, ttl_ms])

    def down(self, domain: str, host: str, token: str, now: float | None, first_retry: float, error_ttl: float,
             retry_after: float | None, outage_limit: float, why: str) -> tuple[str, float, float]:
        """A failed fetch: the outage begins or goes on (``lua/robots_down.lua``); returns ``("down" | "escaped",
        seconds it has lasted, seconds to the next attempt)``, escaped once it outlasted ``outage_limit``."""
        reply = self._down(keys=self._keys(domain, host),
                           args=[_time_arg(now), token, first_retry, error_ttl,
                                 "" if retry_after is None else retry_after, outage_limit, why])
        return as_text(reply[0]), float(as_text(reply[1])), float(as_text(reply[2]))

    def renew(self, claims: Sequence[tuple[str, str]], token: str, lock_ms: int) -> list[bool]:
        """Extend ``token``'s claims of these (domain, host) for ``lock_ms``, in one round trip; False for a claim
        that is no longer the token's. ``lock_ms`` 1 gives a claim up."""
        calls: list[tuple[Any, list[str], list[Any]]] = [
            (self._renew, [keys.robots_lock(domain, host)], [token, lock_ms]) for domain, host in claims]
        return [bool(int(renewed)) for renewed in run_scripts(self.redis, calls)]

    def release(self, domain: str, host: str, token: str) -> None:
        """Give up ``token``'s claim: another process may claim the fetch at once."""
        self._renew(keys=[keys.robots_lock(domain, host)], args=[token, 1])

    def cached(self, domain: str, host: str) -> str | None:
        """The stored robots.txt of the host, if any (never claims)."""
        raw = self.redis.get(keys.robots(domain, host))
        return None if raw is None else as_text(raw)

    def forget(self, domain: str, host: str) -> None:
        """Drop the host's rules and outage (the next lookup fetches again)."""
        self.redis.delete(keys.robots(domain, host), keys.robots_down(domain, host))

    @staticmethod
    def _keys(domain: str, host: str) -> list[str]:
        return [keys.robots(domain, host), keys.robots_lock(domain, host), keys.robots_down(domain, host)]
