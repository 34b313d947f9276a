"""One proxy of the pool: where it is, how to use it, and what the pool knows of it.

A proxy is identified by ``ip:port`` (its document's ``_id`` in the pool's MongoDB collection). Its credentials,
when a list gives them, are kept in the document and in :attr:`Proxy.url` (what ``request.meta["proxy"]`` takes;
Scrapy's ``HttpProxyMiddleware`` moves them into a ``Proxy-Authorization`` header) and nowhere else: ``repr``,
:meth:`Proxy.public` (the HTTP API's JSON) and every log line use :attr:`Proxy.id`, which never carries them.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

# The figures of seed table 4-7, as the collector stores them (strings, as the list page shows them).
LIST_FIELDS = ("location", "anonymity", "type", "speed", "alive_time")
_HOST_NAME = re.compile(r"[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?")


def proxy_id(host: str, port: int | str) -> str:
    return f"{host.strip().lower()}:{int(port)}"


def valid_port(value: Any) -> int | None:
    try:
        port = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return port if 0 < port < 65536 else None


def valid_host(value: Any) -> str | None:
    """An IP address or a plausible host name from a list page (lower case), or None."""
    text = str(value or "").strip().lower()
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return text if _HOST_NAME.fullmatch(text) else None


@dataclass(frozen=True)
class Proxy:
    host: str
    port: int
    scheme: str = "http"
    user: str = field(default="", repr=False)
    password: str = field(default="", repr=False)
    exit_ip: str = ""  # the address sites see, when the pool learned one (else the proxy's own host)
    info: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)  # the list's figures
    speed: float | None = None  # seconds the last successful check took
    failures: int = 0
    alive: bool = False
    last_success: datetime | None = None
    checked_at: datetime | None = None

    @property
    def id(self) -> str:
        return proxy_id(self.host, self.port)

    @property
    def address(self) -> str:
        """The exit address: what the per-IP throttle counts when a request goes through this proxy."""
        return self.exit_ip or self.host

    @property
    def url(self) -> str:
        """``scheme://[user:password@]host:port`` for ``request.meta["proxy"]`` (credentials URL-quoted)."""
        credentials = ""
        if self.user:
            credentials = quote(self.user, safe="") + (":" + quote(self.password, safe="") if self.password else "")
            credentials += "@"
        return f"{self.scheme}://{credentials}{self.host}:{self.port}"

    @property
    def has_credentials(self) -> bool:
        return bool(self.user)

    def __str__(self) -> str:
        return self.id

    @classmethod
    def from_document(cls, doc: dict[str, Any]) -> Proxy:
        return cls(
            host=doc["host"], port=int(doc["port"]), scheme=doc.get("scheme") or "http",
            user=doc.get("user") or "", password=doc.get("password") or "", exit_ip=doc.get("exit_ip") or "",
            info={name: doc[name] for name in LIST_FIELDS if doc.get(name) is not None},
            speed=doc.get("speed_seconds"), failures=int(doc.get("failures") or 0), alive=bool(doc.get("alive")),
            last_success=doc.get("last_success"), checked_at=doc.get("checked_at"),
        )

    def public(self) -> dict[str, Any]:
        """The proxy as the HTTP API shows it: figures, no credentials."""
        return {
            "id": self.id, "proxy": f"{self.scheme}://{self.host}:{self.port}", "address": self.address,
            "has_credentials": self.has_credentials, "alive": self.alive, "failures": self.failures,
            "speed_seconds": self.speed, "last_success": _iso(self.last_success), "checked_at": _iso(self.checked_at),
            **self.info,
        }


def _iso(value: datetime | None) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value is not None else None
