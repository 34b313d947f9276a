"""The *domain* of a URL: the hash tag of every domain-scoped Redis key and the unit of politeness.

The registrable domain (eTLD+1) from the public suffix list bundled with tldextract — never fetched; when the suffix
is unknown (``*.test``, ``localhost``) or the host is an IP address, the lower-case host name. No port. Never empty.

**One host rule** (:func:`host_problem`), used wherever a host enters the system: the intake's URL check
(``messaging.validation``), :func:`domain_of_host` here (so the dispatcher refuses what it could not key), and the key
builder (``messaging.keys``: a domain is the hash tag of its keys). A host is an IP address, or dot-separated labels
of 1–63 characters (253 in all) whose ASCII characters are letters, digits, ``-`` and ``_``; characters beyond ASCII
(internationalised names) are allowed unless they are white space or invisible. So braces (a Redis Cluster hash tag
inside the tag), glob characters (``* ? [ ] \\``), ``%``, ``:`` and the like never reach a key: a request that
carries such a host is refused at intake with the reason, and a task that still has one (a link found on a page, an
older task) is dead-lettered by the dispatcher instead of failing it.
"""

from __future__ import annotations

import ipaddress
import string
import unicodedata
from functools import lru_cache
from urllib.parse import urlsplit

import tldextract

# suffix_list_urls=() and cache_dir=None: the bundled snapshot only, no network, no cache files.
_extract = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


class InvalidDomain(ValueError):
    """The URL has no host to derive a domain from, or its host breaks the host rule (:func:`host_problem`)."""


MAX_HOST_LENGTH = 253
MAX_LABEL_LENGTH = 63
_LABEL_ASCII = frozenset(string.ascii_letters + string.digits + "-_")


@lru_cache(maxsize=65536)
def host_problem(host: str) -> str | None:
    """Why ``host`` (a host name, a domain or an IP address; a trailing dot allowed) is not acceptable, or None.

    The one host rule of crawlfleet (see the module docstring). Cached: the key builder asks for every key.
    """
    if not host:
        return "empty host"
    name = host[:-1] if host.endswith(".") else host
    try:
        ipaddress.ip_address(name[1:-1] if name.startswith("[") and name.endswith("]") else name)
    except ValueError:
        pass
    else:
        return None
    if not name or len(name) > MAX_HOST_LENGTH:
        return f"a host name has 1 to {MAX_HOST_LENGTH} characters, not {len(name)}"
    for label in name.split("."):
        if not label:
            return f"empty label in host {_quote(host)}"
        if len(label) > MAX_LABEL_LENGTH:
            return f"a label of {len(label)} characters in host {_quote(host)} (at most {MAX_LABEL_LENGTH})"
        for ch in label:
            if ch.isascii():
                if ch not in _LABEL_ASCII:
                    return f"the character {ch!r} is not allowed in a host name ({_quote(host)})"
            elif unicodedata.category(ch)[0] in "CZ":  # controls, format (invisible), separators
                return f"the character U+{ord(ch):04X} is not allowed in a host name ({_quote(host)})"
    return None


def check_host(host: str) -> str:
    """``host`` itself, or :class:`InvalidDomain` with the reason (:func:`host_problem`)."""
    problem = host_problem(host)
    if problem is not None:
        raise InvalidDomain(problem)
    return host


def _quote(host: str) -> str:
    return repr(host if len(host) <= 80 else host[:75] + "…")


def authority(url: str) -> str:
    """The host a robots.txt belongs to: the lower-case host name, with the port when the URL names a port."""
    parts = urlsplit(url)
    host = (parts.hostname or "").rstrip(".").lower()
    return f"{host}:{parts.port}" if parts.port else host


def robots_tag(host: str) -> str:
    """The domain under which a host's (``name`` or ``name:port``, as :func:`authority` gives it) robots.txt records
    are kept — their hash tag, whatever the partition of the queue its URLs wait in; "" for a host that has none."""
    try:
        return domain_of(f"http://{host}/")
    except ValueError:
        return ""


def host_of(url: str) -> str:
    """The lower-case host of an absolute URL (no port, no trailing dot, no IPv6 brackets)."""
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError as exc:
        raise InvalidDomain(f"unparsable URL {url!r}: {exc}") from exc
    if not host:
        raise InvalidDomain(f"URL without a host: {url!r}")
    return host.rstrip(".").lower()


@lru_cache(maxsize=65536)
def domain_of_host(host: str) -> str:
    """The domain of a host name or IP address."""
    host = host.strip().rstrip(".").lower()
    check_host(host)
    address = ip_literal(host)
    if address is not None:
        return address
    parts = _extract(host)
    if parts.suffix and parts.domain:
        return f"{parts.domain}.{parts.suffix}"
    return host


def domain_of(url: str) -> str:
    """The domain of an absolute URL."""
    return domain_of_host(host_of(url))


# --- the queue partition (issue 37, item 2; StormCrawler's ``partition.url.mode``) --------------------------------
HOST, DOMAIN, IP = "host", "domain", "ip"
PARTITIONS = (HOST, DOMAIN, IP)
"""How a crawl's URLs are grouped into queues, and so paced: by host name, by registered domain (the default, what
:func:`domain_of` gives) or by the IP address the host resolves to. The group's name — its *key* — is what every
domain-scoped Redis key is formed from (``messaging.keys``: ``<job>:{<key>}:queue``, the throttle windows, the pace
buckets, the blocks), so the throttles follow the partition."""


def partition_key(url: str, mode: str, address: str | None = None) -> str:
    """The queue key of an absolute URL under a partition ``mode`` (:data:`PARTITIONS`): its host, its domain, or
    ``address`` (the host's IP address, resolved by the caller: ``messaging.hostmap.AddressCache``; a host that does
    not resolve keeps its name). A URL whose host is an IP address has that address as key in every mode."""
    if mode not in PARTITIONS:
        raise ValueError(f"unknown partition {mode!r} (one of {', '.join(PARTITIONS)})")
    if mode == DOMAIN:
        return domain_of(url)
    host = host_of(url)
    if is_ip(host):
        return domain_of_host(host)  # the address itself, without IPv6 brackets
    check_host(host)
    return address if mode == IP and address else host


def is_ip(name: str) -> bool:
    """Whether a key or host name is an IP address (a key of the partition by IP, or an IP host)."""
    return ip_literal(name) is not None


def ip_literal(name: str) -> str | None:
    """The address a host name that is an IP literal names (without IPv6 brackets), else ``None``."""
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return None
    return name.strip("[]")
