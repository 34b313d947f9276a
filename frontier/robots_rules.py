"""What a robots.txt means for crawlfleet, by RFC 9309: the group of our product token, the size cap, the statuses.

Pure functions and one small class, no Redis (the cluster-wide cache is :mod:`frontier.robots_cache`):

- **Product token** (RFC 9309 2.2.1): groups are matched on the crawler's product token, the ``[A-Za-z_-]+`` name
  before any ``/version`` (CRAWLFLEET_ROBOTSTXT_USER_AGENT, default ``crawlfleet``), case-insensitively, never on the
  whole User-Agent header. A group's ``User-agent`` value is read the same way (``crawlfleet/1.0`` names
  ``crawlfleet``), as Google's reference parser does. Every group naming the token is combined into one; without
  one, every ``*`` group is; without either, nothing is disallowed. protego (Scrapy's default parser) then applies
  the chosen rules (longest match, ``*`` and ``$``, ``Allow`` winning ties); its own group choice, which takes a
  group whose name is a *prefix* of the token (``crawl`` for ``crawlfleet``), is never asked.
- **Size** (2.5): at most :data:`MAX_BODY` (500 KiB) is read; a file cut there ends at its last complete line.
- **Statuses** (2.3.1): 2xx = the rules; 4xx = unavailable, everything allowed; 5xx, network errors = unreachable,
  nothing allowed (the cache retries, with the RFC's escape after a long outage). 429 counts as unreachable: it asks
  us to come back later, not to crawl without rules. A final 3xx (a sixth redirect, or one without a target) is
  unavailable (2.3.1.2: after five redirects "crawlers MAY assume that the robots.txt file is unavailable").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from protego import Protego

from messaging.domains import authority as authority  # re-exported: robots.txt is per host and port

MAX_BODY = 500 * 1024  # RFC 9309 2.5: crawlers must read at least 500 KiB; the rest is ignored
MAX_REDIRECTS = 5  # RFC 9309 2.3.1.2: follow at least five consecutive redirects, across hosts too
DEFAULT_TOKEN = "crawlfleet"

OK, MISSING, UNREACHABLE = "ok", "missing", "unreachable"

_TOKEN = re.compile(r"[A-Za-z_-]+")
_SETTING = re.compile(r"([A-Za-z_-]+)(?:/[^\s/]*)?")
_USER_AGENT_FIELDS = frozenset({"user-agent", "useragent", "user agent"})


class BadProductToken(ValueError):
    """CRAWLFLEET_ROBOTSTXT_USER_AGENT is no product token."""


def product_token(value: str) -> str:
    """The product token of a setting such as ``crawlfleet`` or ``crawlfleet/2.1``, lower-cased.

    Raises :class:`BadProductToken` for anything else (a whole browser User-Agent, an empty value): robots.txt
    groups are matched on the token only, so a wrong value would silently obey another crawler's group."""
    match = _SETTING.fullmatch(value.strip())
    if match is None:
        raise BadProductToken(
            f"CRAWLFLEET_ROBOTSTXT_USER_AGENT must be a product token (letters, '_' and '-', optionally "
            f"followed by /version), e.g. 'crawlfleet'; got {value!r}")
    return match.group(1).lower()


def token_of(user_agent: str) -> str:
    """The token a ``User-agent`` line (or a caller's user agent) names: its leading ``[A-Za-z_-]`` characters."""
    value = user_agent.strip()
    if value.startswith("*"):
        return "*"
    match = _TOKEN.match(value)
    return match.group(0).lower() if match else ""


def status_kind(status: int) -> str:
    """:data:`OK`, :data:`MISSING` (allow all) or :data:`UNREACHABLE` (allow nothing) for a final HTTP status."""
    if 200 <= status < 300:
        return OK
    if status == 429 or status >= 500 or status < 200:
        return UNREACHABLE
    return MISSING  # 4xx, and a 3xx that was not (or could no longer be) followed


def cap_body(data: bytes) -> str:
    """The first :data:`MAX_BODY` bytes as text, cut after the last complete line when the file is longer (so that
    ``Disallow: /private`` never becomes ``Disallow: /pri``), without a byte-order mark."""
    if len(data) > MAX_BODY:
        data = data[:MAX_BODY]
        end = data.rfind(b"\n")
        data = data[: end + 1] if end >= 0 else b""
    return data.decode("utf-8", errors="replace").removeprefix("\ufeff")


def robots_url(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/robots.txt"


def _groups(body: str) -> list[tuple[set[str], list[str]]]:
    """(tokens, rule lines) of every group, in order (RFC 9309 2.1: user-agent lines start a group)."""
    groups: list[tuple[set[str], list[str]]] = []
    in_agents = False
    for raw in body.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:  # "User-agent foo": protego accepts a missing colon after the field name
            name, _, value = line.partition(" ")
        name = name.strip().lower()
        if name in _USER_AGENT_FIELDS:
            if not in_agents:
                groups.append((set(), []))
                in_agents = True
            token = token_of(value)
            if token:
                groups[-1][0].add(token)
        elif groups and name != "sitemap":  # rules before any user-agent line belong to no group
            in_agents = False
            groups[-1][1].append(f"{name}: {value.strip()}")
    return groups


@dataclass
class RobotsRules:
    """A parsed robots.txt; :meth:`allowed` and :meth:`crawl_delay` for a product token (parsed once per token)."""

    body: str
    _groups: list[tuple[set[str], list[str]]] = field(init=False, repr=False)
    _parsers: dict[str, Protego] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._groups = _groups(self.body)

    def group_lines(self, token: str) -> list[str]:
        """The rule lines that apply to ``token``: its groups combined, else the ``*`` groups combined."""
        token = token_of(token)
        for wanted in (token, "*"):
            lines = [line for tokens, rules in self._groups if wanted in tokens for line in rules]
            if any(wanted in tokens for tokens, _ in self._groups):
                return lines
        return []

    def parser(self, token: str) -> Protego:
        key = token_of(token)
        parser = self._parsers.get(key)
        if parser is None:
            lines = self.group_lines(key)
            parser = Protego.parse("User-agent: *\n" + "\n".join(lines) + "\n") if lines else Protego.parse("")
            self._parsers[key] = parser
        return parser

    def allowed(self, url: str, token: str) -> bool:
        return bool(self.parser(token).can_fetch(url, "*"))

    def crawl_delay(self, token: str) -> float | None:
        delay = self.parser(token).crawl_delay("*")
        return float(delay) if delay else None
