"""The bit filter's hot path without Lua: cells computed in numpy, sent as raw ``BITFIELD`` commands.

Why: a Lua script pays for every ``BITFIELD`` operation it builds (table stores, number-to-string conversion,
argument objects, reply conversion) about five times what Redis pays to run it; for the 10 to 14 operations of a
URL that made the scripted path 5x slower than RedisBloom. Here all of a URL's cells live in one part string
(:mod:`frontier.bloom.sizing`), so one ``BITFIELD`` per part key — atomic in Redis — checks and sets a URL: ``SET``
replies the old bits, and a URL is new when one of them was 0. Of two workers adding the same URL, exactly one
sees a 0 — also while a shard grows: a worker that had not yet seen the new layer sets the old one, learns of
the growth in the same round trip and sets the URL again in the new layer, which decides (:meth:`DirectPath._settle`).

What is sent, per batch (:meth:`DirectPath.add_pipelined`): per part key, ``BITFIELD key SET u1 <offset> 1 …``
(:mod:`frontier.bloom.resp` packs them; within a command the operations are grouped by digit count, stably, which
keeps each cell's operations in URL order — the command's verdicts are those of a URL-by-URL execution); behind
them, one ``HMGET layers count:<newest>`` per shard (and the TTL refresh when due), all in one write per node.
One round trip: the replies give the verdicts, whether a shard grew elsewhere or expired, and its count before
this batch. The new counts are then written with ``CLIENT REPLY SKIP`` (:class:`frontier.bloom.resp.QuietLine`):
nobody waits for them. A batch is fingerprinted, packed and written chunk by chunk of :data:`CHUNK` URLs
on the same connection (Redis runs chunk i while this process hashes chunk i + 1; one connection per node keeps
them in order, so a URL twice in a batch is new once). Shards with older layers (whose cells are read with
``GET`` first) and shards near their limit are done after that in synchronous rounds (:meth:`DirectPath.run`).

Where the time goes (1,000 URLs per batch, the default 10 operations per URL, one shard; this project's 2-vCPU
VM, quiet; ``INFO`` CPU and process CPU): Redis spends 8 µs of CPU per URL, mostly reading and parsing the 40
arguments (0.31 µs per operation to run them); this process 11 µs, of which 5-7 µs canonicalising and fingerprinting
(as much as for RedisBloom, whose own share is ~1 µs). The two overlap: with chunks of :data:`CHUNK` = 256 URLs,
Redis sets chunk i while this process hashes chunk i + 1, so a batch costs ~12.6 µs per URL against 7.2 µs for
``BF.MADD`` on the same path. A chunk costs a fixed ~150 µs (a few dozen numpy calls, one command per part key
touched): smaller chunks lose the overlap again to it; the last chunk is cut to :data:`TAIL` URLs, because its
Redis time is what this process waits for after its last write. When other processes keep both cores busy the
overlap is gone and the path costs the sum (~19 µs against ~8).

The cells (:func:`frontier.bloom.cells.cells`) are the same computation as ``lua/common.lua`` (``plan``) and
:func:`frontier.bloom.fingerprint.positions`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from frontier.bloom.cells import Packed, checked, dense, group_by
from frontier.bloom.cells import cells as compute_cells
from frontier.bloom.resp import QuietLine, Window, command, pack_commands, send

CHUNK = 256  # URLs per pipelined chunk of a batch
TAIL = 64  # URLs of a batch's last chunk, cut from the one before


def chunk_bounds(total: int) -> list[tuple[int, int]]:
    """(start, stop) of the chunks of a batch of ``total`` URLs: at most :data:`CHUNK` URLs each, the last one
    at most :data:`TAIL`. After its last write this process waits for Redis to set the last chunk; a short one
    shortens that wait (on a quiet 2-core machine, +4 % URLs per second against plain 256s)."""
    bounds = [(start, min(total, start + CHUNK)) for start in range(0, total, CHUNK)]
    if bounds and bounds[-1][1] - bounds[-1][0] > TAIL:
        start, stop = bounds.pop()
        bounds += [(start, stop - TAIL), (stop - TAIL, stop)]
    return bounds
STEP = 32  # near a layer's limit, a shard takes at most max(room, STEP) URLs per round


class DirectPath:
    """Check-and-add and check of one bit filter: layouts cached per shard, counts and TTL kept alongside.

    Synchronous round (:meth:`run`): older layers are read (``BITFIELD GET``, only for shards that grew), then the
    newest layer is set for the URLs not found there (``BITFIELD SET``), then one round trip reads each shard's
    layer count (another worker may have grown it) and count, and slides the TTL when due; counts are added
    without waiting. :meth:`add_pipelined` does the common case (single-layer shards with room) in one round
    trip. A shard whose meta is gone (its TTL ran out) is created afresh and its URLs sent again. A shard near
    its limit takes only what fits and grows before the rest: a layer is never overfilled by more than one round
    of other workers' adds.
    """

    def __init__(self, bloom: Any) -> None:
        self.bloom = bloom
        self.layouts: dict[int, list[dict[str, Any]]] = {}
        self.counts: dict[int, int] = {}
        self.next_refresh: dict[int, float] = {}
        self.pending_growth: list[tuple[int, int]] = []
        self.quiet = QuietLine(bloom.redis)

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

    def add_pipelined(self, total: int, chunk: Callable[[int, int], tuple[np.ndarray, ...]], verdicts: np.ndarray,
                      grown: list[int], max_rounds: int) -> None:
        """Check-and-add of a batch of ``total`` URLs whose hashes ``chunk(start, stop)`` gives chunk by chunk
        (h1, h2, part selector, shard), each chunk sent before the next is computed; see the module's doc.
        Per-shard state is kept in arrays: a chunk costs a fixed number of numpy calls, whatever its shards."""
        h1, h2, selector = np.empty(total), np.empty(total), np.empty(total)
        shards = np.empty(total, dtype=np.int64)
        count = self.bloom.spec.shards
        sent = np.zeros(count, dtype=np.int64)
        closed = np.zeros(count, dtype=bool)  # a shard that deferred URLs takes no later chunk: they'd be uncounted
        window = Window(self.bloom.redis)
        packs: list[Packed] = []
        deferred: list[np.ndarray] = []
        try:
            for start, stop in chunk_bounds(total):
                h1[start:stop], h2[start:stop], selector[start:stop], shards[start:stop] = chunk(start, stop)
                here = shards[start:stop]
                wanted = np.bincount(here, minlength=count)
                present = np.flatnonzero(wanted)
                self._load(present.tolist())
                single, room = self._capacity(present)
                fits = ~closed[present] & single & (wanted[present] <= room - sent[present])
                closed[present[~fits]] = True
                sent[present[fits]] += wanted[present[fits]]
                take = ~closed[here]
                if not take.all():
                    deferred.append(start + np.flatnonzero(~take))
                if take.any():
                    urls = start + np.flatnonzero(take)
                    packed = self._commands(b"SET", b"1", urls, 0, h1, h2, selector, shards[urls])
                    window.send(packed.commands, packed.sizes)
                    packs.append(packed)
            taken_shards = np.flatnonzero(sent).tolist()
            window.send(self._checks(taken_shards))
            replies = window.collect()
        except BaseException:
            window.abort()
            raise
        at = 0
        for packed in packs:
            for rows, bits in packed.bits(replies[at:at + len(packed.commands)]):
                verdicts[rows] = (bits == 0).any(axis=1)
            at += len(packed.commands)
        taken = np.concatenate([packed.owners[0] for packed in packs]) if packs else np.empty(0, dtype=np.int64)
        added = np.bincount(shards[taken], weights=verdicts[taken], minlength=count).astype(np.int64)
        again, regrown = self._settle({shard: int(added[shard]) for shard in taken_shards}, replies[at:], grown)
        later = deferred + [taken[shards[taken] == shard] for shard in again]
        if later:
            self.run("add", h1, h2, selector, shards, verdicts, grown, max_rounds, np.concatenate(later))
        renew = [taken[(shards[taken] == shard) & verdicts[taken]] for shard in regrown]
        if renew:
            self.run("newest", h1, h2, selector, shards, verdicts, grown, max_rounds, np.concatenate(renew))

    def _capacity(self, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For the shards ``present``: whether each has a single layer, and the room left in its newest one."""
        layouts = self.layouts
        single = np.fromiter((len(layouts[shard]) == 1 for shard in present.tolist()), dtype=bool, count=len(present))
        room = np.fromiter(map(self._room, present.tolist()), dtype=np.int64, count=len(present))
        return single, room

    def _room(self, shard: int) -> int:
        """Elements the shard's newest layer takes before it is full (negative: overfilled by concurrent rounds)."""
        limit: int = self.layouts[shard][-1]["limit"]
        return limit - self.counts.get(shard, 0)

    def run(self, mode: str, h1: np.ndarray, h2: np.ndarray, selector: np.ndarray, shards: np.ndarray,
            verdicts: np.ndarray, grown: list[int], max_rounds: int, todo: np.ndarray | None = None) -> None:
        """Synchronous rounds over the URLs ``todo`` (indexes into the batch; all when None). ``mode``: "check";
        "add"; or "newest": set in the newest layer only, without reading the older ones (URLs this worker has
        just set in a layer that turned out not to be the newest, see :meth:`_settle`)."""
        if todo is None:
            pending = group_by(shards)
        else:
            pending = {shard: todo[index] for shard, index in group_by(shards[todo]).items()}
        for _ in range(max_rounds):
            if not pending:
                return
            self._load(list(pending))
            if mode == "add":
                pending = self._grow_full(h1, h2, selector, shards, verdicts, grown, pending)
                if not pending:
                    return
            taken: dict[int, np.ndarray] = {}
            later: dict[int, np.ndarray] = {}
            for shard, index in pending.items():
                room = self._room(shard)
                size = len(index) if mode == "check" or len(index) <= room else max(room, STEP)
                taken[shard], rest = index[:size], index[size:]
                if len(rest):
                    later[shard] = rest
            found = (np.zeros(len(h1), dtype=bool) if mode == "newest"
                     else self._read_older(mode, h1, h2, selector, taken))
            if mode == "check":
                verdicts[np.concatenate(list(taken.values()))] = found[np.concatenate(list(taken.values()))]
                return
            added = self._set_newest(h1, h2, selector, taken, found, verdicts)
            again, regrown = self._bookkeeping(added, grown)
            for shard in again:  # expired meanwhile: its URLs go again into the fresh shard
                later[shard] = np.concatenate([taken[shard], later.get(shard, taken[shard][:0])])
            renew = [taken[shard][verdicts[taken[shard]]] for shard in regrown]
            if renew:
                self.run("newest", h1, h2, selector, shards, verdicts, grown, max_rounds - 1, np.concatenate(renew))
            pending = later
        raise RuntimeError(f"Bloom filter {self.bloom.namespace}: batch not done after {max_rounds} rounds")

    def _grow_full(self, h1: np.ndarray, h2: np.ndarray, selector: np.ndarray, shards: np.ndarray,
                   verdicts: np.ndarray, grown: list[int], pending: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
        """Shards whose newest layer is full get a layer when one of their URLs needs room — not when the layer
        just filled (a filter holding exactly its capacity has no empty layer), nor for duplicates: their URLs
        are checked first, and those found (bits are never cleared) are answered. Returns what is left to add."""
        full = [shard for shard in pending if self._room(shard) <= 0]
        if not full:
            return pending
        todo = np.concatenate([pending[shard] for shard in full])
        self.run("check", h1, h2, selector, shards, verdicts, grown, 1, todo)
        left = dict(pending)
        for shard in full:
            index = pending[shard]
            found = verdicts[index]
            verdicts[index] = False
            if found.all():
                del left[shard]
                continue
            left[shard] = index[~found]
            if self.bloom.grow(shard, len(self.layouts[shard])):
                grown.append(shard)
        self._load([shard for shard in full if shard in left])
        return left

    def _commands(self, verb: bytes, value: bytes | None, urls: np.ndarray, layer_of: np.ndarray | int,
                  h1: np.ndarray, h2: np.ndarray, selector: np.ndarray, shard_of: np.ndarray) -> Packed:
        """BITFIELD commands for ``urls`` (indexes into the batch), each in layer ``layer_of`` (one index for all,
        or one per URL) of its shard: one command per part key, cells computed once per layer index (every shard's
        layer i has the same plan)."""
        groups = [(layer_of, np.arange(len(urls)))] if isinstance(layer_of, int) else group_by(layer_of).items()
        keys_out: list[str] = []
        owners: list[np.ndarray] = []
        widths: list[int] = []
        values: list[np.ndarray] = []
        command_of: list[np.ndarray] = []
        for layer_index, members in groups:
            chosen = urls[members]
            shards = shard_of[members]
            plan = self.layouts[int(shards[0])][layer_index]
            part, offsets = compute_cells(plan, h1[chosen], h2[chosen], selector[chosen])
            parts = len(plan["keys"])
            distinct, command = dense(shards * parts + part)
            first = len(keys_out)
            keys_out += [self.layouts[c // parts][layer_index]["keys"][c % parts] for c in distinct.tolist()]
            owners.append(chosen)
            widths.append(offsets.shape[1])
            values.append(offsets.ravel())
            command_of.append(np.repeat(command + first, offsets.shape[1]))
        if not keys_out:
            return Packed([], [], [], np.empty(0, dtype=np.int64), [])
        # pack_commands keeps the operations on one cell in their given order (URL by URL), which makes the
        # command's verdicts those of a URL-by-URL execution: a URL twice in a batch is new once.
        command_ids = np.concatenate(command_of)
        packed, order = pack_commands(keys_out, verb, value, np.concatenate(values), command_ids)
        counts = np.bincount(command_ids, minlength=len(keys_out)).tolist()
        return Packed(list(zip(keys_out, packed, strict=True)), owners, widths, order, counts)

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
        packed = self._commands(b"GET", None, np.concatenate(urls), np.concatenate(layer_of), h1, h2, selector,
                                np.concatenate(shard_of))
        for rows, bits in packed.bits(send(self.bloom.redis, packed.commands, packed.sizes)):
            found[rows] |= bits.all(axis=1)
        return found

    def _set_newest(self, h1: np.ndarray, h2: np.ndarray, selector: np.ndarray, taken: dict[int, np.ndarray],
                    found: np.ndarray, verdicts: np.ndarray) -> dict[int, int]:
        fresh = [index[~found[index]] for index in taken.values()]
        urls = np.concatenate(fresh)
        shard_of = np.concatenate([np.full(len(f), shard) for shard, f in zip(taken, fresh, strict=True)])
        layer_of = np.concatenate([np.full(len(f), len(self.layouts[shard]) - 1)
                                   for shard, f in zip(taken, fresh, strict=True)])
        for index in taken.values():
            verdicts[index] = False
        packed = self._commands(b"SET", b"1", urls, layer_of, h1, h2, selector, shard_of)
        for rows, bits in packed.bits(send(self.bloom.redis, packed.commands, packed.sizes)):
            verdicts[rows] = (bits == 0).any(axis=1)
        return {shard: int(verdicts[index].sum()) for shard, index in taken.items()}

    def _bookkeeping(self, added: dict[int, int], grown: list[int]) -> tuple[list[int], list[int]]:
        """Counts, layer checks and TTL in one round trip; see :meth:`_settle` for what it returns."""
        return self._settle(added, send(self.bloom.redis, self._checks(list(added))), grown)

    def _checks(self, shards: Sequence[int]) -> list[tuple[str, bytes]]:
        """Read behind the SETs: each shard's layer count (another worker may have grown it; none: it expired) and
        its newest layer's count; plus the TTL refresh when due. Raw RESP: a redis-py pipeline costs ~30 us of
        Python per command."""
        bloom = self.bloom
        commands = [(bloom.meta_key(shard), command(b"HMGET", bloom.meta_key(shard), "layers",
                                                   f"count:{len(self.layouts[shard]) - 1}")) for shard in shards]
        now = bloom.now_ms()
        refreshing = [shard for shard in shards if bloom.ttl_ms and now >= self.next_refresh.get(shard, 0)]
        for shard in refreshing:
            self.next_refresh[shard] = now + bloom.ttl_ms // 8
            meta = bloom.meta_key(shard)
            commands.append((meta, command(b"HSET", meta, "refresh_at", int(self.next_refresh[shard]))))
            for key in [meta, *(k for layer in self.layouts[shard] for k in layer["keys"])]:
                commands.append((key, command(b"PEXPIRE", key, bloom.ttl_ms)))
        if refreshing:
            commands.append((bloom.spec_key, command(b"PEXPIRE", bloom.spec_key, bloom.ttl_ms)))
        return commands

    def _settle(self, added: dict[int, int], replies: Sequence[Any], grown: list[int]
                ) -> tuple[list[int], list[int]]:
        """After the SETs and :meth:`_checks`: add the counts (written without waiting for a reply), grow full
        layers. Returns the shards that had expired — their SETs recreated parts as plain strings: those are
        dropped and the URLs go again into a fresh shard — and the shards another worker had grown.

        A URL this worker found new in a layer that is no longer the newest is set again in the newest one, and is
        new only if it is new there too: a worker that already knew of the growth read the older layer (where it
        may or may not have found this worker's bits) and set the newest, so the newest layer decides between
        them — exactly one of two workers adding the same URL around a growth sees it new. The URL then counts in
        both layers (a growth comes a little early; nothing is lost)."""
        bloom = self.bloom
        expired, regrown, increments = [], [], []
        for shard, reply in zip(added, replies, strict=False):  # the HMGETs come first, one per shard
            layers, count = checked(reply)
            known = len(self.layouts[shard])
            if layers is None:
                expired.append(shard)
                bloom.redis.delete(bloom.meta_key(shard), *(k for layer in self.layouts[shard] for k in layer["keys"]))
                self.forget(shard)
                self.next_refresh.pop(shard, None)
                continue
            meta = bloom.meta_key(shard)
            if added[shard]:
                increments += [(meta, command(b"HINCRBY", meta, f"count:{known - 1}", added[shard])),
                               (meta, command(b"HINCRBY", meta, "total", added[shard]))]
            self.counts[shard] = int(count or 0) + added[shard]
            if int(layers) != known:
                self.forget(shard)  # another worker grew it
                regrown.append(shard)
            elif self._room(shard) < 0:  # overfilled by a concurrent round
                self.pending_growth.append((shard, known))
        for reply in replies[len(added):]:
            checked(reply)
        self.quiet.send(increments)
        for shard, known in self.pending_growth:
            if bloom.grow(shard, known):
                grown.append(shard)
            self.forget(shard)
        self.pending_growth = []
        return expired, regrown

