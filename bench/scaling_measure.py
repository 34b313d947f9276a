"""The measurement behind ``bench.scaling --measure``: what the scaling model needs that ``bench.crawl`` does not print.

It reuses ``bench.crawl``'s bench (:class:`bench.crawl_sides.CrawlBench`: the services, the nginx-served site, the
CPU sampler) in its own run directory and crawls the ``fleet_1`` side twice:

1. a **clean** run: Redis ``INFO cpu`` (``used_cpu_sys + used_cpu_user``), ``INFO stats``
   (``total_commands_processed``) and ``INFO commandstats``, and MongoDB ``serverStatus`` (``opcounters``,
   ``network.numRequests``) are sampled twice a second by a thread and read at the side's window (first request to
   last item stored) the way the CPU sampler's figures are (:func:`bench.crawl_cpu.cpu_between`); the CPU of each
   process group comes from the bench's own sampler. Figures per page, per item and per dispatched task.
2. an **attributed** run with Redis's slow log catching every command (``slowlog-log-slower-than 0``): each
   top-level command's execution time and first key say where its work would land on a Redis Cluster (the key's
   slot). Commands run inside a Lua script are logged too, with the client ``?:0``; they are left out, their time
   being part of the script's own entry. The slow log costs Redis CPU itself, which is why the per-page CPU comes
   from the clean run and only the *shares* from this one.

How Redis's CPU is split by slot (:func:`redis_shares`): the execution time of the top-level commands is a fraction
``f`` of Redis's CPU (the clean run's); the rest (reading, parsing, replying, the event loop) is spread over the
commands in proportion to their number. So a key class's share is ``f · time_share + (1 − f) · command_share``.
Keys are classed by what decides their slot: the ``seeds`` slot (``seeds`` and every ``{seeds}`` key), the
``workers`` slot, a domain's hash tag, a crawl's keys (its hash and its Bloom filter), a job's own keys, keyless
commands (``TIME``, ``SCAN``: any node), and ``other`` (single keys at a fixed slot: stats counters, registries).
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redis.crc import key_slot

from bench.crawl_cpu import Sample, cpu_between
from messaging import keys
from messaging.clients import as_text

SEEDS_SLOT = key_slot(keys.SEEDS.encode())
WORKERS_SLOT = key_slot(keys.WORKERS.encode())
SCRIPT_CLIENT = "?:0"  # the client a Lua script's own commands are logged with
SCRIPT_COMMANDS = {"EVALSHA", "EVAL", "EVALSHA_RO", "EVAL_RO", "FCALL", "FCALL_RO"}
OWN_COMMANDS = {"INFO", "SLOWLOG", "CONFIG", "COMMAND"}  # what this measurement sends, not the fleet
SPREAD_CLASSES = ("domain", "crawl", "job", "keyless")  # slots that many domains, crawls or jobs spread out


@dataclass(frozen=True)
class LoggedCommand:
    """One top-level command of the slow log: its name, first key (or None) and execution time (µs)."""

    name: str
    key: str | None
    micros: int


def first_key(args: list[bytes], first_key_pos: Mapping[str, int]) -> str | None:
    """The first key of a logged command, from ``COMMAND``'s key positions (scripts: after ``numkeys``)."""
    name = args[0].decode(errors="replace").lower()
    if name.upper() in SCRIPT_COMMANDS:
        if len(args) > 3 and args[2].isdigit() and int(args[2]) > 0:
            return args[3].decode(errors="replace")
        return None
    position = first_key_pos.get(name, 0)
    if position <= 0 or position >= len(args):
        return None
    return args[position].decode(errors="replace")


def key_class(key: str | None, domains: Iterable[str], jobs_prefix: str, crawl_prefix: str) -> str:
    """Where a key's slot comes from (see the module docstring); ``None`` is a keyless command."""
    if key is None:
        return "keyless"
    start = key.find("{")
    end = key.find("}", start + 1) if start >= 0 else -1
    tag = key[start + 1:end] if start >= 0 and end > start + 1 else None
    if tag is not None and tag in set(domains):
        return "domain"
    slot = key_slot(key.encode())
    if slot == SEEDS_SLOT:
        return "seeds"
    if slot == WORKERS_SLOT:
        return "workers"
    if key.startswith(("crawl:", "bloom:")) or crawl_prefix in key:
        return "crawl"
    if jobs_prefix in key:
        return "job"
    return "other"


def redis_shares(commands: Iterable[LoggedCommand], exec_fraction: float, domains: Iterable[str],
                 jobs_prefix: str, crawl_prefix: str) -> dict[str, dict[str, Any]]:
    """Redis's CPU split by where it lands (see the module docstring), as a mapping of tables:

    - ``class``: share by key class; ``time`` and ``commands``: the two halves it mixes (execution time, count);
    - ``fixed``: one key per fixed slot (``seeds``, ``workers``, each ``other`` slot) with that slot's share: what
      the model places on the shard owning the slot, whatever the number of shards;
    - ``names``: top-level commands per class, by name (counts)."""
    domains = tuple(domains)
    micros: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    names: dict[str, Counter[str]] = {}
    slot_micros: Counter[int] = Counter()
    slot_counts: Counter[int] = Counter()
    slot_names: dict[int, str] = {SEEDS_SLOT: keys.SEEDS, WORKERS_SLOT: keys.WORKERS}
    for command in commands:
        cls = key_class(command.key, domains, jobs_prefix, crawl_prefix)
        micros[cls] += command.micros
        counts[cls] += 1
        names.setdefault(cls, Counter())[command.name] += 1
        if cls in ("seeds", "workers", "other") and command.key is not None:
            slot = key_slot(command.key.encode())
            slot_micros[slot] += command.micros
            slot_counts[slot] += 1
            slot_names.setdefault(slot, command.key)
    total_micros = sum(micros.values()) or 1
    total_count = sum(counts.values()) or 1
    f = min(max(exec_fraction, 0.0), 1.0)

    def share(m: float, n: float) -> float:
        return f * m / total_micros + (1 - f) * n / total_count

    order = sorted(slot_counts, key=lambda s: -share(slot_micros[s], slot_counts[s]))
    return {
        "class": {cls: round(share(micros[cls], counts[cls]), 4) for cls in sorted(counts)},
        "time": {cls: round(micros[cls] / total_micros, 4) for cls in sorted(counts)},
        "commands": {cls: round(counts[cls] / total_count, 4) for cls in sorted(counts)},
        "fixed": {slot_names[slot]: round(share(slot_micros[slot], slot_counts[slot]), 4) for slot in order},
        "names": {cls: dict(names[cls].most_common(6)) for cls in sorted(names)},
    }


class InfoSampler:
    """A thread reading Redis ``INFO`` and MongoDB ``serverStatus`` counters every ``interval`` seconds."""

    def __init__(self, redis: Any, mongo: Any, interval: float = 0.5, clock: Callable[[], float] = time.time) -> None:
        self.redis = redis
        self.mongo = mongo
        self.interval = interval
        self.clock = clock
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="info-sampler", daemon=True)

    def read(self) -> dict[str, float]:
        values: dict[str, float] = {}
        cpu = self.redis.info("cpu")
        values["redis_cpu"] = float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])
        values["redis_commands"] = float(self.redis.info("stats")["total_commands_processed"])
        for name, stat in self.redis.info("commandstats").items():
            values[f"cmd:{name.removeprefix('cmdstat_')}"] = float(stat["calls"])
        status = self.mongo.admin.command("serverStatus")
        ops = status.get("opcounters", {})
        values["mongo_writes"] = float(sum(ops.get(op, 0) for op in ("insert", "update", "delete")))
        values["mongo_requests"] = float(status.get("network", {}).get("numRequests", 0))
        return values

    def sample(self) -> None:
        self.samples.append((self.clock(), self.read()))

    def take(self) -> list[Sample]:
        self.sample()
        samples, self.samples = self.samples, []
        return samples

    def start(self) -> InfoSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sample()
            except Exception:  # a missed sample is interpolated over; the bench must not die of it
                continue


def read_slowlog(redis: Any, since: float, until: float) -> list[LoggedCommand]:
    """The top-level commands the slow log caught in ``[since, until]`` (its timestamps are whole seconds)."""
    positions = {as_text(name).lower(): int(info.get("first_key_pos", 0)) for name, info in redis.command().items()}
    entries = redis.execute_command("SLOWLOG", "GET", -1)
    commands = []
    for entry in entries:
        _, stamp, micros, args, client = entry[:5]
        if not args or not math.floor(since) <= int(stamp) <= math.ceil(until):
            continue
        if as_text(client) == SCRIPT_CLIENT:
            continue
        name = args[0].decode(errors="replace").upper()
        if name in OWN_COMMANDS:
            continue
        commands.append(LoggedCommand(name, first_key(args, positions), int(micros)))
    return commands


def measure(run_dir: Path, pages: int, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Crawl ``fleet_1`` twice over ``pages`` pages (clean, then attributed) and return the model's inputs."""
    from bench.crawl_sides import CrawlBench
    from messaging import clients
    from messaging.settings import load

    articles = max(1, pages // 3)
    timeout = 120 + 0.2 * pages * 1.1
    with CrawlBench(run_dir, articles, timeout, echo) as bench:
        settings = load(bench.env)
        redis = clients.redis_client(settings)
        mongo = clients.mongo_client(settings)
        domains = [site.name for site in bench.site.sites]
        sampler = InfoSampler(redis, mongo).start()
        try:
            sampler.take()
            clean = bench.run_side("fleet_1", 1)
            counters = cpu_between(sampler.take(), clean.started, clean.ended)
            echo(f"clean run: {clean.pages} pages, {clean.items} items, {clean.seconds:.1f}s, "
                 f"{clean.pages_per_min:,.0f} pages/min")
            if clean.problems:
                raise RuntimeError("the clean run failed its check: " + "; ".join(clean.problems))
            old = {as_text(key): as_text(value) for key, value in redis.config_get("slowlog-*").items()}
            redis.config_set("slowlog-max-len", 5_000_000)
            redis.config_set("slowlog-log-slower-than", 0)
            redis.execute_command("SLOWLOG", "RESET")
            try:
                attributed = bench.run_side("fleet_1", 2)
                counters2 = cpu_between(sampler.take(), attributed.started, attributed.ended)
                logged = read_slowlog(redis, attributed.started, attributed.ended)
            finally:
                redis.config_set("slowlog-log-slower-than", old.get("slowlog-log-slower-than", 10000))
                redis.execute_command("SLOWLOG", "RESET")
                redis.config_set("slowlog-max-len", old.get("slowlog-max-len", 128))
            echo(f"attributed run: {attributed.pages} pages, {attributed.seconds:.1f}s, "
                 f"{attributed.pages_per_min:,.0f} pages/min, {len(logged):,} top-level Redis commands logged")
        finally:
            sampler.stop()
            mongo.close()
    return inputs_from(clean, counters, attributed, counters2, logged, domains)


def inputs_from(clean: Any, counters: Mapping[str, float], attributed: Any, counters2: Mapping[str, float],
                logged: list[LoggedCommand], domains: list[str]) -> dict[str, Any]:
    """The model's inputs (JSON-able) from the two runs' figures."""
    pages, items = max(clean.pages, 1), max(clean.items, 1)
    own = sum(counters.get(f"cmd:{name.lower()}", 0.0) for name in ("info", "slowlog|get", "config|set"))
    commands = counters.get("redis_commands", 0.0) - own
    by_name = {name.removeprefix("cmd:"): value for name, value in counters.items()
               if name.startswith("cmd:") and name.removeprefix("cmd:") not in ("info",)}
    top = dict(sorted(by_name.items(), key=lambda item: -item[1])[:12])
    redis_cpu = counters.get("redis_cpu", 0.0) / pages
    exec_per_page = sum(command.micros for command in logged) / 1e6 / max(attributed.pages, 1)
    exec_fraction = exec_per_page / redis_cpu if redis_cpu else 1.0
    jobs_prefix = "fleet_1-"
    split = redis_shares(logged, exec_fraction, domains, jobs_prefix, "r2-fleet_1-")
    logged_pages = max(attributed.pages, 1)
    cpu = clean.cpu
    known = {"workers", "redis", "mongodb", "master"}
    return {
        "source": f"python -m bench.scaling --measure --pages {clean.pages}",
        "measured_at": time.strftime("%Y-%m-%d"),
        "pages": clean.pages,
        "items": clean.items,
        "pages_per_min_1_worker_measure_run": round(clean.pages_per_min, 1),
        "items_per_page": round(items / pages, 4),
        "worker_cpu_s_per_page_measure_run": round(cpu.get("workers", 0.0) / pages, 6),
        "redis_cpu_s_per_page": round(redis_cpu, 7),
        "redis_cpu_s_per_page_proc": round(cpu.get("redis", 0.0) / pages, 7),
        "redis_cpu_s_per_page_with_slowlog": round(counters2.get("redis_cpu", 0.0) / max(attributed.pages, 1), 7),
        "redis_commands_per_page": round(commands / pages, 2),
        "redis_commands_per_item": round(commands / items, 2),
        "redis_top_level_commands_per_page": round(len(logged) / max(attributed.pages, 1), 2),
        "redis_scripts_per_page": round(by_name.get("evalsha", 0.0) / pages, 2),
        "redis_commands_by_name_per_page": {name: round(value / pages, 3) for name, value in top.items()},
        "redis_exec_fraction": round(min(exec_fraction, 1.0), 3),
        "redis_class_shares": split["class"],
        "redis_class_time_shares": split["time"],
        "redis_class_command_shares": split["commands"],
        "redis_top_level_per_page_by_class": {cls: {name: round(n / logged_pages, 3) for name, n in by.items()}
                                              for cls, by in split["names"].items()},
        "redis_fixed_slot_shares": split["fixed"],
        "mongo_cpu_s_per_item": round(cpu.get("mongodb", 0.0) / items, 6),
        "mongo_writes_per_item": round(counters.get("mongo_writes", 0.0) / items, 4),
        "mongo_requests_per_item": round(counters.get("mongo_requests", 0.0) / items, 4),
        "master_cpu_s_per_task": round(cpu.get("master", 0.0) / pages, 7),
        "other_cpu_s_per_page": round(sum(v for k, v in cpu.items() if k not in known) / pages, 6),
    }
