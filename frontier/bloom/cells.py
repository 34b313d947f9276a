"""Where a URL's bits are in a layer, and the ``BITFIELD`` commands of a batch's URLs (the bit filter's hot path,
:mod:`frontier.bloom.direct`): pure numpy, no Redis."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Packed", "cells", "checked", "dense", "group_by"]

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
    modulus = sizes[part].astype(np.int64)[:, None]
    x = (h1.astype(np.uint64) % sizes[part]).astype(np.int64)[:, None]
    y = (h2.astype(np.uint64) % sizes[part]).astype(np.int64)[:, None]
    # The loop x += y; y += j (mod m) in closed form: x_j = x + j y + j (j-1) (j-2) / 6 (mod m). x, y < m ≤ 2^32
    # and j < 64, so nothing overflows int64 before the reduction.
    j = np.arange(k * groups, dtype=np.int64)
    out = (x + j * y + j * (j - 1) * (j - 2) // 6) % modulus
    out += (j // k) * modulus  # group g's cells follow the g groups before it
    if cell_bits != 1:
        out *= cell_bits
    return part, out


def group_by(values: np.ndarray) -> dict[int, np.ndarray]:
    """Indexes of equal values, in input order, by value."""
    order = np.argsort(values, kind="stable")
    cuts = np.flatnonzero(np.diff(values[order])) + 1
    out: dict[int, np.ndarray] = defaultdict(lambda: np.empty(0, dtype=np.int64))
    for chunk in np.split(order, cuts):
        if len(chunk):
            out[int(values[chunk[0]])] = chunk
    return out


def dense(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of small non-negative integers, and each value's index among them (``np.unique`` with
    ``return_inverse``, without its sort: a few times faster on a chunk)."""
    present = np.flatnonzero(np.bincount(values))
    index = np.empty(int(present[-1]) + 1 if len(present) else 0, dtype=np.int64)
    index[present] = np.arange(len(present))
    return present, index[values]


@dataclass
class Packed:
    """BITFIELD commands of some URLs. ``owners``/``widths``: URLs and cells per URL of each layer's group of
    commands, whose operations, concatenated, are the cells row by row; ``order`` maps the operations as sent
    (grouped by digit count in each command) to that concatenation."""

    commands: list[tuple[str, bytes]]
    owners: list[np.ndarray]
    widths: list[int]
    order: np.ndarray
    sizes: list[int]  # operations per command

    def bits(self, replies: Sequence[Any]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Per layer group: its URLs and their cells' replies, one row per URL in cell order."""
        if not self.commands:
            return
        flat = np.concatenate([np.asarray(checked(reply), dtype=np.int8) for reply in replies])
        original = np.empty_like(flat)
        original[self.order] = flat
        at = 0
        for rows, width in zip(self.owners, self.widths, strict=True):
            yield rows, original[at:at + len(rows) * width].reshape(-1, width)
            at += len(rows) * width


def checked(reply: Any) -> Any:
    """A reply, or the error it holds raised."""
    if isinstance(reply, Exception):
        raise reply
    return reply
