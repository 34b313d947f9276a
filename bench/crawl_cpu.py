"""Where the CPU went during a crawl: CPU seconds of each process (tree) from ``/proc/<pid>/stat``.

A *group* (``workers``, ``master``, ``redis``, ``nginx``…) is a set of root PIDs; its CPU is the sum, over each root
and every live descendant, of ``utime + stime + cutime + cstime``. Counting the children's fields (``cutime`` and
``cstime``: children that exited and were reaped) is right here because a reaped child's time moves into its parent's
``cutime`` at the moment it disappears from ``/proc``, so the tree's sum stays continuous (nginx's worker under its
master, a child a component forks); a child that was never reaped does not count twice, since it is either live (its
own fields) or reaped (its parent's). Only differences between two samples are reported, so what a long-running
service (Redis, MongoDB, nginx) spent before a side started does not count.

A side's window (first request to last item stored) is only known afterwards, so a :class:`CpuSampler` thread
samples every group a few times a second and :func:`cpu_between` interpolates the two ends linearly.

A group may also be split into *steps* (``bench.crawl --profile``; :func:`step_seconds`): a worker's own CPU by
thread, read from ``/proc/<pid>/task/<tid>/stat`` — the main thread (``reactor``: Scrapy's engine, the scheduler,
the spider, pipelines not sent to the pool), the ``feed`` and ``heartbeat`` threads (named ``feed-<job>`` and
``heartbeat-<job>`` in ``/proc`` by :func:`messaging.threadnames.name_os_thread`), every other thread
(``threads``: Twisted's thread pool, the Kafka, ZooKeeper and stats threads; threads that ended count here, as the
process's own fields keep their time) — and its children (``page_processes``: the page-work pool). Reading a few
dozen small files four times a second costs the bench, not the worker.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PROC = Path("/proc")


def parse_stat(line: str) -> tuple[int, int, int]:
    """``(ppid, own ticks, children's ticks)`` of one ``/proc/<pid>/stat`` line.

    The command name (field 2) is in parentheses and may hold spaces or parentheses itself, so the fields are
    counted from its last ``)``: after it come state (3), ppid (4) … utime (14), stime (15), cutime (16), cstime (17).
    """
    rest = line.rsplit(")", 1)[1].split()
    ppid = int(rest[1])
    utime, stime, cutime, cstime = (int(value) for value in rest[11:15])
    return ppid, utime + stime, cutime + cstime


def read_stats(proc: Path = PROC) -> dict[int, tuple[int, int, int]]:
    """Every process's :func:`parse_stat` by PID (processes that vanish while being read are skipped)."""
    stats: dict[int, tuple[int, int, int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stats[int(entry.name)] = parse_stat((entry / "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue
    return stats


def tree_ticks(roots: Iterable[int], stats: Mapping[int, tuple[int, int, int]]) -> int:
    """Ticks of the roots and all their live descendants, each with its reaped children's."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    seen: set[int] = set()
    todo = [pid for pid in roots if pid in stats]
    total = 0
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        _, own, reaped = stats[pid]
        total += own + reaped
        todo.extend(children.get(pid, ()))
    return total


def group_seconds(groups: Mapping[str, Iterable[int]], stats: Mapping[int, tuple[int, int, int]],
                  ticks_per_second: float = CLOCK_TICKS) -> dict[str, float]:
    """CPU seconds of each group whose processes are all there (a group with a root gone is left out of the
    sample rather than read low: :func:`cpu_between` then carries its last value on)."""
    groups = {name: list(pids) for name, pids in groups.items()}
    return {name: tree_ticks(pids, stats) / ticks_per_second
            for name, pids in groups.items() if pids and all(pid in stats for pid in pids)}


STEPS = ("reactor", "feed", "heartbeat", "threads", "page_processes")
THREAD_STEPS = (("feed-", "feed"), ("heartbeat-", "heartbeat"))  # named threads by their name's start


def read_threads(pid: int, proc: Path = PROC) -> dict[int, tuple[str, int]]:
    """``(name, own ticks)`` of each live thread of process ``pid`` by thread id (none when it is gone)."""
    threads: dict[int, tuple[str, int]] = {}
    try:
        tasks = list((proc / str(pid) / "task").iterdir())
    except OSError:
        return threads
    for task in tasks:
        try:
            line = (task / "stat").read_text()
            threads[int(task.name)] = (line[line.index("(") + 1 : line.rindex(")")], parse_stat(line)[1])
        except (OSError, ValueError, IndexError):
            continue
    return threads


def step_ticks(root: int, stats: Mapping[int, tuple[int, int, int]],
               threads: Mapping[int, tuple[str, int]]) -> dict[str, int]:
    """Ticks of process ``root`` by step (:data:`STEPS`): its threads' own and its descendants'."""
    steps = dict.fromkeys(STEPS, 0)
    _, own, _ = stats[root]
    steps["page_processes"] = tree_ticks([root], stats) - own
    for tid, (name, ticks) in threads.items():
        if tid == root:
            steps["reactor"] += ticks
            continue
        for prefix, step in THREAD_STEPS:
            if name.startswith(prefix):
                steps[step] += ticks
    # The process's own fields also hold the threads that ended: what the named threads do not account for.
    steps["threads"] = max(0, own - steps["reactor"] - steps["feed"] - steps["heartbeat"])
    return steps


def step_seconds(groups: Mapping[str, Iterable[int]], split: Iterable[str],
                 stats: Mapping[int, tuple[int, int, int]], proc: Path = PROC,
                 ticks_per_second: float = CLOCK_TICKS) -> dict[str, float]:
    """CPU seconds of each group in ``split`` by step, as ``"<group>.<step>"`` (groups with a root gone are left
    out, as in :func:`group_seconds`)."""
    seconds: dict[str, float] = {}
    for name in split:
        roots = list(groups.get(name, ()))
        if not roots or not all(pid in stats for pid in roots):
            continue
        totals = dict.fromkeys(STEPS, 0)
        for root in roots:
            for step, ticks in step_ticks(root, stats, read_threads(root, proc)).items():
                totals[step] += ticks
        seconds.update({f"{name}.{step}": ticks / ticks_per_second for step, ticks in totals.items()})
    return seconds


Sample = tuple[float, dict[str, float]]  # (epoch seconds, CPU seconds by group)


def cpu_between(samples: list[Sample], start: float, end: float) -> dict[str, float]:
    """CPU seconds each group spent between ``start`` and ``end`` (epoch seconds), interpolating between samples.

    A group missing from a sample (its process not started yet, or gone) counts as spending nothing there: the
    groups that matter live through the whole window. Outside the sampled span the nearest sample is used.
    """
    if not samples:
        return {}
    names = sorted({name for _, values in samples for name in values})
    return {name: max(0.0, _at(samples, end, name) - _at(samples, start, name)) for name in names}


def _at(samples: list[Sample], moment: float, name: str) -> float:
    times = [at for at, _ in samples]
    index = bisect.bisect_left(times, moment)
    if index == 0:
        return samples[0][1].get(name, 0.0)
    if index >= len(samples):
        return samples[-1][1].get(name, 0.0)
    (t0, before), (t1, after) = samples[index - 1], samples[index]
    v0 = before.get(name, after.get(name, 0.0))
    v1 = after.get(name, v0)
    share = (moment - t0) / (t1 - t0) if t1 > t0 else 1.0
    return v0 + (v1 - v0) * share


class CpuSampler:
    """A thread sampling the CPU of process groups every ``interval`` seconds; groups may change between sides.
    The groups named in ``split`` are also sampled by step (:func:`step_seconds`)."""

    def __init__(self, groups: Callable[[], Mapping[str, Iterable[int]]], interval: float = 0.25,
                 clock: Callable[[], float] = time.time, split: Iterable[str] = ()) -> None:
        self.groups = groups
        self.split = tuple(split)
        self.interval = interval
        self.clock = clock
        self.samples: list[Sample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def start(self) -> CpuSampler:
        self._thread.start()
        return self

    def sample(self) -> None:
        groups = {name: list(pids) for name, pids in self.groups().items()}
        stats = read_stats()
        values = group_seconds(groups, stats)
        if self.split:
            values.update(step_seconds(groups, self.split, stats))
        with self._lock:
            self.samples.append((self.clock(), values))

    def take(self) -> list[Sample]:
        """The samples so far (and forget them: each side reads its own)."""
        self.sample()
        with self._lock:
            samples, self.samples = self.samples, []
        return samples

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
