"""Bounded per-key memory: what a long-lived process keeps per crawl, per host or per URL holds at most so many entries.

A process that runs for days meets millions of URLs, hundreds of thousands of hosts and thousands of crawls; a dict
keyed by any of them that only ever grows makes its memory a function of how long it ran. :class:`BoundedDict` is
such a dict with a limit: setting a key past the limit evicts the least recently set (or, with ``touch``, used)
entry, and counts it in :attr:`BoundedDict.evicted`, so that what a bound costs (an entry read again from Redis, a
robots.txt memo asked again) can be told from its stats. Not thread-safe: one owner, or a lock of the caller's.

A memo with a name (``BoundedDict(limit, memo="robots_hosts")``) also counts what it evicted in the process-wide
:data:`EVICTIONS`, which every process's ``/metrics`` serves as ``crawlfleet_memo_evictions_total{memo=...}``
(:mod:`messaging.metrics`); a structure bounded another way (dropped wholesale, trimmed by age) counts its evictions
there with :func:`count_evictions`.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator, MutableMapping
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

EVICTIONS: Counter[str] = Counter()  # memo name -> entries its bound evicted in this process since the start
_EVICTIONS_LOCK = threading.Lock()  # memos live on several threads (the reactor, a feed, a heartbeat)


def declare_memo(memo: str) -> None:
    """A memo of this process, counted from 0 (its series is served before its first eviction)."""
    with _EVICTIONS_LOCK:
        EVICTIONS[memo] += 0


def count_evictions(memo: str, count: int = 1) -> None:
    """``count`` entries of ``memo`` dropped to keep it within its bound."""
    if count > 0:
        with _EVICTIONS_LOCK:
            EVICTIONS[memo] += count


def evictions() -> dict[str, int]:
    """Entries evicted so far, by memo (every memo declared in this process, 0 when none was)."""
    with _EVICTIONS_LOCK:
        return dict(EVICTIONS)


class BoundedDict(MutableMapping[K, V], Generic[K, V]):
    """A dict of at most ``limit`` entries, least recently set (or used, with ``touch``) evicted first."""

    def __init__(self, limit: int, touch: bool = False, memo: str = "") -> None:
        """``memo``: the name its evictions are counted under in :data:`EVICTIONS` (none: only in ``evicted``)."""
        if limit < 1:
            raise ValueError(f"a bounded dict holds at least one entry, not {limit}")
        self.limit = limit
        self.memo = memo
        if memo:
            declare_memo(memo)
        self.touch = touch  # a read makes the entry the most recent too (an LRU cache), not only a write
        self.evicted = 0  # entries dropped to stay within the limit, since the start
        self._data: OrderedDict[K, V] = OrderedDict()

    def __getitem__(self, key: K) -> V:
        value = self._data[key]
        if self.touch:
            self._data.move_to_end(key)
        return value

    def __setitem__(self, key: K, value: V) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.limit:
            self._data.popitem(last=False)
            self.evicted += 1
            if self.memo:
                count_evictions(self.memo)

    def __delitem__(self, key: K) -> None:
        del self._data[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __repr__(self) -> str:
        return f"BoundedDict({self.memo or 'unnamed'}: {len(self._data)}/{self.limit}, evicted={self.evicted})"
