"""The bit filter's wire: ``BITFIELD`` commands packed as RESP in numpy, written without waiting, read raw.

**Packing** (:func:`pack_commands`). A URL costs 10 to 14 ``BITFIELD`` operations (``SET u1 <offset> 1``, 37
bytes): formatting them one by one in Python costs more than Redis takes to run them. The operations of each
command are regrouped by the number of decimal digits of their offset (stably: operations on one cell keep their
order); each digit count is one fixed-width matrix (a template row repeated, its digit columns written two at a
time from a ``00``…``99`` table), and a command is the concatenation of one slice per digit count.

**Sending** (:class:`Window`). Commands are written to the socket of their Redis node as soon as they are packed
and the replies read at :meth:`Window.collect`; one connection per node is held from the first write to the
collect, so commands reach a node in the order they were written. The socket's send buffer is widened so that a
write returns while Redis works. An error reply is kept as the value of its command; the connection stays in
step.

**Reading.** A u1 ``BITFIELD`` reply is ``*<n>`` then ``n`` times ``:0`` or ``:1`` (4 bytes each), so the
replies of a window have a known length: :func:`read_bit_replies` reads them from the socket in bulk, checks them
byte for byte against the expected bytes and takes every bit in one numpy pass, instead of hiredis building a
Python int per bit (the connection's hiredis reader must hold nothing, which :class:`Window` checks; other
replies go through redis-py). An error reply, which is shorter, switches to reading reply by reply.

**Counters** (:class:`QuietLine`): commands nobody waits for, each behind ``CLIENT REPLY SKIP``, on connections
that never return to a pool; :meth:`QuietLine.barrier` waits until Redis ran them."""

from __future__ import annotations

import logging
import socket
import threading
import weakref
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse, ResponseError

from messaging.clients import RedisClient

_POW10 = np.array([10**i for i in range(1, 10)], dtype=np.uint32)
log = logging.getLogger(__name__)
_TENS = np.array([48 + i // 10 for i in range(100)], dtype=np.uint8)  # the characters of 00 … 99
_ONES = np.array([48 + i % 10 for i in range(100)], dtype=np.uint8)
SEND_BUFFER = 1 << 20  # bytes; a batch of 1,000 URLs is about 0.5 MB of BITFIELD
MAX_OFFSET = (1 << 32) - 1  # a Redis string holds at most 512 MB = 2^32 bits
FEW = 32  # operations of one digit count below which they are formatted one by one


def pack_bitfield(key: str, verb: bytes, offsets: np.ndarray, value: bytes | None = None,
                  width: bytes = b"u1") -> bytes:
    """``BITFIELD key <verb> <width> <offset> [value] ...`` as RESP, one operation per offset."""
    return pack_many([key], verb, [offsets], value, width)[0]


def pack_many(keys: Sequence[str], verb: bytes, offsets: Sequence[np.ndarray], value: bytes | None = None,
              width: bytes = b"u1") -> list[bytes]:
    """One ``BITFIELD`` per key on its offsets (grouped by digit count, see :func:`pack_commands`)."""
    counts = [len(chunk) for chunk in offsets]
    values = np.concatenate(offsets) if counts else np.empty(0, dtype=np.uint32)
    command_of = np.repeat(np.arange(len(keys)), counts)
    return pack_commands(keys, verb, value, values, command_of, width)[0]


def _offsets(values: np.ndarray) -> np.ndarray:
    if len(values) and int(values.max()) > MAX_OFFSET:
        raise ValueError(f"BITFIELD offsets are below 2^32, got {int(values.max())}")
    return values.astype(np.uint32, copy=False)


def pack_commands(keys: Sequence[str], verb: bytes, value: bytes | None, values: np.ndarray,
                  command_of: np.ndarray, width: bytes = b"u1") -> tuple[list[bytes], np.ndarray]:
    """``BITFIELD keys[c] <verb> <width> <offset> [value] …`` with the operations ``i`` of ``command_of[i] == c``.

    A command sends its operations grouped by digit count, in their given order within a count (a stable
    regrouping: operations on one cell keep their order). Returns the commands and, for the replies read one
    command after the other, the index in ``values`` of each reply."""
    values = _offsets(values)
    command_of = np.asarray(command_of, dtype=np.int64)
    commands = len(keys)
    digits = np.searchsorted(_POW10, values, side="right") + 1  # decimal digits of each offset
    narrow = np.uint16 if 11 * commands < 1 << 16 else np.uint32  # small keys: numpy radix-sorts them
    layout = np.argsort((digits * commands + command_of).astype(narrow), kind="stable")  # by count, then command
    replies = np.argsort((command_of * 16 + digits).astype(narrow if commands < 4096 else np.uint32), kind="stable")
    table = np.bincount(digits * commands + command_of, minlength=11 * commands).reshape(11, -1)
    present = np.flatnonzero(table.any(axis=1)).tolist()
    head = b"$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(verb), verb, len(width), width)
    tail = b"\r\n" + (b"$%d\r\n%s\r\n" % (len(value), value) if value is not None else b"")
    # One fixed-width matrix per digit count (a template row repeated), its digit columns written two at a time.
    ordered = values[layout]
    blobs: dict[int, tuple[memoryview, int]] = {}
    low = 0
    per_count = table.sum(axis=1).tolist()
    for count in present:
        high = low + per_count[count]
        prefix = head + b"$%d\r\n" % count
        size = len(prefix) + count + len(tail)
        if high - low < FEW:  # a rare digit count: formatting a few costs less than a matrix's fixed numpy calls
            blobs[count] = (memoryview(b"".join([prefix + b"%d" % v + tail for v in ordered[low:high].tolist()])),
                            size)
            low = high
            continue
        rows = np.frombuffer(bytearray((prefix + b"0" * count + tail) * (high - low)), dtype=np.uint8)
        rest = ordered[low:high]
        end = len(prefix) + count
        while end - len(prefix) >= 2:
            quotient = rest // np.uint32(100)
            pair = rest - quotient * np.uint32(100)
            rows[end - 2::size] = _TENS.take(pair)
            rows[end - 1::size] = _ONES.take(pair)
            rest, end = quotient, end - 2
        if end > len(prefix):
            rows[end - 1::size] += rest.astype(np.uint8)
        blobs[count] = (rows.data, size)
        low = high
    firsts = (np.cumsum(table, axis=1) - table).tolist()
    sizes = table.tolist()
    per_op = 4 if value is not None else 3
    out: list[bytes] = []
    for c, (key, total) in enumerate(zip(keys, table.sum(axis=0).tolist(), strict=True)):
        name = key.encode()
        pieces: list[bytes | memoryview] = [
            b"*%d\r\n$8\r\nBITFIELD\r\n$%d\r\n%s\r\n" % (2 + per_op * total, len(name), name)]
        for count in present:
            if sizes[count][c]:
                blob, size = blobs[count]
                pieces.append(blob[firsts[count][c] * size:(firsts[count][c] + sizes[count][c]) * size])
        out.append(b"".join(pieces))
    return out, replies


def command(*args: str | bytes | int) -> bytes:
    """One command as RESP (for the few small commands sent beside the BITFIELDs)."""
    parts = [arg if isinstance(arg, bytes) else str(arg).encode() for arg in args]
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(part), part) for part in parts)


_SKIP = command(b"CLIENT", b"REPLY", b"SKIP")


class Window:
    """Packed commands sent as they come, one held connection per Redis node; replies read at :meth:`collect`."""

    def __init__(self, redis: RedisClient) -> None:
        self.redis: Any = redis  # Redis or RedisCluster, told apart by what they can do (below)
        self.cluster = hasattr(redis, "get_node_from_key")
        self.commands: list[tuple[str, bytes]] = []
        self.sizes: list[int | None] = []
        self.open: dict[int, tuple[Any, Any, list[int]]] = {}  # id(pool) -> (pool, connection, command indexes)

    def send(self, commands: Sequence[tuple[str, bytes]], sizes: Sequence[int] | None = None) -> None:
        """Write ``commands`` (key, RESP) now, one write per node; their replies are read later, in order.
        ``sizes``: operations of each command when all are u1 ``BITFIELD`` (their replies are then read raw)."""
        writes: dict[int, list[bytes]] = {}
        for i, (key, packed) in enumerate(commands):
            pool = _node_pool(self.redis, key) if self.cluster else self.redis.connection_pool
            if id(pool) not in self.open:
                self.open[id(pool)] = (pool, _widened(pool.get_connection()), [])
            self.open[id(pool)][2].append(len(self.commands))
            self.commands.append((key, packed))
            self.sizes.append(sizes[i] if sizes is not None else None)
            writes.setdefault(id(pool), []).append(packed)
        for ident, chunks in writes.items():
            try:
                self.open[ident][1].send_packed_command([b"".join(chunks)], check_health=False)
            except BaseException:
                self.abort()
                raise

    def collect(self) -> list[Any]:
        """The replies of every command sent, in sending order (error replies as exception values; u1 BITFIELD
        replies as uint8 arrays when read raw)."""
        replies: list[Any] = [None] * len(self.commands)
        try:
            for _, connection, indexes in self.open.values():
                raw = 0  # the leading u1 BITFIELDs are read straight from the socket, the rest by redis-py
                while raw < len(indexes) and self.sizes[indexes[raw]] is not None:
                    raw += 1
                channel = raw_channel(connection) if raw else None
                if channel is not None:
                    sock, reader = channel
                    replies_read = read_bit_replies(sock, [cast(int, self.sizes[i]) for i in indexes[:raw]], reader)
                    for i, reply in zip(indexes, replies_read, strict=False):
                        replies[i] = reply
                    indexes = indexes[raw:]
                for i in indexes:
                    try:
                        replies[i] = connection.read_response()
                    except ResponseError as exc:  # the error reply is consumed: the connection stays in step
                        replies[i] = exc
        except BaseException:
            self.abort()
            raise
        self._release()
        moved = [i for i, reply in enumerate(replies)
                 if isinstance(reply, ResponseError) and str(reply).startswith(("MOVED", "ASK"))]
        if moved and self.cluster:  # slots moved between nodes: learn the new layout and send those again
            self.redis.nodes_manager.initialize()
            for i, reply in zip(moved, send(self.redis, [self.commands[i] for i in moved]), strict=True):
                replies[i] = reply
        return replies

    def abort(self) -> None:
        """Drop the connections (their unread replies with them)."""
        for _, connection, _ in self.open.values():
            connection.disconnect()
        self._release()

    def _release(self) -> None:
        for pool, connection, _ in self.open.values():
            pool.release(connection)
        self.open = {}


class QuietLine:
    """Commands whose replies nobody reads (counters): each preceded by ``CLIENT REPLY SKIP``, written on one
    connection per connection pool (per node) and process, shared by every filter, under a lock, and never handed
    out by the pool — so that a server refusing ``CLIENT REPLY`` (an ACL) leaves its stray replies there, where
    they are drained and logged, never read as someone else's reply."""

    _lines: weakref.WeakKeyDictionary[Any, tuple[threading.Lock, list[Any]]] = weakref.WeakKeyDictionary()
    _guard = threading.Lock()

    def __init__(self, redis: RedisClient) -> None:
        self.redis: Any = redis  # Redis or RedisCluster, told apart by what they can do (below)
        self.cluster = hasattr(redis, "get_node_from_key")
        self.pools: dict[int, Any] = {}  # the pools written to, for barrier()

    def send(self, commands: Sequence[tuple[str, bytes]]) -> None:
        writes: dict[int, tuple[Any, list[bytes]]] = {}
        for key, packed in commands:
            pool = _node_pool(self.redis, key) if self.cluster else self.redis.connection_pool
            writes.setdefault(id(pool), (pool, []))[1].append(_SKIP + packed)
        for pool, chunks in writes.values():
            self.pools[id(pool)] = pool
            self._on_line(pool, lambda line, chunks=chunks: line.send_packed_command([b"".join(chunks)],
                                                                                      check_health=False))

    def barrier(self) -> None:
        """Return once Redis has run every command written so far (a PING answered behind them)."""
        def ping(line: Any) -> None:
            line.send_packed_command([command(b"PING")], check_health=False)
            while (reply := line.read_response()) not in (b"PONG", "PONG"):
                log.warning("Redis answered commands sent with CLIENT REPLY SKIP: %r", reply)

        for pool in list(self.pools.values()):
            self._on_line(pool, ping)

    @classmethod
    def _on_line(cls, pool: Any, action: Any) -> None:
        with cls._guard:
            lock, holder = cls._lines.setdefault(pool, (threading.Lock(), []))
        with lock:
            line = _ready_line(pool, holder)
            try:
                action(line)
            except BaseException:
                line.disconnect()
                holder.clear()
                raise


def _ready_line(pool: Any, holder: list[Any]) -> Any:
    """The pool's quiet line, its stray replies drained, connected anew when its server closed it (Redis restarted
    since the last write): nothing was written to it yet, so the replacement loses nothing. The line never goes back
    to the pool, whose own check of an idle connection never sees it — without this, the first counts written after
    a restart failed, and with them a check-and-add whose marks had landed."""
    if holder:
        line = holder[0]
        try:
            while line.can_read(timeout=0):
                log.warning("Redis answered commands sent with CLIENT REPLY SKIP: %r", line.read_response())
            return line
        except (RedisConnectionError, OSError):  # closed by the server: replaced below
            line.disconnect()
            holder.clear()
    line = pool.make_connection()
    line.connect()
    holder.append(line)
    return line


def _widened(connection: Any) -> Any:
    """The connection with a send buffer of :data:`SEND_BUFFER`: a write then returns at once, while Redis works,
    instead of waiting for it to read most of the chunk (TCP starts a socket at 16 kB)."""
    sock = _internals(connection)[0]
    if sock is not None and sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) < SEND_BUFFER:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
    return connection


def _internals(connection: Any) -> tuple[Any, Any]:
    """The one place that reads redis-py's private attributes: a connection's socket (``_sock``) and its hiredis
    reader (``_parser._reader``), each ``None`` where this redis-py version has no such thing. pyproject pins the
    redis-py versions this is tested with (``tests/unit/test_bloom_resp.py`` and ``tests/integration/test_bloom.py``
    check both names on a real connection)."""
    return getattr(connection, "_sock", None), getattr(getattr(connection, "_parser", None), "_reader", None)


def raw_channel(connection: Any) -> tuple[Any, Any] | None:
    """``(socket, hiredis reader)`` when the connection's socket can be read directly, else ``None``: the caller then
    reads through redis-py's public ``read_response``. Direct reading needs the hiredis reader to hold no byte of
    ours (it never does between complete replies; the check keeps the raw reader off any other parser)."""
    sock, reader = _internals(connection)
    if sock is None or not (hasattr(reader, "has_data") and hasattr(reader, "feed")) or reader.has_data():
        return None
    return sock, reader


def read_bit_replies(sock: Any, sizes: Sequence[int], reader: Any = None) -> list[Any]:
    """Read the replies of u1 ``BITFIELD`` commands of ``sizes`` operations straight from the socket.

    Such a reply is ``*<n>\\r\\n`` then ``n`` times ``:0\\r\\n`` or ``:1\\r\\n``, so all the replies of a window have a
    known length: they are read in as few ``recv`` calls as the kernel allows, then checked against the expected
    bytes and their bits taken in one numpy pass, instead of hiredis building a Python int per bit. The reply
    headers are checked as bytes arrive: an error reply (``-…``, shorter than expected) switches to reading reply
    by reply (:func:`_read_one_by_one`), which never waits for bytes that may not come. Bytes read past the last of
    these replies (only after an error) belong to later replies and are handed to ``reader`` (the connection's
    hiredis reader). Anything else, or a wrong count, is a protocol error (the caller drops the connection)."""
    headers = [b"*%d\r\n" % size for size in sizes]
    starts, total = [], 0
    for header, size in zip(headers, sizes, strict=True):
        starts.append(total)
        total += len(header) + 4 * size
    buf = bytearray(total)
    view = memoryview(buf)
    filled = checked = 0
    try:
        while filled < total:
            got = sock.recv_into(view[filled:])
            if not got:
                raise RedisConnectionError("Redis closed the connection while replying")
            filled += got
            while checked < len(starts) and starts[checked] < filled:
                at = starts[checked]
                if buf[at] != ord("*"):  # an error reply: the rest is read reply by reply
                    view.release()
                    return _read_one_by_one(sock, sizes, buf, filled, starts, checked, reader)
                header = headers[checked]
                if at + len(header) > filled:
                    break
                if buf[at:at + len(header)] != header:  # a wrong count would leave this waiting for bytes
                    raise InvalidResponse(f"unexpected reply to a u1 BITFIELD: {bytes(buf[at:filled][:32])!r}, "
                                          f"expected {header!r}")
                checked += 1
    except OSError as exc:
        raise RedisConnectionError(f"reading BITFIELD replies: {exc}") from exc
    finally:
        view.release()
    expected = np.frombuffer(b"".join([header + b":0\r\n" * size for header, size in zip(headers, sizes,
                                                                                              strict=True)]),
                             dtype=np.uint8)
    got_bytes = np.frombuffer(buf, dtype=np.uint8)
    differ = np.flatnonzero(got_bytes != expected)
    # The only bytes that may differ are the values of the cells (after a ":"), and only as "1" for "0".
    if len(differ) and not ((expected[differ - 1] == ord(":")) & (got_bytes[differ] == ord("1"))).all():
        raise InvalidResponse(f"unexpected reply to u1 BITFIELDs near byte {int(differ[0])}")
    bits = got_bytes[np.flatnonzero(expected == ord(":")) + 1] - np.uint8(ord("0"))
    out, at = [], 0
    for size in sizes:
        out.append(bits[at:at + size])
        at += size
    return out


def _read_one_by_one(sock: Any, sizes: Sequence[int], buf: bytearray, filled: int, starts: Sequence[int],
                     first: int, reader: Any) -> list[Any]:
    """:func:`read_bit_replies` after an error reply: replies ``first`` … read one at a time from ``buf``
    (``filled`` bytes so far), never asking the socket for more than the next reply is sure to hold."""

    def fill(need: int) -> None:
        nonlocal buf, filled
        if need > len(buf):
            grown = bytearray(max(need, 2 * len(buf)))
            grown[:filled] = buf[:filled]
            buf = grown
        view = memoryview(buf)
        try:
            while filled < need:
                got = sock.recv_into(view[filled:need])
                if not got:
                    raise RedisConnectionError("Redis closed the connection while replying")
                filled += got
        except OSError as exc:
            raise RedisConnectionError(f"reading BITFIELD replies: {exc}") from exc
        finally:
            view.release()

    out: list[Any] = [None] * len(sizes)
    pos = starts[first]
    for i in range(first, len(sizes)):
        size = sizes[i]
        fill(pos + 1)
        if buf[pos] == ord("-"):  # an error line: read to its end
            while (end := buf.find(b"\r\n", pos, filled)) == -1:
                fill(filled + 1)
            out[i] = ResponseError(bytes(buf[pos + 1:end]).decode(errors="replace"))
            pos = end + 2
            continue
        header = b"*%d\r\n" % size
        fill(pos + len(header))  # the header first: a wrong count must not leave this waiting for its cells
        if bytes(buf[pos:pos + len(header)]) != header:
            raise InvalidResponse(f"unexpected reply to a u1 BITFIELD of {size}: {bytes(buf[pos:pos + 32])!r}")
        pos += len(header)
        fill(pos + 4 * size)
        out[i] = _cells(buf, pos, size)
        pos += 4 * size
    for i in range(first):
        out[i] = _cells(buf, starts[i] + len(b"*%d\r\n" % sizes[i]), sizes[i])
    if pos < filled:  # later replies, read ahead: the connection's parser reads them next
        if reader is None:
            raise InvalidResponse("bytes left after the BITFIELD replies")
        reader.feed(bytes(buf[pos:filled]))
    return out


def _cells(buf: bytearray, pos: int, size: int) -> np.ndarray:
    cells = np.frombuffer(buf, dtype=np.uint8, count=4 * size, offset=pos).reshape(-1, 4)
    if size and not ((cells[:, 0] == ord(":")) & (cells[:, 1] >= ord("0")) & (cells[:, 1] <= ord("1"))
                     & (cells[:, 2] == ord("\r")) & (cells[:, 3] == ord("\n"))).all():
        raise InvalidResponse("a u1 BITFIELD reply holds something else than 0 and 1")
    return cells[:, 1] - np.uint8(ord("0"))


def send(redis: RedisClient, commands: Sequence[tuple[str, bytes]], sizes: Sequence[int] | None = None) -> list[Any]:
    """Send packed commands (key, RESP) pipelined, one connection per node; replies in order (errors as values)."""
    window = Window(redis)
    window.send(commands, sizes)
    return window.collect()


def _node_pool(redis: Any, key: str) -> Any:  # a RedisCluster's
    node = redis.get_node_from_key(key)
    client = node.redis_connection or redis.get_redis_connection(node)
    return client.connection_pool
