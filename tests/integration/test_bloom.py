"""The Bloom filter against a real Redis (and a real Redis Cluster): check-and-add, concurrency, counting
removal, growth, TTL, layout (frontier/bloom)."""

import json
import random
import threading

import numpy as np
import pytest
from redis.exceptions import InvalidResponse, ResponseError

from frontier.bloom import BloomFilter, BloomSpec, CountingBloomFilter, direct, open_filter, resp, sizing
from frontier.bloom.fingerprint import hash_batch, positions, url_fingerprint
from messaging import keys

pytestmark = pytest.mark.integration


def _urls(prefix, n):
    return [f"http://www.site{i % 97}.test/{prefix}/page-{i}.html?id={i}" for i in range(n)]


def test_check_and_add_reports_new_urls_once(cf):
    bloom = open_filter(cf.redis(), "global", BloomSpec(capacity=10_000, shards=4))
    urls = _urls("a", 300)
    batch = [*urls[:5], "HTTP://WWW.SITE0.TEST:80/a/page-0.html?id=0#top", urls[1]]
    assert bloom.add(batch) == [True] * 5 + [False, False]
    assert bloom.add(urls) == [False] * 5 + [True] * 295
    assert bloom.contains(urls[:3] + _urls("b", 3)) == [True, True, True, False, False, False]
    assert bloom.count() == 300


def test_cells_set_are_the_documented_ones(cf):
    """The Lua scripts and fingerprint.positions compute the same cells (one layer, one or more parts)."""
    redis = cf.redis()
    bloom = open_filter(redis, "cells", BloomSpec(capacity=40_000, shards=2))
    url = "http://example.test/cells"
    bloom.add([url])
    batch = hash_batch([url_fingerprint(url)])
    shard = int(batch.shards(2)[0])
    layer = json.loads(redis.hget(keys.bloom_shard("cells", shard), "layout"))[0]
    part, cells = positions(batch.h1[0], batch.h2[0], batch.shard_key[0], layer["sizes"], layer["k"], 2)
    key, size = layer["keys"][part], layer["sizes"][part]
    offsets = {group * size + cell for group, group_cells in enumerate(cells) for cell in group_cells}
    assert all(redis.getbit(key, offset) == 1 for offset in offsets)
    assert redis.bitcount(key) == len(offsets)


@pytest.mark.parametrize("chunk", [direct.CHUNK, 64])
def test_concurrent_workers_see_a_new_url_exactly_once(cf, monkeypatch, chunk):
    monkeypatch.setattr(direct, "CHUNK", chunk)  # 64: each batch of 100 is two pipelined chunks
    spec = BloomSpec(capacity=20_000, shards=8)
    open_filter(cf.redis(), "race", spec)
    urls = _urls("race", 1500)
    verdicts = {}

    def worker(seed):
        bloom = BloomFilter.open(cf.redis(), "race", spec)
        order = urls[:]
        random.Random(seed).shuffle(order)
        seen = []
        for start in range(0, len(order), 100):
            chunk = order[start:start + 100]
            seen.extend(zip(chunk, bloom.add(chunk), strict=True))
        verdicts[seed] = seen

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    news = {url: 0 for url in urls}
    for seen in verdicts.values():
        for url, new in seen:
            news[url] += new
    assert len(verdicts) == 4
    assert set(news.values()) == {1}


@pytest.mark.parametrize("order", ["fresh first", "stale first", "fresh between"])
def test_a_url_added_around_a_growth_is_new_to_exactly_one_worker(cf, monkeypatch, order):
    """Worker A still has the shard's one-layer layout cached when worker B grows it. "fresh between": B adds the
    URL after A set it in the old layer and before A, having seen the growth, sets it in the new one."""
    redis = cf.redis()
    spec = BloomSpec(capacity=1_000, shards=1)
    stale, fresh = open_filter(redis, "grow", spec), open_filter(redis, "grow", spec)
    assert stale.add(["http://example.test/warm-up"]) == [True]  # caches the layout
    assert fresh.grow(0, 1)
    url = "http://example.test/raced"
    if order == "fresh first":
        verdicts = fresh.add([url]) + stale.add([url])
    elif order == "stale first":
        verdicts = stale.add([url]) + fresh.add([url])
    else:
        seen = []
        renew = stale._direct.run

        def fresh_then_renew(mode, *args, **kwargs):
            if mode == "newest":
                seen.extend(fresh.add([url]))
            return renew(mode, *args, **kwargs)

        monkeypatch.setattr(stale._direct, "run", fresh_then_renew)
        verdicts = stale.add([url]) + seen
    assert sorted(verdicts) == [False, True]
    assert stale.add([url]) == fresh.add([url]) == [False]


def test_a_url_repeated_across_the_chunks_of_a_batch_is_new_once(cf, monkeypatch):
    monkeypatch.setattr(direct, "CHUNK", 50)
    bloom = open_filter(cf.redis(), "chunks", BloomSpec(capacity=5_000, shards=4))
    urls = _urls("c", 300)
    variants = [url.replace("http://www.site", "HTTP://WWW.SITE").replace(".test/", ".TEST:80/") for url in urls]
    batch = [(url, url) for url in urls + urls[::3]] + list(zip(variants[:20], urls[:20], strict=True))
    random.Random(1).shuffle(batch)
    first = {}
    for i, (_, url) in enumerate(batch):
        first.setdefault(url, i)
    assert bloom.add([sent for sent, _ in batch]) == [first[url] == i for i, (_, url) in enumerate(batch)]
    assert bloom.count() == 300  # the counts written without waiting for a reply are in


def test_raw_bitfield_replies_keep_errors_and_the_connection_in_step(cf):
    redis = cf.redis()
    redis.rpush("not-a-string", "x")
    window = resp.Window(redis)
    offsets = [np.array([3, 70, 1_000_000], dtype=np.uint64), np.array([1], dtype=np.uint64),
               np.array([3, 5], dtype=np.uint64)]
    keys_ = ["bits", "not-a-string", "bits"]
    window.send(list(zip(keys_, resp.pack_many(keys_, b"SET", offsets, b"1"), strict=True)), [3, 1, 2])
    redis.set("plain", "after")
    window.send([("plain", resp.command(b"GET", "plain")), ("plain", resp.command(b"STRLEN", "plain"))])
    first, error, last, plain, length = window.collect()
    assert first.tolist() == [0, 0, 0] and last.tolist() == [1, 0]
    assert isinstance(error, ResponseError) and "WRONGTYPE" in str(error)
    assert (plain, length) == (b"after", 5)  # read ahead with the bit replies, then handed to redis-py's reader
    assert redis.ping() and redis.getbit("bits", 1_000_000) == 1  # the pooled connection is still in step


def test_the_private_channel_is_found_on_redis_py_and_its_absence_falls_back(cf, monkeypatch):
    """frontier.bloom.resp's one shim over redis-py's private socket and parser: present on the pinned redis-py (the
    raw reader is used), and where a redis-py version lacks them the replies are read through the public path."""
    redis = cf.redis()
    redis.ping()
    connection = redis.connection_pool.get_connection()
    try:
        sock, reader = resp.raw_channel(connection)
        assert sock.fileno() >= 0 and not reader.has_data()
    finally:
        redis.connection_pool.release(connection)
    monkeypatch.setattr(resp, "_internals", lambda connection: (None, None))
    window = resp.Window(redis)
    window.send([("bits2", resp.pack_bitfield("bits2", b"SET", np.array([4, 9], dtype=np.uint64), b"1"))], [2])
    window.send([("bits2", resp.pack_bitfield("bits2", b"GET", np.array([4, 5], dtype=np.uint64)))], [2])
    assert window.collect() == [[0, 0], [1, 0]]  # redis-py's lists of ints, not the raw reader's arrays
    assert redis.ping()


def test_raw_bitfield_replies_are_checked_byte_for_byte(cf):
    redis = cf.redis()
    window = resp.Window(redis)
    window.send([("bits", resp.pack_bitfield("bits", b"SET", np.array([1, 2], dtype=np.uint64), b"1"))], [3])
    with pytest.raises(InvalidResponse):  # two operations answered, three announced
        window.collect()
    assert redis.ping()  # the connection was dropped, the pool hands out a fresh one


def test_counting_filter_removes_and_saturation_never_decrements(cf):
    redis = cf.redis()
    bloom = open_filter(redis, "counting", BloomSpec(capacity=5_000, shards=2, counting=True))
    assert isinstance(bloom, CountingBloomFilter)
    urls = _urls("c", 200)
    assert all(bloom.add(urls))
    assert bloom.remove(urls[:50] + urls[:1] + _urls("never", 1)) == [True] * 50 + [False, False]
    assert bloom.contains(urls[:50]) == [False] * 50  # no false positive left by the removal here
    assert all(bloom.contains(urls[50:]))  # and no false negative for the others
    assert bloom.count() == 150
    assert bloom.add(urls[:2]) == [True, True]  # removed URLs can be added again

    # A saturated counter stays at 15 when its URL is removed: a false positive may persist, never a false negative.
    url = urls[100]
    batch = hash_batch([url_fingerprint(url)])
    shard = int(batch.shards(2)[0])
    layer = json.loads(redis.hget(keys.bloom_shard("counting", shard), "layout"))[0]
    part, cells = positions(batch.h1[0], batch.h2[0], batch.shard_key[0], layer["sizes"], layer["k"], 2)
    key, cell = layer["keys"][part], cells[0][0]  # group 0's first counter
    redis.execute_command("BITFIELD", key, "SET", "u4", cell * 4, 15)
    assert bloom.remove([url]) == [True]
    assert redis.execute_command("BITFIELD", key, "GET", "u4", cell * 4) == [15]


def test_bit_filter_cannot_remove(cf):
    bloom = CountingBloomFilter.open(cf.redis(), "plain", BloomSpec(capacity=100, shards=1))
    with pytest.raises(ValueError):
        bloom.remove(["http://example.test/"])


def test_growth_adds_layers_and_keeps_the_rate_bounded(cf):
    spec = BloomSpec(capacity=2_000, error_rate=0.001, shards=2)
    bloom = open_filter(cf.redis(), "grow", spec)
    inserted = _urls("g", 20_000)
    new = sum(sum(bloom.add(inserted[start:start + 1000])) for start in range(0, len(inserted), 1000))
    assert new >= 20_000 * (1 - sizing.compound_rate_bound(0.001, 0.5))  # false positives while inserting
    shards = bloom.shards()
    assert all(len(info.layers) >= 4 for info in shards)
    for info in shards:  # a full layer is not overfilled (one step of 32 at most)
        for layer, count in zip(info.layers[:-1], info.counts, strict=False):
            assert layer["limit"] <= count <= layer["limit"] + 32
    assert all(bloom.contains(inserted))  # no false negative across layers
    false_positives = sum(bloom.contains(_urls("other", 20_000)))
    bound = sizing.compound_rate_bound(0.001, 0.5) * 20_000
    assert false_positives <= bound * 1.6  # ~40 expected at most; Poisson noise
    assert bloom.expected_false_positive_rate() <= sizing.compound_rate_bound(0.001, 0.5)


@pytest.mark.parametrize("counting", [False, True])
def test_a_filter_grows_when_a_url_needs_room_not_when_it_is_just_full(cf, counting):
    """One shard (no headroom): exactly its capacity fits in layer 0, the next new URL opens layer 1."""
    bloom = open_filter(cf.redis(), "exact", BloomSpec(capacity=500, shards=1, counting=counting))
    urls = _urls("exact", 501)
    verdicts = bloom.add(urls[:250]) + bloom.add(urls[250:500])
    assert [len(info.layers) for info in bloom.shards()] == [1]
    assert bloom.count() == sum(verdicts)
    assert bloom.add(urls[:500]) == [False] * 500  # duplicates need no room
    assert [len(info.layers) for info in bloom.shards()] == [1]
    assert bloom.add(urls[500:]) == [True]
    assert [info.counts for info in bloom.shards()] == [[sum(verdicts), 1]]


def test_one_batch_larger_than_many_layers(cf):
    bloom = open_filter(cf.redis(), "burst", BloomSpec(capacity=64, shards=1, error_rate=0.01))
    urls = _urls("burst", 3000)
    assert sum(bloom.add(urls)) >= 3000 * (1 - sizing.compound_rate_bound(0.01, 0.5))
    assert len(bloom.shards()[0].layers) >= 6


def test_arrays_are_preallocated_to_exact_size_classes(cf):
    redis = cf.redis()
    bloom = open_filter(redis, "alloc", BloomSpec(capacity=200_000, shards=4))
    plan = bloom.spec.layer(0)
    parts = [key for key in bloom.key_names() if ":l0:" in key]
    assert len(parts) == 4 * len(plan.part_bytes)
    for key in parts:
        length = redis.strlen(key)
        assert length in plan.part_bytes
        assert redis.memory_usage(key) - sizing.allocation(length) < 120  # key, object and dict entry only
    before = {key: redis.memory_usage(key) for key in parts}
    bloom.add(_urls("fill", 5000))
    assert {key: redis.memory_usage(key) for key in parts} == before  # no growth of the strings


def test_per_crawl_filter_expires_and_slides(cf):
    redis = cf.redis()
    clock = {"now": 1_000_000}
    bloom = open_filter(redis, "crawl:c1", BloomSpec(capacity=1_000, shards=2), ttl=600,
                        now_ms=lambda: clock["now"])
    every = bloom.key_names()
    assert all(0 < redis.pttl(key) <= 600_000 for key in every)
    for key in every:
        redis.pexpire(key, 50_000)
    clock["now"] += 10_000  # before the refresh point (ttl/8 = 75 s): the TTL is left alone
    bloom.add(_urls("t", 10))
    assert all(redis.pttl(key) <= 50_000 for key in every)
    clock["now"] += 70_000  # past it: every key of the touched shards slides back to the full TTL
    bloom.add(_urls("t2", 200))
    assert all(redis.pttl(key) > 50_000 for key in every)

    bloom.expire(1)  # the crawl ended: gone within a second
    assert all(0 < redis.pttl(key) <= 1000 for key in every)
    redis.delete(*every)  # as when that second is over (Redis's part: not waited for)
    assert bloom.add(_urls("after", 3)) == [True] * 3  # a filter used after expiry starts afresh


def test_stored_spec_wins_over_a_different_one(cf):
    redis = cf.redis()
    first = open_filter(redis, "spec", BloomSpec(capacity=1000, shards=3))
    second = open_filter(redis, "spec", BloomSpec(capacity=9999, shards=5))
    assert second.spec == first.spec
    assert first.add(["http://example.test/x"]) == [True]
    assert second.add(["http://example.test/x"]) == [False]
    first.delete()
    assert not redis.keys(keys.bloom_pattern("spec"))


@pytest.mark.cluster
def test_cluster_spreads_shards_and_stays_atomic(cf_cluster):
    redis = cf_cluster.redis()
    spec = BloomSpec(capacity=20_000, shards=8)
    bloom = open_filter(redis, "global", spec)
    urls = _urls("cl", 2000)
    assert all(bloom.add(urls))
    assert not any(bloom.add(urls[:500]))
    assert all(bloom.contains(urls))
    nodes = {redis.get_node_from_key(key).name for key in bloom.key_names()}
    assert len(nodes) >= 2

    verdicts = []

    def worker():
        other = BloomFilter.open(cf_cluster.redis(), "global", spec)
        verdicts.append(other.add(_urls("race", 400)))
        other.count()  # returns once this worker's counts, written without waiting, are in

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert [sum(column) for column in zip(*verdicts, strict=True)] == [1] * 400
    assert bloom.count() == 2000 + 400  # counts written with CLIENT REPLY SKIP reach every node
