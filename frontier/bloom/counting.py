"""The counting variant (seed 4.2.3.2): 4-bit counters instead of bits, so that a URL can be removed.

Selected by ``BloomSpec(counting=True)`` (``CRAWLFLEET_BLOOM_COUNTING``); it costs four times the memory of the bit
filter for the same rate. Counters are ``BITFIELD u4`` cells with ``OVERFLOW SAT``: a counter stops at 15 and a
saturated counter is never decremented (its true count is unknown), so removing a URL that shares it leaves it at
15 — a false positive may persist, a false negative never appears. At the optimal load a counter holds ln 2
elements on average and reaches 16 with probability about 1e-15 (Fan et al. 2000); the shard meta counts
saturations (``saturated``) so that it can be watched. ``lua/counting.lua`` has the details.

Removing a URL that was never added but tests present (a false positive) decrements the counters of the URLs it
collides with and can make one of them look absent: remove only URLs that were added.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from frontier.bloom.filter import BatchResult, BloomFilter
from frontier.bloom.fingerprint import HashBatch, hash_batch, url_fingerprints


class CountingBloomFilter(BloomFilter):
    """A :class:`BloomFilter` on a counting spec, with :meth:`remove`."""

    def _script(self) -> Any:
        if not self.spec.counting:
            raise ValueError(f"the filter {self.namespace!r} was created without counters: it cannot remove")
        return self._scripts.counting

    def remove(self, urls: Sequence[str]) -> list[bool]:
        """Remove URLs; for each, True when it was present (and its counters were decremented)."""
        return self.remove_hashes(hash_batch(url_fingerprints(urls))).as_list()

    def remove_hashes(self, batch: HashBatch) -> BatchResult:
        return self._run("remove", batch)
