"""The scaling model of ``bench.scaling``: pages/min against the number of workers, beyond one host.

Pure arithmetic over measured per-page costs (``docs/scaling.md`` explains it; :mod:`bench.scaling_measure` and
``bench.crawl`` measure the inputs). Every worker runs on a host of its own, so its CPU per page is its own and N
workers fetch ``N · r`` pages a minute, ``r = 60 · u / w`` (``w`` CPU seconds a page, ``u`` the share of a core a
worker with a core to itself keeps busy). The parts every worker shares each have a ceiling of their own:

- **Redis**, one core per shard (commands run on one thread). Each page costs ``R`` CPU seconds of Redis, spread by
  key slot: keys hash-tagged by domain (queues, leases, throttles, robots.txt), by crawl (its hash, its Bloom
  filter) or by job spread over the shards when there are many domains, crawls and jobs; keyless commands go to
  any node; but a key at a fixed slot — ``seeds`` and every ``{seeds}`` key, ``workers`` and every ``{workers}``
  key, a stats counter — is one slot on one shard whatever the number of shards. With ``s_k`` the share of ``R`` on
  fixed slot ``k`` and ``spread = 1 − Σ s_k``, shard ``j`` of ``S`` carries ``R · (Σ_{k on j} s_k + spread / S)``
  a page, and Redis's bound is ``60 · cores / (R · max_j load_j)`` pages a minute. Slots go to shards as
  ``redis-cli --cluster create`` deals them out (:func:`cluster_slot_ranges`).
- **MongoDB**: ``m`` CPU seconds an item, ``i`` items a page, on ``M`` nodes (``60 · M / (m · i)``). In production it
  is a sharded cluster sized on its own; the figure measured here is SecantusDB's, not mongod's.
- **The master**: one leader dispatches every task (a page is one task), at most ``d`` a second as
  ``bench.dispatch`` measures it (its Redis work is in ``R``); a standby master adds nothing but failover.

``pages/min(N) = min(N · r, Redis, MongoDB, master)``; the binding part is the one that gives the minimum, and a
part *saturates* at the first N whose worker rate reaches its ceiling.

The measured points (``bench.crawl``) ran every process on one host of C cores, so the model checks them with one
more ceiling, the host's: ``C · 60 / (w + R + m · i + master + other)`` — every process's CPU per page packed
perfectly onto the cores, which a shared host never quite does (:func:`single_host`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from redis.crc import key_slot

CLUSTER_SLOTS = 16384
PARTS = ("workers", "redis", "mongodb", "master")


@dataclass(frozen=True)
class Inputs:
    """What the model takes; defaults are the figures measured on the 2-core development machine (see
    ``docs/scaling.md``): ``bench.crawl --pages 20000`` for CPU per page and the measured points,
    ``bench.scaling --measure`` for the Redis split and the per-item/per-task figures, ``bench.dispatch``."""

    # bench.crawl --pages 20000, fleet_1 (a worker with a core to itself): 5.34 ms CPU a page, 10,165 pages/min
    worker_cpu_s_per_page: float = 0.00534
    worker_core_share: float = 0.905  # 10,165 / 60 x 0.00534
    # bench.scaling --measure (3,299 pages, 1 worker): Redis CPU a page and its share on each fixed slot (named by
    # one of its keys; slots under 0.05% left to the spread part); the rest spreads over the shards
    redis_cpu_s_per_page: float = 0.0001305
    redis_fixed_slot_shares: Mapping[str, float] = field(default_factory=lambda: {
        "seeds": 0.1678, "workers": 0.0148, "stats:crawler:universal:200:60": 0.004,
        "stats:master:dispatched:60": 0.0019, "stats:crawler:universal:200:900": 0.0017,
        "stats:master:dispatched:300": 0.0017, "stats:crawler:universal:200:3600": 0.0015,
        "stats:crawler:universal:200:300": 0.0015, "stats:crawler:universal:200:step3600": 0.0015,
        "stats:crawler:universal:200:86400": 0.0014, "stats:master:dispatched:step3600": 0.0011,
        "stats:master:dispatched:3600": 0.001, "stats:master:dispatched:900": 0.001,
        "stats:master:dispatched:86400": 0.0009, "stats:crawler:universal:200:lifetime": 0.0009,
        "stats:master:dispatched:lifetime": 0.0006})
    redis_cores_per_shard: float = 1.0
    items_per_page: float = 0.9094
    mongo_cpu_s_per_item: float = 0.000545  # SecantusDB, one process
    mongo_nodes: float = 1.0
    master_dispatch_per_s: float = 17301.0  # bench.dispatch
    master_cpu_s_per_task: float = 0.0000637
    other_cpu_s_per_page: float = 0.000222  # monitors, Kafka, ZooKeeper, nginx: only in the single-host check
    host_cores: int = 2
    # the measured points (bench.crawl --pages 20000): workers -> pages/min, and CPU seconds a page of every process
    # there (workers, Redis and MongoDB from its table; master and the rest as bench.scaling --measure found them)
    measured_pages_per_min: Mapping[int, float] = field(default_factory=lambda: {1: 10165.0, 2: 15440.0})
    measured_cpu_s_per_page: Mapping[int, float] = field(default_factory=lambda: {1: 0.00628, 2: 0.00590})

    def with_values(self, values: Mapping[str, Any]) -> Inputs:
        """A copy with the known fields of ``values`` (JSON: keys of mappings may be strings) replaced."""
        known = {f.name for f in fields(self)}
        changes: dict[str, Any] = {}
        for name, value in values.items():
            if name not in known or value is None:
                continue
            if name in ("measured_pages_per_min", "measured_cpu_s_per_page"):
                value = {int(k): float(v) for k, v in value.items()}
            elif name == "redis_fixed_slot_shares":
                value = {str(k): float(v) for k, v in value.items()}
            elif name == "host_cores":
                value = int(value)
            else:
                value = float(value)
            changes[name] = value
        return replace(self, **changes)


@dataclass(frozen=True)
class Point:
    workers: int
    shards: int
    pages_per_min: float
    binding: str
    bounds: dict[str, float]


def cluster_slot_ranges(shards: int) -> list[tuple[int, int]]:
    """The slot ranges of ``shards`` masters as ``redis-cli --cluster create`` assigns them (its rounding)."""
    if shards < 1:
        raise ValueError("a cluster has at least one shard")
    per_node = CLUSTER_SLOTS / shards
    ranges = []
    first, cursor = 0, 0.0
    for index in range(shards):
        last = round(cursor + per_node - 1)
        if last > CLUSTER_SLOTS - 1 or index == shards - 1:
            last = CLUSTER_SLOTS - 1
        last = max(last, first)
        ranges.append((first, last))
        first = last + 1
        cursor += per_node
    return ranges


def shard_of(slot: int, ranges: list[tuple[int, int]]) -> int:
    for index, (first, last) in enumerate(ranges):
        if first <= slot <= last:
            return index
    raise ValueError(f"slot {slot} outside the cluster's ranges")


def shard_loads(fixed_shares: Mapping[str, float], shards: int) -> list[float]:
    """Share of a page's Redis CPU that each shard carries: its fixed slots plus an even part of the rest."""
    total_fixed = sum(fixed_shares.values())
    if total_fixed > 1.0 + 1e-9 or any(share < 0 for share in fixed_shares.values()):
        raise ValueError(f"fixed-slot shares must be >= 0 and add up to at most 1: {dict(fixed_shares)}")
    spread = max(0.0, 1.0 - total_fixed)
    ranges = cluster_slot_ranges(shards)
    loads = [spread / shards] * shards
    for key, share in fixed_shares.items():
        loads[shard_of(key_slot(key.encode()), ranges)] += share
    return loads


def worker_rate(inputs: Inputs) -> float:
    """Pages a minute one worker fetches on a host of its own."""
    return 60.0 * inputs.worker_core_share / inputs.worker_cpu_s_per_page


def redis_bound(inputs: Inputs, shards: int) -> float:
    """Pages a minute at which the busiest shard of ``shards`` (1: a single Redis) runs out of its core."""
    if inputs.redis_cpu_s_per_page <= 0:
        return math.inf
    busiest = max(shard_loads(inputs.redis_fixed_slot_shares, shards))
    return 60.0 * inputs.redis_cores_per_shard / (inputs.redis_cpu_s_per_page * busiest)


def mongo_bound(inputs: Inputs) -> float:
    cost = inputs.mongo_cpu_s_per_item * inputs.items_per_page
    return math.inf if cost <= 0 else 60.0 * inputs.mongo_nodes / cost


def master_bound(inputs: Inputs) -> float:
    """One leader: the dispatch rate ``bench.dispatch`` measures at saturation. (The master's CPU per task in a
    crawl, ``master_cpu_s_per_task``, is mostly its fixed per-second loop at a low rate: it only enters the
    single-host check.)"""
    return 60.0 * inputs.master_dispatch_per_s


def shared_bounds(inputs: Inputs, shards: int, parts: Iterable[str] = PARTS) -> dict[str, float]:
    bounds = {"redis": redis_bound(inputs, shards), "mongodb": mongo_bound(inputs), "master": master_bound(inputs)}
    return {part: value for part, value in bounds.items() if part in parts}


def predict(inputs: Inputs, workers: int, shards: int, parts: Iterable[str] = PARTS) -> Point:
    """pages/min with ``workers`` workers (each on its own host) and a Redis of ``shards`` shards; ``parts``
    leaves some shared parts out (e.g. MongoDB, when it is sized separately)."""
    parts = tuple(parts)
    bounds = {"workers": workers * worker_rate(inputs), **shared_bounds(inputs, shards, parts)}
    binding = min(bounds, key=lambda part: bounds[part])
    return Point(workers, shards, bounds[binding], binding, bounds)


def curve(inputs: Inputs, shards: int, max_workers: int, parts: Iterable[str] = PARTS) -> list[Point]:
    return [predict(inputs, n, shards, parts) for n in range(1, max_workers + 1)]


def saturation(inputs: Inputs, shards: int, parts: Iterable[str] = PARTS) -> dict[str, int | None]:
    """For each shared part, the first number of workers whose rate reaches its ceiling (None: never)."""
    rate = worker_rate(inputs)
    return {part: (None if math.isinf(bound) else max(1, math.ceil(bound / rate)))
            for part, bound in shared_bounds(inputs, shards, parts).items()}


def first_saturation(inputs: Inputs, shards: int, parts: Iterable[str] = PARTS) -> tuple[str, int] | None:
    """The shared part that saturates first and at how many workers (ties: the lower ceiling)."""
    points = {part: n for part, n in saturation(inputs, shards, parts).items() if n is not None}
    if not points:
        return None
    bounds = shared_bounds(inputs, shards, parts)
    part = min(points, key=lambda p: (points[p], bounds[p]))
    return part, points[part]


def host_cpu_s_per_page(inputs: Inputs, workers: int) -> float:
    """CPU seconds a page of every process on one host (the measured total at that point, when given)."""
    measured = inputs.measured_cpu_s_per_page.get(workers)
    if measured:
        return measured
    return (inputs.worker_cpu_s_per_page + inputs.redis_cpu_s_per_page
            + inputs.mongo_cpu_s_per_item * inputs.items_per_page + inputs.master_cpu_s_per_task
            + inputs.other_cpu_s_per_page)


def single_host(inputs: Inputs, workers: int) -> Point:
    """The model on one host of ``host_cores`` cores where everything runs (the measured points): the multi-host
    prediction (one Redis) with the host's own ceiling added, ``cores · 60 / (CPU s a page of every process)``."""
    point = predict(inputs, workers, 1)
    bounds = {**point.bounds, "host": inputs.host_cores * 60.0 / host_cpu_s_per_page(inputs, workers)}
    binding = min(bounds, key=lambda part: bounds[part])
    return Point(workers, 1, bounds[binding], binding, bounds)


def from_crawl_summary(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Model inputs from ``bench.crawl --json``'s last line: the 1- and 2-worker points, the workers' CPU per page
    (1 worker: a core of its own), the Redis and MongoDB CPU, the rest."""
    pages = summary.get("pages_per_min", {})
    cpu = summary.get("cpu_s_per_1000_pages", {})
    values: dict[str, Any] = {}
    measured = {n: pages[f"fleet_{n}"] for n in (1, 2) if pages.get(f"fleet_{n}")}
    if measured:
        values["measured_pages_per_min"] = measured
        values["measured_cpu_s_per_page"] = {n: sum(cpu.get(f"fleet_{n}", {}).values()) / 1000 for n in measured
                                             if cpu.get(f"fleet_{n}")}
    one = cpu.get("fleet_1", {})
    if one.get("workers"):
        values["worker_cpu_s_per_page"] = one["workers"] / 1000
        if pages.get("fleet_1"):
            values["worker_core_share"] = min(1.0, pages["fleet_1"] / 60 * one["workers"] / 1000)
    if one.get("redis"):
        values["redis_cpu_s_per_page"] = one["redis"] / 1000
    others = {k: v for k, v in one.items() if k not in ("workers", "redis", "mongodb", "master")}
    if others:
        values["other_cpu_s_per_page"] = sum(others.values()) / 1000
    return values
