"""The *domain* of a URL: the hash tag of every domain-scoped Redis key and the unit of politeness.

The registrable domain (eTLD+1) from the public suffix list bundled with tldextract — never fetched; when the suffix
is unknown (``*.test``, ``localhost``) or the host is an IP address, the lower-case host name. No port. Never empty.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from urllib.parse import urlsplit

import tldextract

# suffix_list_urls=() and cache_dir=None: the bundled snapshot only, no network, no cache files.
_extract = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


class InvalidDomain(ValueError):
    """The URL has no host to derive a domain from."""


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
    if not host:
        raise InvalidDomain("empty host")
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    else:
        return host.strip("[]")
    parts = _extract(host)
    if parts.suffix and parts.domain:
        return f"{parts.domain}.{parts.suffix}"
    return host


def domain_of(url: str) -> str:
    """The domain of an absolute URL."""
    return domain_of_host(host_of(url))
