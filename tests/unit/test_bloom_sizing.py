"""The Bloom filter's sizing math and its Redis string layout (frontier/bloom/sizing.py)."""

import math
import random

import numpy as np
import pytest

from frontier.bloom import sizing
from frontier.bloom.filter import BloomSpec
from frontier.bloom.fingerprint import positions

pytestmark = pytest.mark.unit


def test_bloom_optimum_at_one_in_ten_thousand():
    assert sizing.optimal_bits_per_element(0.0001) == pytest.approx(19.17, abs=0.005)
    assert sizing.optimal_hashes(0.0001) == pytest.approx(13.29, abs=0.005)


@pytest.mark.parametrize("rate", [0.01, 0.001, 0.0001, 1e-6])
def test_whole_hash_counts_cost_little_over_the_optimum(rate):
    best = min(sizing.bits_per_element(rate, k) for k in range(1, 40))
    assert best >= sizing.optimal_bits_per_element(rate) * 0.9999
    assert best <= sizing.optimal_bits_per_element(rate) * 1.01


@pytest.mark.parametrize(("groups", "k"), [(1, 13), (2, 7), (3, 4), (4, 3)])
def test_hashes_per_group_takes_the_smallest_array(groups, k):
    assert sizing.hashes_per_group(0.0001, groups) == k
    others = [sizing.bits_per_element(0.0001, j * groups) for j in range(1, 20) if j != k]
    assert sizing.bits_per_element(0.0001, k * groups) <= min(others)


def test_memory_slack_trades_bits_for_fewer_hashes():
    fewest = sizing.bits_per_element(0.0001, 14)
    k = sizing.hashes_per_group(0.0001, 2, memory_slack=0.03)
    assert k == 5
    assert sizing.bits_per_element(0.0001, 2 * k) <= fewest * 1.03
    assert sizing.bits_per_element(0.0001, 2 * (k - 1)) > fewest * 1.03


@pytest.mark.parametrize(("n", "rate", "groups"), [(1000, 0.01, 1), (62_500, 0.0001, 2), (10**7, 0.0001, 3)])
def test_cells_per_group_is_the_smallest_array_meeting_the_rate(n, rate, groups):
    k = sizing.hashes_per_group(rate, groups)
    m = sizing.cells_per_group(n, rate, groups, k)
    assert sizing.false_positive_rate(n, m, k, groups) <= rate
    assert sizing.false_positive_rate(n, m - 1, k, groups) > rate * (1 - 1e-9)
    # and the large-array limit of the exact form is the textbook one
    assert groups * m / n == pytest.approx(sizing.bits_per_element(rate, k * groups), rel=1e-3)


def test_groups_at_equal_total_memory_match_one_filter():
    n, total = 3_000_000, 60_000_000
    one = sizing.false_positive_rate(n, total, 12, 1)
    split = sizing.false_positive_rate(n, total // 4, 3, 4)
    assert split == pytest.approx(one, rel=1e-3)


def test_seed_formula_4_7_is_per_group_memory():
    n, m, k = 3_000_000, 10_000_000, 4
    single = sizing.false_positive_rate(n, m, k, 1)
    assert sizing.false_positive_rate(n, m, k, 3) == pytest.approx(single**3)


@pytest.mark.parametrize("size", [9, 17, 63, 64, 65, 100, 129, 1000, 4097, 81_920, 10**6, 3 * 2**20 + 1])
def test_size_classes_follow_jemalloc(size):
    klass = sizing.size_class(size)
    assert klass >= size
    if size > 64:
        group = 1 << ((size - 1).bit_length() - 1)
        assert (klass - group) % (group // 4) == 0
        assert klass - size < group // 4


def test_allocation_matches_redis_sds_layout():
    assert sizing.allocation(131_062) == 131_072  # 9-byte header + NUL
    assert sizing.allocation(131_072) == 163_840  # a power of two wastes a quarter
    assert sizing.allocation(100) == 112  # 3-byte header + NUL
    for klass in (128, 1024, 81_920, 2**20, 1_310_720):
        length = sizing.length_for_class(klass)
        assert sizing.allocation(length) == klass


@pytest.mark.parametrize("array_bytes", [1, 75, 1000, 74_990, 150_000, 1_199_950, 12_000_000, 700_000_000])
def test_parts_waste_almost_nothing_and_respect_the_cap(array_bytes):
    parts = sizing.part_lengths(array_bytes)
    total = sum(parts)
    assert total >= array_bytes
    allocated = sum(sizing.allocation(length) for length in parts)
    assert all(sizing.allocation(length) == sizing.size_class(length + 10) or length < 65_536 for length in parts)
    if array_bytes >= 10_000:
        assert allocated <= array_bytes * (1 + 2 * sizing.ROUNDING_TOLERANCE)
    assert max(parts) <= sizing.MAX_PART_BYTES
    assert len(parts) <= 16


def test_layer_plan_meets_the_rate_within_five_percent_of_the_optimum():
    spec = BloomSpec(capacity=1_000_000, error_rate=0.0001, groups=2, shards=16, memory_slack=0.0)
    layer = spec.layer(0)
    assert layer.capacity == 62_500
    assert layer.false_positive_rate(layer.capacity) <= 0.0001
    allocated = spec.shards * sum(sizing.allocation(b) for b in layer.part_bytes)
    assert allocated * 8 / spec.capacity <= 1.05 * sizing.optimal_bits_per_element(0.0001)


def test_headroom_covers_the_spread_between_shards_only():
    assert sizing.headroom(1_000_000, 1) == 0  # one shard holds the whole filter's load: no spread
    assert sizing.headroom(62_500, 16) == math.ceil(4 * math.sqrt(62_500 * 15 / 16))
    one = BloomSpec(capacity=100_000, shards=1, memory_slack=0.0).layer(0)
    many = BloomSpec(capacity=100_000, shards=4, memory_slack=0.0).layer(0)
    assert one.limit == 100_000
    assert many.limit == 25_000 + sizing.headroom(25_000, 4)
    assert one.false_positive_rate(one.limit) <= 0.0001 and many.false_positive_rate(many.limit) <= 0.0001


@pytest.mark.parametrize(("capacity", "most", "expected"), [
    (100_000, 16, 1), (1_000_000, 16, 1), (3 << 20, 16, 3), (10_000_000, 16, 9), (10**9, 16, 16), (10**9, 4, 4)])
def test_a_filter_takes_one_shard_per_million_elements_at_most_the_configured(capacity, most, expected):
    assert sizing.shard_count(capacity, most) == expected


def test_default_settings_stay_within_five_percent_of_the_optimum():
    """What a worker gets with the settings' defaults (memory slack, shards by capacity), at the sizes the
    benchmark measures and at a crawl's first size."""
    from messaging.settings import SETTINGS

    slack = SETTINGS["CRAWLFLEET_BLOOM_MEMORY_SLACK"].default
    most = SETTINGS["CRAWLFLEET_BLOOM_SHARDS"].default
    for capacity in (100_000, 1_000_000, 10_000_000):
        spec = BloomSpec(capacity=capacity, shards=sizing.shard_count(capacity, most), memory_slack=slack)
        layer = spec.layer(0)
        allocated = spec.shards * sum(sizing.allocation(b) for b in layer.part_bytes)
        assert allocated * 8 / capacity <= 1.05 * sizing.optimal_bits_per_element(0.0001), capacity


def test_growth_tightens_the_rate_and_bounds_the_compound_rate():
    spec = BloomSpec(capacity=1000, error_rate=0.001, shards=1, growth=2, tightening=0.5, memory_slack=0.0)
    layers = [spec.layer(i) for i in range(12)]
    assert [layer.capacity for layer in layers[:3]] == [1000, 2000, 4000]
    compound = 1 - math.prod(1 - layer.false_positive_rate(layer.capacity) for layer in layers)
    assert compound <= sizing.compound_rate_bound(0.001, 0.5)
    assert layers[5].k >= layers[0].k


def test_counting_cells_take_four_bits():
    bits = BloomSpec(capacity=1_000_000, memory_slack=0.0).layer(0)
    counters = BloomSpec(capacity=1_000_000, counting=True, memory_slack=0.0).layer(0)
    needed = sizing.cells_per_group(bits.capacity, 0.0001, 2, bits.k)
    assert counters.cells >= needed and bits.cells >= needed
    assert sum(counters.part_bytes) == pytest.approx(4 * sum(bits.part_bytes), rel=0.02)


def test_parts_are_chosen_in_proportion_to_their_size():
    sizes = [800, 150, 50]
    rng = random.Random(7)
    hits = [0, 0, 0]
    for _ in range(20_000):
        part, cells = positions(rng.getrandbits(52), rng.getrandbits(52), rng.getrandbits(24), sizes, 3, 2)
        hits[part] += 1
        assert all(0 <= cell < sizes[part] for group in cells for cell in group)
    assert [h / 20_000 for h in hits] == pytest.approx([0.8, 0.15, 0.05], abs=0.01)


def test_spec_round_trips_and_rejects_nonsense():
    spec = BloomSpec(capacity=5, counting=True, memory_slack=0.03)
    assert BloomSpec.from_json(spec.to_json()) == spec
    for bad in ({"capacity": 0}, {"capacity": 5, "error_rate": 1.5}, {"capacity": 5, "shards": 0}):
        with pytest.raises(ValueError):
            BloomSpec(**bad)


def test_the_groups_benchmark_uses_the_filters_cell_positions():
    from bench.bloom_groups import cell_positions

    rng = random.Random(11)
    h1 = [float(rng.getrandbits(52)) for _ in range(200)]
    h2 = [float(rng.getrandbits(52)) for _ in range(200)]
    vectorised = cell_positions(np.array(h1), np.array(h2), 99_991, 8)
    for i in range(200):
        _, cells = positions(h1[i], h2[i], 0.0, [99_991], 4, 2)
        assert [int(c) for c in vectorised[i]] == cells[0] + cells[1]


def test_vectorised_cells_match_the_reference_positions():
    from frontier.bloom.cells import cells

    rng = random.Random(5)
    layer = {"k": 7, "h": 2, "m": 800 + 150 + 50, "sizes": [800, 150, 50]}
    h1 = np.array([float(rng.getrandbits(52)) for _ in range(300)])
    h2 = np.array([float(rng.getrandbits(52)) for _ in range(300)])
    selector = np.array([float(rng.getrandbits(24)) for _ in range(300)])
    part, offsets = cells(layer, h1, h2, selector, cell_bits=4)
    for i in range(300):
        ref_part, ref = positions(h1[i], h2[i], selector[i], layer["sizes"], 7, 2)
        size = layer["sizes"][ref_part]
        assert part[i] == ref_part
        assert [int(o) for o in offsets[i]] == [(g * size + c) * 4 for g in range(2) for c in ref[g]]


def test_packed_bitfield_is_the_resp_redis_py_would_send():
    from redis.connection import Connection

    from frontier.bloom.resp import pack_bitfield

    offsets = np.array([0, 7, 9, 10, 99, 12345, 4_294_967_295, 1_000_000_000], dtype=np.uint64)
    args = []
    for offset in offsets.tolist():
        args += ["SET", "u1", str(offset), "1"]
    expected = b"".join(Connection().pack_command("BITFIELD", "bloom:k", *args))
    assert pack_bitfield("bloom:k", b"SET", offsets, b"1") == expected
    gets = b"".join(Connection().pack_command("BITFIELD", "k", "GET", "u1", "5", "GET", "u1", "50"))
    assert pack_bitfield("k", b"GET", np.array([5, 50], dtype=np.uint64)) == gets
    # Many operations of one digit count are written as a matrix, a few one by one: the same bytes either way.
    many = np.sort(np.random.default_rng(5).integers(0, 1 << 32, 400, dtype=np.uint64) >> np.uint64(9))
    args = [arg for offset in many.tolist() for arg in ("SET", "u1", str(offset), "1")]
    assert pack_bitfield("k", b"SET", many, b"1") == b"".join(Connection().pack_command("BITFIELD", "k", *args))


def test_packed_commands_keep_their_operations_apart():
    from redis.connection import Connection

    from frontier.bloom.resp import pack_commands

    rng = np.random.default_rng(3)
    keys = [f"bloom:k{i}" for i in range(300)]  # more commands than a byte counts
    command_of = rng.integers(0, len(keys), 5000)
    offsets = rng.integers(0, 1 << 32, 5000, dtype=np.uint64) >> rng.integers(0, 32, 5000).astype(np.uint64)
    packed, replies = pack_commands(keys, b"GET", None, offsets, command_of)
    at = 0
    for c, (key, raw) in enumerate(zip(keys, packed, strict=True)):
        mine = np.flatnonzero(command_of == c)
        sent = replies[at:at + len(mine)]
        at += len(mine)
        assert sorted(sent.tolist()) == mine.tolist()  # the reply positions of command c are its operations
        digits = [len(str(int(offsets[i]))) for i in sent]
        assert digits == sorted(digits)  # grouped by digit count …
        same = [i for i in sent if len(str(int(offsets[i]))) == digits[0]]
        assert same == sorted(same)  # … in their given order within one count
        args = [a for i in sent for a in ("GET", "u1", str(int(offsets[i])))]
        assert raw == b"".join(Connection().pack_command("BITFIELD", key, *args))


def test_spec_defaults_are_the_settings_registrys():
    """BloomSpec's defaults are CRAWLFLEET_BLOOM_*'s, memory slack included (it was 0.0 against the setting's 0.03);
    a spec stored without memory_slack keeps the sizing it was made with."""
    from messaging.settings import SETTINGS

    spec = BloomSpec(capacity=10)
    assert spec.memory_slack == SETTINGS["CRAWLFLEET_BLOOM_MEMORY_SLACK"].default == 0.03
    for field, name in (("error_rate", "ERROR_RATE"), ("groups", "GROUPS"), ("shards", "SHARDS"),
                        ("counting", "COUNTING"), ("growth", "GROWTH"), ("tightening", "TIGHTENING")):
        assert getattr(spec, field) == SETTINGS[f"CRAWLFLEET_BLOOM_{name}"].default, field
    assert BloomSpec.from_json('{"capacity": 10}').memory_slack == 0.0
    assert BloomSpec.from_json(spec.to_json()) == spec
