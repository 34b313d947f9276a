"""A name map in ``/etc/hosts`` format, for names that no DNS server knows (the demo web's ``*.fleet.test``).

The file named by ``CRAWLFLEET_HOSTS_FILE`` holds lines ``address name [name …]``, with ``#`` comments; as in
``/etc/hosts``, the first line that names a host wins. Everything that resolves host names in crawlfleet (the
Scrapy resolver, local forward proxies, the proxy validator) consults this map first and the system resolver
after it, so tests and the demo never edit ``/etc/hosts``.

A :class:`HostMap` built from a file follows it: a lookup stats the file at most once per ``check_interval``
seconds and re-reads it when it changed, so a long-running worker sees a demo web started (or restarted) after
it. A file that does not exist (yet) is an empty map.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from messaging.bounded import count_evictions, declare_memo
from messaging.domains import ip_literal
from messaging.settings import Settings, load

__all__ = ["AddressCache", "HostMap", "load_hostmap", "parse_hosts", "resolve_host"]

logger = logging.getLogger(__name__)

_Signature = tuple[int, int, int]  # (inode, size, mtime in ns): what changes when the file is replaced


def normalise_name(name: str) -> str:
    """Host names compare case-insensitively, and ``name.`` (fully qualified) is ``name``."""
    return name.strip().rstrip(".").lower()


def parse_hosts(text: str, source: str = "<hosts>") -> dict[str, str]:
    """``{name: address}`` from hosts-file text; lines whose address is invalid are skipped with a warning."""
    entries: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        address, names = fields[0], fields[1:]
        try:
            ipaddress.ip_address(address)
        except ValueError:
            logger.warning("%s:%d: not an IP address: %r", source, number, address)
            continue
        if not names:
            logger.warning("%s:%d: no host name for %s", source, number, address)
        for name in names:
            entries.setdefault(normalise_name(name), address)
    return entries


class HostMap(Mapping[str, str]):
    """Host name -> IP address, optionally backed by a hosts file that it re-reads when the file changes."""

    def __init__(
        self,
        entries: Mapping[str, str] | None = None,
        path: str | os.PathLike[str] | None = None,
        check_interval: float = 1.0,
    ) -> None:
        self._entries = {normalise_name(name): address for name, address in (entries or {}).items()}
        self.path = Path(path) if path is not None else None
        self.check_interval = check_interval
        self._signature: _Signature | None = None
        self._checked_at = float("-inf")
        self._lock = threading.Lock()  # proxies may look names up from several threads
        if self.path is not None:
            self._refresh(force=True)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], check_interval: float = 1.0) -> HostMap:
        return cls(path=path, check_interval=check_interval)

    def lookup(self, name: str) -> str | None:
        """The address of ``name`` (any case, trailing dot or not), or None when the map does not know it."""
        self._refresh()
        return self._entries.get(normalise_name(name))

    # Mapping interface: reads see the file's current content too.
    def __getitem__(self, name: str) -> str:
        address = self.lookup(name)
        if address is None:
            raise KeyError(name)
        return address

    def __iter__(self) -> Iterator[str]:
        self._refresh()
        return iter(dict(self._entries))

    def __len__(self) -> int:
        self._refresh()
        return len(self._entries)

    def __repr__(self) -> str:
        return f"HostMap(path={str(self.path) if self.path else None!r}, names={len(self._entries)})"

    def _refresh(self, force: bool = False) -> None:
        if self.path is None:
            return
        now = time.monotonic()
        if not force and now - self._checked_at < self.check_interval:
            return
        with self._lock:
            if not force and now - self._checked_at < self.check_interval:
                return  # another thread checked meanwhile
            self._checked_at = now
            try:
                stat = self.path.stat()
            except FileNotFoundError:
                self._entries, self._signature = {}, None
                return
            except OSError as exc:
                logger.warning("cannot stat hosts file %s: %s (keeping %d names)", self.path, exc,
                               len(self._entries))
                return
            signature = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
            if signature == self._signature:
                return
            try:
                text = self.path.read_text(encoding="utf-8")
            except OSError as exc:
                logger.warning("cannot read hosts file %s: %s (keeping %d names)", self.path, exc,
                               len(self._entries))
                return
            self._entries = parse_hosts(text, str(self.path))
            self._signature = signature


def load_hostmap(settings: Settings | None = None) -> HostMap:
    """The host map named by ``CRAWLFLEET_HOSTS_FILE`` (empty when that setting is empty)."""
    settings = settings if settings is not None else load()
    path = settings["CRAWLFLEET_HOSTS_FILE"]
    return HostMap.from_file(path) if path else HostMap()


def resolve_host(name: str, hostmap: HostMap) -> str:
    """The address of ``name``: from the map, else from the system resolver.

    The system resolver blocks, and raises :class:`socket.gaierror` for an unknown name; an IP literal is
    returned as it is.
    """
    address = hostmap.lookup(name)
    if address is not None:
        return address
    return socket.gethostbyname(name)


class AddressCache:
    """Host name -> IP address for the partition by IP (``messaging.domains.partition_key``), resolved on threads of
    its own and remembered, so that the caller (the dispatcher's loop) never waits for a resolver.

    :meth:`address` answers at once: the address when it is known (a stale one while it is resolved again), the
    host name itself for a host that does not resolve (its tasks go on and fail at the fetch with the resolver's
    error, as they would in any partition), or ``None`` the first time a host is asked — its resolution starts, and
    the caller asks again later (the dispatcher passes the task by for this round). Lookups go through the host map
    (CRAWLFLEET_HOSTS_FILE) first, as the workers' resolver does (``spiders.resolver``)."""

    def __init__(self, hostmap: HostMap | None = None, *, ttl: float = 300.0, failed_ttl: float = 30.0,
                 threads: int = 4, limit: int = 100_000, resolve: Any = None, clock: Any = time.monotonic) -> None:
        self.hostmap = hostmap if hostmap is not None else HostMap()
        self.ttl = ttl  # a resolved address is used this long before it is asked again (in the background)
        self.failed_ttl = failed_ttl  # a name that did not resolve is asked again after this
        self.limit = limit  # names remembered; past it the cache starts again
        self.clock = clock
        self._resolve = resolve if resolve is not None else (lambda name: resolve_host(name, self.hostmap))
        self._known: dict[str, tuple[str, float]] = {}  # host -> (address or the host itself, good until)
        declare_memo("resolved_hosts")
        self._asked: set[str] = set()  # resolutions under way
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="resolve")

    def address(self, host: str) -> str | None:
        """The address of ``host`` (see the class docstring); ``None`` while its first resolution runs."""
        literal = ip_literal(host)
        if literal is not None:
            return literal
        known = self._known.get(host)
        if known is not None and known[1] > self.clock():
            return known[0]
        with self._lock:
            if host not in self._asked:
                self._asked.add(host)
                self._pool.submit(self._lookup, host)
        return known[0] if known is not None else None

    def _lookup(self, host: str) -> None:
        try:
            address, ttl = self._resolve(host), self.ttl
        except (OSError, UnicodeError) as exc:
            logger.info("%s does not resolve (%s): its tasks are keyed by its name", host, exc)
            address, ttl = host, self.failed_ttl
        with self._lock:
            if len(self._known) >= self.limit:
                count_evictions("resolved_hosts", len(self._known))
                self._known = {}
            self._known[host] = (address, self.clock() + ttl)
            self._asked.discard(host)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
