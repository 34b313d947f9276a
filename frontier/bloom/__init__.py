"""URL dedup for the whole cluster: a sharded, multi-group, growing Bloom filter in Redis (seed 4.2.3).

- :mod:`frontier.bloom.sizing` — the math: groups, hashes, bits for a target rate; Redis string layout.
- :mod:`frontier.bloom.fingerprint` — canonical URL (w3lib's, with a fast path) and 128-bit mmh3 fingerprint.
- :mod:`frontier.bloom.filter` — :class:`BloomFilter`: batch check-and-add, growth, TTL, housekeeping.
- :mod:`frontier.bloom.cells` — where a URL's bits are in a layer, and the ``BITFIELD`` commands of a batch (numpy).
- :mod:`frontier.bloom.direct` — the bit filter's hot path: cells in numpy, one atomic ``BITFIELD`` per part key,
  chunks of a batch pipelined so that hashing and Redis overlap.
- :mod:`frontier.bloom.resp` — ``BITFIELD`` packed as RESP in numpy; a window that sends without waiting.
- :mod:`frontier.bloom.counting` — :class:`CountingBloomFilter`: 4-bit counters, ``remove``.
"""

from __future__ import annotations

from typing import Any

from frontier.bloom.counting import CountingBloomFilter
from frontier.bloom.filter import BloomFilter, BloomSpec, stored_spec
from frontier.bloom.fingerprint import canonical_url, request_fingerprint, url_fingerprint
from messaging import keys
from messaging.clients import RedisClient

__all__ = ["BloomFilter", "BloomSpec", "CountingBloomFilter", "canonical_url", "crawl_namespace", "expire_filter",
           "open_filter", "request_fingerprint", "url_fingerprint"]


def open_filter(redis: RedisClient, namespace: str, spec: BloomSpec, *, ttl: float = 0.0, now_ms: Any = None,
                eager: bool = True) -> BloomFilter:
    """Open (or create) the filter of ``namespace``; a counting one when its stored spec says so."""
    kind = CountingBloomFilter if stored_spec(redis, namespace, spec).counting else BloomFilter
    return kind.open(redis, namespace, spec, ttl=ttl, now_ms=now_ms, eager=eager)


def crawl_namespace(crawlid: str) -> str:
    """The namespace of a crawl's own filter (``CRAWLFLEET_BLOOM_NAMESPACE=crawl``)."""
    return f"crawl:{crawlid}"


def expire_filter(redis: RedisClient, namespace: str, ttl: float) -> bool:
    """Give every key of an existing filter a TTL of ``ttl`` seconds from now (e.g. when its crawl ends), without
    creating anything; False when the namespace has no filter."""
    raw = redis.hget(keys.bloom_meta(namespace), "spec")
    if raw is None:
        return False
    spec = BloomSpec.from_json(raw)
    kind = CountingBloomFilter if spec.counting else BloomFilter
    kind(redis, namespace, spec).expire(ttl)
    return True
