"""The raw reader of u1 BITFIELD replies (frontier.bloom.resp.read_bit_replies), over a socket pair."""

from __future__ import annotations

import socket
import threading

import numpy as np
import pytest
from redis.exceptions import InvalidResponse, ResponseError

from frontier.bloom.resp import read_bit_replies

pytestmark = pytest.mark.unit


class Reader:
    """Stands for the connection's hiredis reader: records what is handed over."""

    def __init__(self) -> None:
        self.fed = b""

    def feed(self, data: bytes) -> None:
        self.fed += data


def reply(bits: list[int]) -> bytes:
    return b"*%d\r\n" % len(bits) + b"".join(b":%d\r\n" % bit for bit in bits)


def read(pieces: list[bytes], sizes: list[int], reader: Reader | None = None, rest: list | None = None) -> list:
    """Write ``pieces`` one send at a time from a thread (so that replies arrive split), read them back; the
    bytes left in the socket go to ``rest``."""
    ours, theirs = socket.socketpair()
    ours.settimeout(10)  # a reader waiting for bytes that never come fails the test instead of hanging it
    writer = threading.Thread(target=lambda: [theirs.sendall(piece) for piece in pieces])
    writer.start()
    try:
        out = read_bit_replies(ours, sizes, reader)
        writer.join()
        theirs.close()
        if rest is not None:
            while chunk := ours.recv(4096):
                rest.append(chunk)
        return out
    finally:
        writer.join()
        ours.close()
        theirs.close()


def test_replies_split_anywhere_are_read_whole():
    stream = reply([0, 1, 1]) + reply([1]) + reply([]) + reply([0, 0, 1, 0])
    pieces = [stream[i:i + 5] for i in range(0, len(stream), 5)]
    out = read(pieces, [3, 1, 0, 4])
    assert [part.tolist() for part in out] == [[0, 1, 1], [1], [], [0, 0, 1, 0]]


@pytest.mark.parametrize("announced", [5, 40])
def test_an_error_reply_is_kept_and_later_bytes_stay_in_order(announced):
    later = b"$5\r\nafter\r\n"
    stream = reply([1, 0]) + b"-WRONGTYPE Operation against a key\r\n" + reply([0, 1, 0]) + later
    reader, rest = Reader(), []
    first, error, last = read([stream], [2, announced, 3], reader, rest)
    assert first.tolist() == [1, 0] and last.tolist() == [0, 1, 0]
    assert isinstance(error, ResponseError) and "WRONGTYPE" in str(error)
    # A reply announced long (40 operations) makes the bulk read take the later bytes too: they go to redis-py's
    # parser, which reads them before the socket; otherwise they are still in the socket.
    assert reader.fed + b"".join(rest) == later
    assert (reader.fed == later) == (announced == 40)


def test_an_error_reply_at_the_end_does_not_wait_for_more():
    stream = reply([1]) + b"-OOM command not allowed\r\n"
    first, error = read([stream], [1, 7])
    assert first.tolist() == [1] and "OOM" in str(error)


@pytest.mark.parametrize("stream", [
    reply([0, 2]),  # a cell that is not 0 or 1
    reply([0, 1]).replace(b":1", b"+1"),  # not an integer reply
    reply([0]),  # fewer operations than sent: caught at the header, not by waiting
])
def test_anything_else_is_a_protocol_error(stream):
    with pytest.raises(InvalidResponse):
        read([stream], [2])


def test_bits_come_back_as_small_integers():
    (bits,) = read([reply([1, 0, 1])], [3])
    assert bits.dtype == np.uint8


def test_a_wrong_count_after_an_error_is_a_protocol_error_not_a_wait():
    stream = reply([1]) + b"-ERR no such key\r\n" + reply([0])  # three operations announced, one answered
    with pytest.raises(InvalidResponse):
        read([stream], [1, 5, 3])
