"""The multi-group Bloom filter in Redis (seed 4.2.3): check-and-add of URL batches, sharded, growing, expiring.

A filter is a namespace (``global``, or one per crawl) of ``S`` shards. A URL's fingerprint picks its shard; each
shard is an independent scalable Bloom filter: layers of ``h`` group arrays (:mod:`frontier.bloom.sizing`), whose
layout lives in the shard's meta hash, all under one hash tag (a Redis Cluster spreads the shards).

Bit filter: a batch costs one round trip — one ``BITFIELD`` per part key it touches (per chunk of
:data:`frontier.bloom.direct.CHUNK` URLs) and one ``HMGET`` per shard, in one write per node — and its counts are
then written without waiting (:mod:`frontier.bloom.direct`; a shard that has grown adds a round of ``GET`` on its
older layers first). All cells of a URL are in one part string, so its check-and-add is one atomic
``BITFIELD``: of two workers adding the same URL, exactly one sees it new.
Counting filter: one Lua call per shard (``lua/counting.lua``), atomic per shard. Layers are added by
``lua/grow.lua`` (preallocated, idempotent).

The filter's spec (capacity, error rate, groups, shards, cell width, growth) is stored once in ``bloom_meta``: the
first worker to open a namespace writes it, every later one uses it, so that all agree on shard and cell layout
even if their settings differ.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from redis.exceptions import NoScriptError, ResponseError

from frontier.bloom import sizing
from frontier.bloom.direct import DirectPath
from frontier.bloom.fingerprint import HashBatch, hash_batch, url_fingerprints
from messaging import keys
from messaging.clients import RedisClient, as_text
from messaging.scripts import lua_script
from messaging.settings import SETTINGS

log = logging.getLogger(__name__)
LUA = Path(__file__).with_name("lua")
MAX_PER_CALL = 1000  # fingerprints per script call: a script blocks its Redis node while it runs
MAX_ROUNDS = 64  # a batch far larger than a small layer takes one round per layer it fills


@dataclass(frozen=True)
class BloomSpec:
    """What a filter is sized for. ``capacity``: elements of the first layer (all shards together); the other
    defaults are the settings registry's (CRAWLFLEET_BLOOM_*, messaging/settings.py)."""

    capacity: int
    error_rate: float = SETTINGS["CRAWLFLEET_BLOOM_ERROR_RATE"].default
    groups: int = SETTINGS["CRAWLFLEET_BLOOM_GROUPS"].default
    shards: int = SETTINGS["CRAWLFLEET_BLOOM_SHARDS"].default
    counting: bool = SETTINGS["CRAWLFLEET_BLOOM_COUNTING"].default
    growth: int = SETTINGS["CRAWLFLEET_BLOOM_GROWTH"].default
    tightening: float = SETTINGS["CRAWLFLEET_BLOOM_TIGHTENING"].default
    memory_slack: float = SETTINGS["CRAWLFLEET_BLOOM_MEMORY_SLACK"].default
    max_part_bytes: int = sizing.MAX_PART_BYTES

    def __post_init__(self) -> None:
        if self.capacity < 1 or self.groups < 1 or self.shards < 1 or self.growth < 1:
            raise ValueError(f"capacity, groups, shards and growth must be ≥ 1: {self}")
        if not 0.0 < self.error_rate < 1.0 or not 0.0 < self.tightening < 1.0:
            raise ValueError(f"error_rate and tightening must be in (0, 1): {self}")
        if self.memory_slack < 0:
            raise ValueError(f"memory_slack must be ≥ 0: {self}")

    @property
    def cell_bits(self) -> int:
        return 4 if self.counting else 1

    @property
    def shard_capacity(self) -> int:
        return -(-self.capacity // self.shards)

    def layer(self, index: int) -> sizing.LayerPlan:
        return sizing.plan_layer(self.shard_capacity, self.error_rate, self.groups, cell_bits=self.cell_bits,
                                 index=index, shards=self.shards, growth=self.growth, tightening=self.tightening,
                                 memory_slack=self.memory_slack, max_part_bytes=self.max_part_bytes)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, raw: str | bytes) -> BloomSpec:
        # A spec stored without memory_slack was sized with none: never resize an existing filter by a new default.
        return cls(**{"memory_slack": 0.0, **json.loads(raw)})


def stored_spec(redis: RedisClient, namespace: str, spec: BloomSpec) -> BloomSpec:
    """The spec stored for ``namespace``, storing ``spec`` first when there is none (the first writer wins)."""
    meta = keys.bloom_meta(namespace)
    redis.hsetnx(meta, "spec", spec.to_json())
    raw = redis.hget(meta, "spec")
    assert raw is not None, f"{meta} lost its spec"  # written just above (HSETNX), never removed alone
    stored = BloomSpec.from_json(raw)
    if stored != spec:
        log.info("Bloom filter %s exists with %s; using it rather than %s", namespace, stored, spec)
    return stored


@dataclass
class ShardInfo:
    shard: int
    layers: list[dict[str, Any]]
    counts: list[int]  # elements per layer
    total: int
    saturated: int
    ttl_ms: int


@dataclass
class _Scripts:
    counting: Any
    grow: Any
    admin: Any


COUNTING, GROW, ADMIN = (lua_script(LUA / f"{name}.lua", LUA / "common.lua") for name in ("counting", "grow", "admin"))


@dataclass
class BatchResult:
    """Verdicts of one batch, in input order, plus what the filter did meanwhile."""

    verdicts: np.ndarray  # bool per input
    grown: list[int] = field(default_factory=list)  # shards that got a new layer

    def as_list(self) -> list[bool]:
        """The verdicts as Python booleans."""
        return [bool(verdict) for verdict in self.verdicts]


class BloomFilter:
    """Check-and-add of URL batches against one namespace. ``ttl`` (seconds, 0 = never) slides with activity."""

    def __init__(self, redis: RedisClient, namespace: str, spec: BloomSpec, *, ttl: float = 0.0,
                 now_ms: Any = None) -> None:
        self.redis = redis
        self.namespace = namespace
        self.spec = spec
        self.ttl_ms = int(ttl * 1000)
        self._now_ms = now_ms  # a callable giving explicit milliseconds (simulations, tests); None: Redis clock
        self._scripts = _Scripts(COUNTING.on(redis), GROW.on(redis), ADMIN.on(redis))
        self._meta = [keys.bloom_shard(namespace, shard) for shard in range(spec.shards)]
        self.spec_key = keys.bloom_meta(namespace)
        self._direct = DirectPath(self)

    def meta_key(self, shard: int) -> str:
        return self._meta[shard]

    def now_ms(self) -> float:
        """Milliseconds on the injected clock, else this host's (only schedules TTL refreshes)."""
        return float(self._now_ms()) if self._now_ms is not None else time.time() * 1000

    # --- opening -------------------------------------------------------------------------------------------------
    @classmethod
    def open(cls, redis: RedisClient, namespace: str, spec: BloomSpec, *, ttl: float = 0.0,
             now_ms: Any = None, eager: bool = True) -> BloomFilter:
        """The filter of ``namespace`` with its stored spec (``spec`` is stored when there is none yet).

        ``eager``: create every shard now; otherwise a shard is created by the first batch that touches it."""
        bloom = cls(redis, namespace, stored_spec(redis, namespace, spec), ttl=ttl, now_ms=now_ms)
        if ttl:
            redis.pexpire(keys.bloom_meta(namespace), bloom.ttl_ms)
        if eager:
            bloom.ensure()
        return bloom

    def ensure(self, shards: Sequence[int] | None = None) -> None:
        """Create layer 0 of every shard (or of ``shards``) that has none; harmless when it exists."""
        for shard in range(self.spec.shards) if shards is None else shards:
            self.grow(shard, 0)

    # --- batches -------------------------------------------------------------------------------------------------
    def add(self, urls: Sequence[str]) -> list[bool]:
        """Check-and-add: for each URL, True when it was new (and is now in the filter)."""
        if self.spec.counting:
            return self.add_hashes(hash_batch(url_fingerprints(urls))).as_list()
        urls = urls if isinstance(urls, list | tuple) else list(urls)
        # Fingerprinted chunk by chunk, each chunk hashed while Redis sets the one before (direct.py).
        return self._add_lazily(len(urls), lambda start, stop: hash_batch(url_fingerprints(urls[start:stop]))
                                ).as_list()

    def contains(self, urls: Sequence[str]) -> list[bool]:
        """For each URL, True when the filter (probably) holds it. Adds nothing."""
        return self.contains_hashes(hash_batch(url_fingerprints(urls))).as_list()

    def add_fingerprints(self, fingerprints: bytes | Sequence[bytes]) -> list[bool]:
        """Check-and-add of fingerprints (:func:`~frontier.bloom.fingerprint.url_fingerprint`): True when new."""
        return self.add_hashes(hash_batch(fingerprints)).as_list()

    def contains_fingerprints(self, fingerprints: bytes | Sequence[bytes]) -> list[bool]:
        """For each fingerprint, True when the filter (probably) holds it. Adds nothing."""
        return self.contains_hashes(hash_batch(fingerprints)).as_list()

    def add_hashes(self, batch: HashBatch) -> BatchResult:
        return self._run("add", batch)

    def contains_hashes(self, batch: HashBatch) -> BatchResult:
        return self._run("check", batch)

    def _script(self) -> Any:
        return self._scripts.counting

    def _add_lazily(self, total: int, hashes: Any) -> BatchResult:
        """The bit filter's pipelined check-and-add; ``hashes(start, stop)`` is the HashBatch of those URLs."""
        verdicts = np.zeros(total, dtype=bool)
        result = BatchResult(verdicts)

        def chunk(start: int, stop: int) -> tuple[np.ndarray, ...]:
            batch = hashes(start, stop)
            return batch.h1, batch.h2, batch.shard_key.astype(np.float64), batch.shards(self.spec.shards)

        self._direct.add_pipelined(total, chunk, verdicts, result.grown, MAX_ROUNDS)
        return result

    def _run(self, mode: str, batch: HashBatch) -> BatchResult:
        if self.spec.counting or mode == "remove":
            return self._run_scripted(mode, batch)
        if mode == "add":
            return self._add_lazily(len(batch), lambda start, stop: batch.sliced(start, stop))
        verdicts = np.zeros(len(batch), dtype=bool)
        result = BatchResult(verdicts)
        self._direct.run(mode, batch.h1, batch.h2, batch.shard_key.astype(np.float64),
                         batch.shards(self.spec.shards), verdicts, result.grown, MAX_ROUNDS)
        return result

    def _run_scripted(self, mode: str, batch: HashBatch) -> BatchResult:
        """The counting filter: one Lua call per shard and chunk (lua/counting.lua)."""
        verdicts = np.zeros(len(batch), dtype=bool)
        result = BatchResult(verdicts)
        shards = batch.shards(self.spec.shards)
        todo = np.arange(len(batch))
        script = self._script()
        refreshed = False
        for _ in range(MAX_ROUNDS):
            if not len(todo):
                break
            order = todo[np.argsort(shards[todo], kind="stable")]
            cuts = np.flatnonzero(np.diff(shards[order])) + 1
            calls = [(int(shards[index[0]]), chunk) for index in np.split(order, cuts)
                     for chunk in np.array_split(index, -(-len(index) // MAX_PER_CALL))]
            now = self._now_arg()
            replies = self._pipelined(script, [(self._meta[shard], mode, batch.packed(index), now)
                                               for shard, index in calls])
            again = []
            for (shard, index), reply in zip(calls, replies, strict=True):
                if int(reply[0]) == -1:  # expired, or never created: start the shard afresh and send again
                    self.ensure([shard])
                    again.append(index)
                    continue
                _, marks, full, refresh, layers, deferred = reply
                codes = np.frombuffer(marks, dtype=np.uint8)
                verdicts[index] = codes == ord("1")
                refreshed = refreshed or bool(int(refresh))
                if int(full) and self.grow(shard, int(layers)):
                    result.grown.append(shard)
                if int(deferred):  # the newest layer filled up mid-batch: the rest goes to the next layer
                    again.append(index[codes == ord("2")])
            todo = np.concatenate(again) if again else todo[:0]
        else:
            raise RuntimeError(f"Bloom filter {self.namespace}: batch not done after {MAX_ROUNDS} rounds")
        if refreshed and self.ttl_ms:
            self.redis.pexpire(keys.bloom_meta(self.namespace), self.ttl_ms)
        return result

    def _now_arg(self) -> str:
        return "" if self._now_ms is None else str(int(self._now_ms()))

    def _pipelined(self, script: Any, calls: Sequence[tuple[Any, ...]]) -> list[Any]:
        """One EVALSHA per shard, in one pipeline; scripts missing on a node are loaded and those calls re-run."""
        pipe = self.redis.pipeline(transaction=False)
        for meta, *args in calls:
            pipe.execute_command("EVALSHA", script.sha, 1, meta, *args)  # (cluster pipelines block .evalsha)
        replies = pipe.execute(raise_on_error=False)
        retry = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)
                 or (isinstance(reply, ResponseError) and "NOSCRIPT" in str(reply))]
        if retry:
            self.redis.script_load(script.script)
            for i in retry:
                meta, *args = calls[i]
                replies[i] = script(keys=[meta], args=args)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies

    # --- growth --------------------------------------------------------------------------------------------------
    def grow(self, shard: int, expected: int) -> bool:
        """Add layer ``expected`` to a shard unless it has it already; True when this call added it."""
        plan = self.spec.layer(expected)
        part_keys = [keys.bloom_part(self.namespace, shard, expected, part) for part in range(len(plan.part_cells))]
        layer = {"k": plan.k, "h": plan.groups, "m": plan.cells, "c": plan.capacity, "limit": plan.limit,
                 "sizes": list(plan.part_cells), "keys": part_keys}
        after = self._scripts.grow(keys=[self._meta[shard], *part_keys],
                                   args=[expected, json.dumps(layer), self.spec.cell_bits, self.ttl_ms,
                                         self._now_arg()])
        self._direct.forget(shard)
        return int(after) == expected + 1

    # --- housekeeping --------------------------------------------------------------------------------------------
    def expire(self, ttl: float) -> None:
        """Give every key of the filter a TTL of ``ttl`` seconds from now (0: never expire), e.g. when its crawl
        ends; later activity keeps sliding it."""
        self.ttl_ms = int(ttl * 1000)
        for shard, meta in enumerate(self._meta):
            self._scripts.admin(keys=[meta], args=["expire", self.ttl_ms])
            self._direct.next_refresh.pop(shard, None)
        spec_key = keys.bloom_meta(self.namespace)
        if self.ttl_ms:
            self.redis.pexpire(spec_key, self.ttl_ms)
        else:
            self.redis.persist(spec_key)

    def key_names(self) -> list[str]:
        """Every Redis key of the filter (spec, shard metas, parts)."""
        out = [keys.bloom_meta(self.namespace)]
        for meta in self._meta:
            out.extend(as_text(key) for key in self._scripts.admin(keys=[meta], args=["keys"]))
        return out

    def delete(self) -> None:
        self._direct.quiet.barrier()
        for shard, meta in enumerate(self._meta):
            self._scripts.admin(keys=[meta], args=["delete"])
            self._direct.forget(shard)
        self.redis.delete(keys.bloom_meta(self.namespace))

    def shards(self) -> list[ShardInfo]:
        self._direct.quiet.barrier()  # the counts this process wrote without waiting are in
        out = []
        for shard, meta in enumerate(self._meta):
            raw = self.redis.hgetall(meta)
            layers = json.loads(raw[b"layout"]) if b"layout" in raw else []
            counts = [int(raw.get(f"count:{index}".encode(), 0)) for index in range(len(layers))]
            out.append(ShardInfo(shard, layers, counts, *(int(raw.get(name, 0)) for name in
                                                          (b"total", b"saturated", b"ttl"))))
        return out

    def count(self) -> int:
        """Elements added (minus those removed), all shards."""
        return sum(info.total for info in self.shards())

    def expected_false_positive_rate(self) -> float:
        """The model's rate for a URL never added, at the current loads (mean over shards, union over layers)."""
        rates = []
        for info in self.shards():
            miss = 1.0
            for layer, load in zip(info.layers, info.counts, strict=True):
                miss *= 1.0 - sizing.false_positive_rate(load, layer["m"], layer["k"], layer["h"])
            rates.append(1.0 - miss)
        return float(np.mean(rates))
