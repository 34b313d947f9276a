"""Bounded per-key memory: what a long-lived process keeps per crawl, per host or per URL holds at most so many entries.

A process that runs for days meets millions of URLs, hundreds of thousands of hosts and thousands of crawls; a dict
keyed by any of them that only ever grows makes its memory a function of how long it ran. :class:`BoundedDict` is
such a dict with a limit: setting a key past the limit evicts the least recently set (or, with ``touch``, used)
entry, and counts it in :attr:`BoundedDict.evicted`, so that what a bound costs (an entry read again from Redis, a
robots.txt memo asked again) can be told from its stats. Not thread-safe: one owner, or a lock of the caller's.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, MutableMapping
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedDict(MutableMapping[K, V], Generic[K, V]):
    """A dict of at most ``limit`` entries, least recently set (or used, with ``touch``) evicted first."""

    def __init__(self, limit: int, touch: bool = False) -> None:
        if limit < 1:
            raise ValueError(f"a bounded dict holds at least one entry, not {limit}")
        self.limit = limit
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

    def __delitem__(self, key: K) -> None:
        del self._data[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __repr__(self) -> str:
        return f"BoundedDict({len(self._data)}/{self.limit}, evicted={self.evicted})"
