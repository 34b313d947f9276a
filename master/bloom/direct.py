"""The bit filter's hot path without Lua: cells computed in numpy, sent as raw ``BITFIELD`` commands.

Why: a Lua script pays for every ``BITFIELD`` operation it builds (table stores, number-to-string conversion,
argument objects, reply conversion) about five times what Redis pays to run it; for the 10 to 14 operations of a
URL that made the scripted path 5x slower than RedisBloom. Here all of a URL's cells live in one part string
(:mod:`master.bloom.sizing`), so one ``BITFIELD`` per part key — atomic in Redis — checks and sets a URL: ``SET``
replies the old bits, and a URL is new when one of them was 0. Of two workers adding the same URL, exactly one
sees a 0 — with one exception: while a shard grows, a worker that has not yet seen the new layer still sets the
old one, so a URL added at that very moment by it and by a worker that has seen the growth can be new to both
(it notices at its next round, and the URL is in the filter either way). The counting filter's Lua path has no
such window. The commands are packed here (vectorised RESP, no per-argument Python work) and pipelined on one
connection per Redis node; replies are read by redis-py's parser (hiredis when installed).

:func:`cells` is the same computation as ``lua/common.lua`` (``plan``) and :func:`master.bloom.fingerprint.positions`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
from redis.exceptions import ResponseError

_POW10 = np.array([10**i for i in range(1, 11)], dtype=np.int64)
SELECTOR_RANGE = float(1 << 24)


def cells(layer: dict[str, Any], h1: np.ndarray, h2: np.ndarray, selector: np.ndarray,
          cell_bits: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """For each fingerprint: the part it uses in ``layer`` and its k*h bit offsets in that part's string."""
    sizes = np.asarray(layer["sizes"], dtype=np.uint64)
    k, groups = int(layer["k"]), int(layer["h"])
    if len(sizes) > 1:
        u = selector * float(layer["m"]) / SELECTOR_RANGE
        part = np.minimum(np.searchsorted(np.cumsum(sizes.astype(np.float64)), u, side="right"), len(sizes) - 1)
    else:
        part = np.zeros(len(h1), dtype=np.int64)
    modulus = sizes[part]
    x = h1.astype(np.uint64) % modulus
    y = h2.astype(np.uint64) % modulus
    out = np.empty((len(h1), k * groups), dtype=np.uint64)
    j = 0
    for g in range(groups):
        base = np.uint64(g) * modulus
        for _ in range(k):
            out[:, j] = (base + x) * np.uint64(cell_bits)
            x = x + y
            x = np.where(x >= modulus, x - modulus, x)
            y = (y + np.uint64(j)) % modulus
            j += 1
    return part, out


def pack_bitfield(key: str, verb: bytes, offsets: np.ndarray, value: bytes | None = None,
                  width: bytes = b"u1") -> bytes:
    """``BITFIELD key <verb> <width> <offset> [value] ...`` as RESP, one operation per offset."""
    return pack_many([key], verb, [offsets], value, width)[0]


def pack_many(keys: Sequence[str], verb: bytes, offsets: Sequence[np.ndarray], value: bytes | None = None,
              width: bytes = b"u1") -> list[bytes]:
    """One ``BITFIELD`` per key, packed together: the per-operation work is a few whole-array numpy steps."""
    counts = np.array([len(chunk) for chunk in offsets], dtype=np.int64)
    values = np.concatenate(offsets).astype(np.int64) if len(offsets) else np.empty(0, dtype=np.int64)
    head = b"$%d\r\n%s\r\n$%d\r\n%s\r\n$" % (len(verb), verb, len(width), width)
    tail = b"\r\n" + (b"$%d\r\n%s\r\n" % (len(value), value) if value is not None else b"")
    a = len(head)
    template = np.frombuffer(head + b"00\r\n" + b"0" * 10 + tail, dtype=np.uint8)
    lengths = np.searchsorted(_POW10, values, side="right") + 1  # decimal digits (offsets < 10^10)
    rows = np.empty((len(values), len(template)), dtype=np.uint8)
    rows[:] = template
    rows[:, a] = np.where(lengths >= 10, ord("1"), ord("0") + lengths)
    rest = values.copy()
    for column in range(a + 13, a + 3, -1):
        rows[:, column] += (rest % 10).astype(np.uint8)
        rest //= 10
    mask = np.ones(rows.shape, dtype=bool)
    mask[:, a + 1] = lengths >= 10
    mask[:, a + 4:a + 14] = np.arange(10) >= (10 - lengths)[:, None]
    body = rows[mask].tobytes()
    op_bytes = len(template) - 11 + (lengths >= 10) + lengths
    ends = np.cumsum(op_bytes)
    command_ends = [int(ends[i - 1]) if i else 0 for i in np.cumsum(counts).tolist()]
    per_op = 4 if value is not None else 3
    out, start = [], 0
    for key, count, end in zip(keys, counts.tolist(), command_ends, strict=True):
        name = key.encode()
        out.append(b"*%d\r\n$8\r\nBITFIELD\r\n$%d\r\n%s\r\n" % (2 + per_op * count, len(name), name)
                   + body[start:end])
        start = end
    return out


def send(redis: Any, commands: Sequence[tuple[str, bytes]]) -> list[Any]:
    """Send packed commands (key, RESP) pipelined, one connection per node; replies in order (errors as values)."""
    replies: list[Any] = [None] * len(commands)
    by_pool: dict[int, tuple[Any, list[int]]] = {}
    cluster = hasattr(redis, "get_node_from_key")
    for index, (key, _) in enumerate(commands):
        pool = _node_pool(redis, key) if cluster else redis.connection_pool
        by_pool.setdefault(id(pool), (pool, []))[1].append(index)
    moved: list[int] = []
    for pool, indexes in by_pool.values():
        connection = pool.get_connection()
        try:
            connection.send_packed_command([b"".join(commands[i][1] for i in indexes)], check_health=False)
            for i in indexes:
                try:
                    replies[i] = connection.read_response()
                except ResponseError as exc:  # the error reply is consumed: the connection stays in step
                    replies[i] = exc
                    if str(exc).startswith(("MOVED", "ASK")):
                        moved.append(i)
        except BaseException:
            connection.disconnect()
            raise
        finally:
            pool.release(connection)
    if moved and cluster:  # slots moved between nodes: learn the new layout and send those again
        redis.nodes_manager.initialize()
        for i, reply in zip(moved, send(redis, [commands[i] for i in moved]), strict=True):
            replies[i] = reply
    return replies


def _node_pool(redis: Any, key: str) -> Any:
    node = redis.get_node_from_key(key)
    client = node.redis_connection or redis.get_redis_connection(node)
    return client.connection_pool


def group_by(values: np.ndarray) -> dict[int, np.ndarray]:
    """Indexes of equal values, in input order, by value."""
    order = np.argsort(values, kind="stable")
    cuts = np.flatnonzero(np.diff(values[order])) + 1
    out: dict[int, np.ndarray] = defaultdict(lambda: np.empty(0, dtype=np.int64))
    for chunk in np.split(order, cuts):
        if len(chunk):
            out[int(values[chunk[0]])] = chunk
    return out


STEP = 32  # near a layer's limit, a shard takes at most max(room, STEP) URLs per round


class DirectPath:
    """Check-and-add and check of one bit filter: layouts cached per shard, counts and TTL kept alongside.

    Per round: older layers are read (``BITFIELD GET``, only for shards that grew), then the newest layer is set
    for the URLs not found there (``BITFIELD SET``), then one pipeline adds the counts, reads each shard's layer
    count (another worker may have grown it) and slides the TTL when due. A shard whose meta is gone (its TTL
    ran out) is created afresh and its URLs sent again. A shard near its limit takes only what fits and grows
    before the rest: a layer is never overfilled by more than one round of other workers' adds.
    """

    def __init__(self, bloom: Any) -> None:
        self.bloom = bloom
        self.layouts: dict[int, list[dict[str, Any]]] = {}
        self.counts: dict[int, int] = {}
        self.next_refresh: dict[int, float] = {}

    def forget(self, shard: int) -> None:
        self.layouts.pop(shard, None)

    def _load(self, shards: Sequence[int]) -> None:
        import json

        missing = [shard for shard in shards if shard not in self.layouts]
        for _ in range(2):
            if not missing:
                return
            pipe = self.bloom.redis.pipeline(transaction=False)
            for shard in missing:
                pipe.hmget(self.bloom.meta_key(shard), "layout", "refresh_at")
            absent = []
            for shard, (raw, refresh_at) in zip(missing, pipe.execute(), strict=True):
                if raw is None:
                    absent.append(shard)
                    continue
                self.layouts[shard] = json.loads(raw)
                self.next_refresh[shard] = float(refresh_at or 0)  # shared by the workers, in the shard's meta
            pipe = self.bloom.redis.pipeline(transaction=False)
            loaded = [shard for shard in missing if shard in self.layouts]
            for shard in loaded:
                pipe.hget(self.bloom.meta_key(shard), f"count:{len(self.layouts[shard]) - 1}")
            for shard, count in zip(loaded, pipe.execute(), strict=True):
                self.counts[shard] = int(count or 0)
            for shard in absent:
                self.bloom.ensure([shard])
            missing = absent
        if missing:
            raise RuntimeError(f"Bloom filter {self.bloom.namespace}: shards {missing} could not be created")

    def run(self, mode: str, h1: np.ndarray, h2: np.ndarray, selector: np.ndarray, shards: np.ndarray,
            verdicts: np.ndarray, grown: list[int], max_rounds: int) -> None:
        pending = group_by(shards)
        for _ in range(max_rounds):
            if not pending:
                return
            self._load(list(pending))
            taken: dict[int, np.ndarray] = {}
            later: dict[int, np.ndarray] = {}
            for shard, index in pending.items():
                room = self.layouts[shard][-1]["limit"] - self.counts.get(shard, 0)
                size = len(index) if mode != "add" or len(index) <= room else max(room, STEP)
                taken[shard], rest = index[:size], index[size:]
                if len(rest):
                    later[shard] = rest
            found = self._read_older(mode, h1, h2, selector, taken)
            if mode == "check":
                verdicts[:] = found
                return
            added = self._set_newest(h1, h2, selector, taken, found, verdicts)
            again = self._bookkeeping(added, grown)
            for shard in again:  # expired meanwhile: its URLs go again into the fresh shard
                later[shard] = np.concatenate([taken[shard], later.get(shard, taken[shard][:0])])
            pending = later
        raise RuntimeError(f"Bloom filter {self.bloom.namespace}: batch not done after {max_rounds} rounds")

    def _commands(self, verb: bytes, value: bytes | None, urls: np.ndarray, layer_of: np.ndarray,
                  h1: np.ndarray, h2: np.ndarray, selector: np.ndarray, shard_of: np.ndarray
                  ) -> tuple[list[tuple[str, bytes]], list[np.ndarray], list[int]]:
        """BITFIELD commands for ``urls`` (indexes into the batch), each in layer ``layer_of`` of its shard: one
        command per part key, cells computed once per layer index (every shard's layer i has the same plan)."""
        keys_out: list[str] = []
        chunks: list[np.ndarray] = []
        owners: list[np.ndarray] = []
        widths: list[int] = []
        for layer_index, members in group_by(layer_of).items():
            chosen = urls[members]
            shards = shard_of[members]
            plan = self.layouts[int(shards[0])][layer_index]
            part, offsets = cells(plan, h1[chosen], h2[chosen], selector[chosen])
            parts = len(plan["keys"])
            for combined, rows in group_by(shards.astype(np.int64) * parts + part).items():
                keys_out.append(self.layouts[combined // parts][layer_index]["keys"][combined % parts])
                chunks.append(offsets[rows].ravel())
                owners.append(chosen[rows])
                widths.append(offsets.shape[1])
        packed = pack_many(keys_out, verb, chunks, value) if keys_out else []
        return list(zip(keys_out, packed, strict=True)), owners, widths

    def _read_older(self, mode: str, h1: np.ndarray, h2: np.ndarray, selector: np.ndarray,
                    taken: dict[int, np.ndarray]) -> np.ndarray:
        """Which URLs of the batch some older layer (every layer, for a check) holds."""
        found = np.zeros(len(h1), dtype=bool)
        urls, layer_of, shard_of = [], [], []
        for shard, index in taken.items():
            checked = len(self.layouts[shard]) - (0 if mode == "check" else 1)
            for layer_index in range(checked):
                urls.append(index)
                layer_of.append(np.full(len(index), layer_index))
                shard_of.append(np.full(len(index), shard))
        if not urls:
            return found
        commands, owners, widths = self._commands(b"GET", None, np.concatenate(urls), np.concatenate(layer_of),
                                                  h1, h2, selector, np.concatenate(shard_of))
        for rows, width, reply in zip(owners, widths, send(self.bloom.redis, commands), strict=True):
            found[rows] |= np.asarray(_checked(reply), dtype=np.int8).reshape(-1, width).all(axis=1)
        return found

    def _set_newest(self, h1: np.ndarray, h2: np.ndarray, selector: np.ndarray, taken: dict[int, np.ndarray],
                    found: np.ndarray, verdicts: np.ndarray) -> dict[int, int]:
        fresh = [index[~found[index]] for index in taken.values()]
        urls = np.concatenate(fresh)
        shard_of = np.concatenate([np.full(len(f), shard) for shard, f in zip(taken, fresh, strict=True)])
        layer_of = np.concatenate([np.full(len(f), len(self.layouts[shard]) - 1)
                                   for shard, f in zip(taken, fresh, strict=True)])
        commands, owners, widths = self._commands(b"SET", b"1", urls, layer_of, h1, h2, selector, shard_of)
        for rows, width, reply in zip(owners, widths, send(self.bloom.redis, commands), strict=True):
            verdicts[rows] = (np.asarray(_checked(reply), dtype=np.int8).reshape(-1, width) == 0).any(axis=1)
        added = dict.fromkeys(taken, 0)
        for shard, index in taken.items():
            added[shard] = int(verdicts[index].sum())
        return added

    def _bookkeeping(self, added: dict[int, int], grown: list[int]) -> list[int]:
        """Counts, layer checks and TTL; returns the shards that had expired (to be sent again)."""
        bloom = self.bloom
        now = bloom.now_ms()
        pipe = bloom.redis.pipeline(transaction=False)
        shards = list(added)
        for shard in shards:
            meta = bloom.meta_key(shard)
            newest = len(self.layouts[shard]) - 1
            pipe.hincrby(meta, f"count:{newest}", added[shard])
            pipe.hincrby(meta, "total", added[shard])
            pipe.hget(meta, "layers")
        refreshing = [shard for shard in shards if bloom.ttl_ms and now >= self.next_refresh.get(shard, 0)]
        for shard in refreshing:
            self.next_refresh[shard] = now + bloom.ttl_ms // 8
            pipe.hset(bloom.meta_key(shard), "refresh_at", int(self.next_refresh[shard]))
            for key in [bloom.meta_key(shard), *(k for layer in self.layouts[shard] for k in layer["keys"])]:
                pipe.pexpire(key, bloom.ttl_ms)
        if refreshing:
            pipe.pexpire(bloom.spec_key, bloom.ttl_ms)
        replies = pipe.execute()
        expired = []
        for i, shard in enumerate(shards):  # the first three replies of each shard are in order
            count, _, layers = replies[3 * i:3 * i + 3]
            known = len(self.layouts[shard])
            if layers is None:  # the SETs just recreated some parts as plain strings: drop them with the counts
                expired.append(shard)
                bloom.redis.delete(bloom.meta_key(shard), *(k for layer in self.layouts[shard] for k in layer["keys"]))
                self.forget(shard)
                self.next_refresh.pop(shard, None)
            elif int(layers) != known:
                self.forget(shard)  # another worker grew it
            else:
                self.counts[shard] = int(count)
                if int(count) >= self.layouts[shard][-1]["limit"]:
                    if bloom.grow(shard, known):
                        grown.append(shard)
                    self.forget(shard)
        return expired


def _checked(reply: Any) -> Any:
    if isinstance(reply, Exception):
        raise reply
    return reply
