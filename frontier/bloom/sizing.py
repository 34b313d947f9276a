"""How big a multi-group Bloom filter must be, and how its arrays are laid out in Redis (seed 4.2.3.2, 4.2.3.3).

**The filter.** ``h`` groups of ``k`` hash functions; each group has its own array of ``m`` cells. An element is
reported present when its ``k`` cells are set in *every* group. With ``n`` elements and hashes that behave like
independent uniform ones, a cell of one group is still empty with probability ``(1 - 1/m)^(k n)``, so

    p = (1 - (1 - 1/m)^(k n))^(k h)                                             (seed 4-7, exact form)

**Fewest bits for a target rate.** Write ``K = k h`` and ``M = h m``. Since ``(1 - 1/m)^(k n) ≈ e^(-K n / M)``, the
rate is the one of a single Bloom filter with ``K`` hashes over ``M`` bits: splitting into groups neither helps nor
hurts at equal total memory (the seed's fig. 5-4 compares h groups against h times the memory; see
``bench/bloom_groups.py``). For a target ``p`` the memory is smallest at ``K = -log2 p`` and then
``M / n = -ln p / (ln 2)^2`` bits per element (19.17 at p = 0.0001). ``K`` must be a whole multiple of ``h``:
:func:`hashes_per_group` takes the ``k`` whose array is smallest (for p = 0.0001 and h = 2, k = 7: 19.19 bits).
Each hash costs one Redis operation per URL, so a filter may accept a little more memory for fewer hashes
(``memory_slack``: the smallest ``k`` within that fraction of the fewest bits; 0.03 gives k = 5, 19.70 bits, 1.028×
the optimum, 29 % fewer operations).
Given ``k``, the exact form above is solved for ``m`` in closed form (:func:`cells_per_group`)::

    m = 1 / (1 - (1 - p^(1/K))^(1/(k n)))

**Redis strings.** A layer of a shard is one or more Redis strings ("parts"; a string holds at most 512 MB, and a
big key blocks a cluster slot migration, so parts are capped at :data:`MAX_PART_BYTES`). A part holds a slice of
every group's array, group after group; a URL picks one part (with probability proportional to its size) and has
all its cells there, so that one ``BITFIELD`` on one key checks and sets it atomically. jemalloc rounds every
allocation up to a size class (four per power of two: 2^j × 1, 1.25, 1.5, 1.75), so a string of exactly 2^j bytes
costs 25 % more than its length. :func:`part_lengths` therefore cuts an array into strings whose allocation (length
+ SDS header + NUL) is exactly a size class, greedily from the largest, and rounds the last small remainder up when
that wastes under :data:`ROUNDING_TOLERANCE` of the array; every allocated byte is used as cells.

**Sharding.** The filter is split into ``S`` independent shards by fingerprint; a shard holds ``n / S`` elements
(± sqrt(n / S (1 - 1/S)): binomial). The rate is a convex function of the load, but at these loads the effect is
below 0.1 %. A shard's layer is sized for the mean load plus 4 standard deviations and closed there
(:func:`headroom`; nothing with a single shard, whose load is the filter's). That costs ``4 sqrt((1 - 1/S) / c)`` of
memory, so a filter has no more shards than it needs (:func:`shard_count`): one per :data:`SHARD_ELEMENTS` elements
of capacity, up to the configured number — a shard of 2^20 elements is 2.5 MB, the size at which spreading keys
over a Redis Cluster starts to be worth anything, and its headroom costs 0.4 %.

**Growth (scalable Bloom filter, Almeida et al. 2007).** Layer ``i`` of a shard is sized for ``capacity ×
growth^i`` elements at rate ``p × tightening^i``. Layer 0 gets the whole target rate, so a filter that stays within
its capacity uses the fewest bits; once it grows, the compound rate is at most ``p / (1 - tightening)`` (2p by
default): bounded, however many layers are added.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LN2_SQUARED = math.log(2) ** 2
MAX_PART_BYTES = 64 * 1024 * 1024
"""Cap on one string: well under Redis's 512 MB, small enough to migrate between cluster nodes."""
ROUNDING_TOLERANCE = 0.005
"""Largest fraction of an array that may be wasted by rounding its last part up to a size class."""
MIN_CLASS = 80
"""Smallest allocation used for a part (jemalloc's classes are regularly spaced from 64 bytes up)."""
SHARD_ELEMENTS = 1 << 20
"""Capacity per shard below which a filter takes fewer shards than configured (:func:`shard_count`)."""


def optimal_bits_per_element(error_rate: float) -> float:
    """The Bloom optimum: ``-ln p / (ln 2)^2`` bits per element (real-valued number of hashes)."""
    _check_rate(error_rate)
    return -math.log(error_rate) / LN2_SQUARED


def optimal_hashes(error_rate: float) -> float:
    """The real-valued optimal total number of hash functions, ``-log2 p``."""
    _check_rate(error_rate)
    return -math.log2(error_rate)


def bits_per_element(error_rate: float, total_hashes: int) -> float:
    """Bits per element for rate ``p`` with exactly ``K`` hashes (large-array limit): ``-K / ln(1 - p^(1/K))``."""
    _check_rate(error_rate)
    return -total_hashes / math.log1p(-(error_rate ** (1.0 / total_hashes)))


def hashes_per_group(error_rate: float, groups: int, memory_slack: float = 0.0) -> int:
    """``k`` for ``h`` groups: the whole number of hashes per group that needs the fewest bits in total — or, with
    ``memory_slack`` > 0, the smallest ``k`` whose bits stay within that fraction of the fewest (every hash is a
    Redis operation per URL: fewer hashes trade a little memory for speed)."""
    if groups < 1:
        raise ValueError(f"groups must be ≥ 1, got {groups}")
    if memory_slack < 0:
        raise ValueError(f"memory_slack must be ≥ 0, got {memory_slack}")
    ideal = optimal_hashes(error_rate) / groups
    candidates = range(1, math.ceil(ideal) + 1)
    fewest = min(bits_per_element(error_rate, k * groups) for k in candidates)
    return min(k for k in candidates if bits_per_element(error_rate, k * groups) <= fewest * (1 + memory_slack))


def cells_per_group(capacity: int, error_rate: float, groups: int, k: int) -> int:
    """Smallest ``m`` with ``(1 - (1 - 1/m)^(k n))^(k h) ≤ p`` (exact form, closed-form solution)."""
    _check_rate(error_rate)
    if capacity < 1:
        raise ValueError(f"capacity must be ≥ 1, got {capacity}")
    per_group_fill = error_rate ** (1.0 / (k * groups))  # (1 - (1-1/m)^(kn)) must not exceed this
    inverse = -math.expm1(math.log1p(-per_group_fill) / (k * capacity))
    return math.ceil(1.0 / inverse)


def false_positive_rate(elements: float, cells: int, k: int, groups: int) -> float:
    """The exact-form rate of one group layout holding ``elements`` elements."""
    if elements <= 0:
        return 0.0
    empty = math.exp(k * elements * math.log1p(-1.0 / cells))
    return (1.0 - empty) ** (k * groups)


# --- jemalloc size classes and Redis strings ---------------------------------------------------------------------
def size_class(size: int) -> int:
    """The jemalloc size class an allocation of ``size`` bytes is rounded up to (x86-64, 16-byte quantum)."""
    if size <= 8:
        return 8
    if size <= 64:
        return -(-size // 16) * 16
    group = 1 << ((size - 1).bit_length() - 1)  # 2^j < size ≤ 2^(j+1)
    spacing = group // 4
    return -(-size // spacing) * spacing


def class_below(size: int) -> int:
    """The largest size class not above ``size`` (``size`` ≥ 64)."""
    if size < 64:
        raise ValueError("class_below is meant for sizes ≥ 64")
    candidate = size_class(size)
    if candidate == size:
        return size
    group = 1 << (size.bit_length() - 1)  # 2^j ≤ size < 2^(j+1)
    spacing = max(group // 4, 16)
    return size // spacing * spacing


def _sds_overhead(length: int) -> int:
    """SDS header plus the trailing NUL of a Redis string of ``length`` bytes."""
    if length < 1 << 8:
        return 3 + 1
    if length < 1 << 16:
        return 5 + 1
    return 9 + 1


def allocation(length: int) -> int:
    """Bytes jemalloc allocates for a Redis string of ``length`` bytes (what ``MEMORY USAGE`` counts)."""
    return size_class(length + _sds_overhead(length))


def length_for_class(klass: int) -> int:
    """The string length whose allocation is exactly the size class ``klass`` (0 when none fits)."""
    for overhead in (10, 6, 4):
        length = klass - overhead
        if length > 0 and length + _sds_overhead(length) == klass:
            return length
    return 0


def _longest_fitting(limit: int) -> int:
    """The longest string ≤ ``limit`` bytes whose allocation wastes nothing."""
    klass = class_below(limit + 10) if limit + 10 >= 64 else 0
    while klass >= MIN_CLASS:
        length = length_for_class(klass)
        if 0 < length <= limit:
            return length
        klass = class_below(klass - 1)
    return 0


def _shortest_fitting(minimum: int) -> int:
    """The shortest string ≥ ``minimum`` bytes whose allocation wastes nothing."""
    klass = max(allocation(minimum), MIN_CLASS)
    while length_for_class(klass) < minimum:  # none fits at a header-size boundary: try the next class
        klass = size_class(klass + 1)
    return length_for_class(klass)


def part_lengths(array_bytes: int, max_part_bytes: int = MAX_PART_BYTES) -> list[int]:
    """Cut an array of at least ``array_bytes`` bytes into string lengths that waste (almost) no allocation."""
    if array_bytes < 1:
        raise ValueError("an array needs at least one byte")
    limit = _longest_fitting(max_part_bytes)
    parts: list[int] = []
    remaining = array_bytes
    while remaining > 0:
        rounded = _shortest_fitting(remaining)
        small_waste = rounded - remaining <= ROUNDING_TOLERANCE * array_bytes
        if rounded <= limit and (small_waste or allocation(remaining) <= MIN_CLASS):
            parts.append(rounded)
            break
        piece = min(limit, _longest_fitting(remaining)) or rounded
        parts.append(piece)
        remaining -= piece
    return parts


# --- layer plans -------------------------------------------------------------------------------------------------
def shard_count(capacity: int, most: int) -> int:
    """Shards for a filter of ``capacity`` elements: one per :data:`SHARD_ELEMENTS`, at least 1, at most ``most``."""
    if capacity < 1 or most < 1:
        raise ValueError(f"capacity and shards must be ≥ 1, got {capacity} and {most}")
    return max(1, min(most, capacity // SHARD_ELEMENTS))


def headroom(capacity: int, shards: int) -> int:
    """Four standard deviations of a shard's load: ``ceil(4 sqrt(c (1 - 1/S)))``.

    A filter holding its ``n`` elements spreads them binomially over its ``S`` shards, so a shard meant for
    ``c = n / S`` may receive a little more without the filter being over capacity; closing it at ``c`` would add
    a whole layer for nothing. A layer is therefore sized for (and closed at) ``c`` plus this headroom — a shard
    passes it with probability 3e-5 — so that no layer ever holds more than it was sized for. It costs
    ``4 sqrt((1 - 1/S) / c)`` of memory: 1.5 % at c = 62,500 (10^6 URLs over 16 shards), 0.4 % at 2^20, nothing
    with one shard."""
    return math.ceil(4 * math.sqrt(capacity * (1.0 - 1.0 / shards)))


@dataclass(frozen=True)
class LayerPlan:
    """One layer of one shard: ``groups`` arrays of ``cells`` cells each, cut into parts. Part ``p`` is one Redis
    string holding ``part_cells[p]`` cells of every group, group after group, so that all the cells of a URL are
    in one string (one atomic BITFIELD)."""

    index: int
    capacity: int
    error_rate: float
    k: int
    groups: int
    cell_bits: int
    part_cells: tuple[int, ...]  # cells of each group in each part
    headroom: int = 0  # elements above capacity the layer is sized for: see :func:`headroom`

    @property
    def cells(self) -> int:
        """Cells of one group's array (all parts)."""
        return sum(self.part_cells)

    @property
    def limit(self) -> int:
        """Elements the layer is sized for, and after which it is closed: see :func:`headroom`."""
        return self.capacity + self.headroom

    @property
    def part_bytes(self) -> tuple[int, ...]:
        """Length of each part string (every group's cells)."""
        return tuple(self.groups * cells * self.cell_bits // 8 for cells in self.part_cells)

    def false_positive_rate(self, elements: float) -> float:
        return false_positive_rate(elements, self.cells, self.k, self.groups)


def plan_layer(
    capacity: int,
    error_rate: float,
    groups: int,
    *,
    cell_bits: int = 1,
    index: int = 0,
    shards: int = 1,
    growth: int = 2,
    tightening: float = 0.5,
    memory_slack: float = 0.0,
    max_part_bytes: int = MAX_PART_BYTES,
) -> LayerPlan:
    """The layout of layer ``index`` of one of ``shards`` shards, whose first layer holds ``capacity`` elements at
    ``error_rate``."""
    if cell_bits not in (1, 2, 4, 8):
        raise ValueError(f"cell_bits must divide a byte, got {cell_bits}")
    layer_capacity = capacity * growth**index
    layer_rate = error_rate * tightening**index
    k = hashes_per_group(layer_rate, groups, memory_slack)
    spread = headroom(layer_capacity, shards)
    cells = cells_per_group(layer_capacity + spread, layer_rate, groups, k)
    # Every part holds a whole number of bytes of every group: cells per group per part are a multiple of 8.
    array_bytes = groups * (-(-cells * cell_bits // 8) + 4)  # + 4: the floor below never leaves fewer cells
    lengths = part_lengths(array_bytes, max_part_bytes)
    part_cells = tuple(length // groups * 8 // cell_bits for length in lengths)
    return LayerPlan(index, layer_capacity, layer_rate, k, groups, cell_bits, part_cells, spread)


def compound_rate_bound(error_rate: float, tightening: float) -> float:
    """Upper bound of a grown filter's rate: ``p (1 + t + t² + …) = p / (1 - t)``."""
    return error_rate / (1.0 - tightening)


def _check_rate(error_rate: float) -> None:
    if not 0.0 < error_rate < 1.0:
        raise ValueError(f"error rate must be in (0, 1), got {error_rate}")
