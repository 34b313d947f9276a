"""What ``bench.soak`` measures: every process's resident memory against the pages crawled, and what it makes of it.

:class:`RssSampler` is a thread that, every few seconds, reads how many pages the site has served so far (the lines
of nginx's access log since the side started, robots.txt aside) and the resident memory (``VmRSS`` of
``/proc/<pid>/status``) of every process of the side: each named root process (a worker, the master, a monitor, the
manager, a service) and each live child of a worker (its page-work processes, named by the worker and their PID, so
a recycled process is a line of its own). :func:`growth` turns one process's samples into the soak's figures.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROC = Path("/proc")
WARM_PAGES = 10_000  # the soak's figures are taken after the first pages (caches, pools and buffers filling)
PER_PAGES = 100_000  # growth is given in MB per this many pages


def rss_kb(pid: int, proc: Path = PROC) -> int:
    """``VmRSS`` of a process in KiB (0 when it is gone)."""
    try:
        for line in (proc / str(pid) / "status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def children(pid: int, proc: Path = PROC) -> list[int]:
    """The live children of a process (``/proc/<pid>/task/*/children``)."""
    found: list[int] = []
    try:
        for task in (proc / str(pid) / "task").iterdir():
            try:
                found += [int(child) for child in (task / "children").read_text().split()]
            except (OSError, ValueError):
                continue
    except OSError:
        pass
    return sorted(set(found))


class AccessCount:
    """Pages served so far: lines of an access log from a byte offset on, robots.txt aside, read incrementally."""

    def __init__(self, path: Path, offset: int) -> None:
        self.path, self.offset, self.pages = path, offset, 0
        self._tail = b""

    def read(self) -> int:
        try:
            with open(self.path, "rb") as log:
                log.seek(self.offset)
                data = log.read()
        except OSError:
            return self.pages
        self.offset += len(data)
        lines = (self._tail + data).split(b"\n")
        self._tail = lines.pop()  # a line being written
        self.pages += sum(1 for line in lines if line and b" /robots.txt " not in line)
        return self.pages


@dataclass(frozen=True)
class Sample:
    seconds: float  # since the sampler started
    pages: int
    rss_mb: dict[str, float]  # process name -> resident MB


class RssSampler:
    """Samples ``roots()`` (name -> PID, asked every time: processes come and go) and the children of the roots whose
    name ``with_children`` accepts, every ``interval`` seconds, in a thread; ``on_sample`` gets each sample as it is
    taken (the soak appends it to a file, so that a run stopped early keeps what it measured)."""

    def __init__(self, roots: Callable[[], Mapping[str, int]], pages: Callable[[], int], interval: float = 5.0,
                 with_children: Callable[[str], bool] = lambda name: name.startswith("worker"),
                 child_name: str = "page work", on_sample: Callable[[Sample], None] = lambda sample: None) -> None:
        self.roots, self.pages, self.interval = roots, pages, interval
        self.with_children, self.child_name, self.on_sample = with_children, child_name, on_sample
        self.samples: list[Sample] = []
        self._started = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> RssSampler:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.take()  # the last word: the end of the side

    def take(self) -> Sample:
        rss: dict[str, float] = {}
        for name, pid in self.roots().items():
            kb = rss_kb(pid)
            if not kb:
                continue
            rss[name] = round(kb / 1024, 1)
            if self.with_children(name):
                for child in children(pid):
                    child_kb = rss_kb(child)
                    if child_kb:
                        rss[f"{name} {self.child_name} {child}"] = round(child_kb / 1024, 1)
        sample = Sample(round(time.monotonic() - self._started, 1), self.pages(), rss)
        self.samples.append(sample)
        self.on_sample(sample)
        return sample

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.take()


def series(samples: Sequence[Sample]) -> dict[str, list[tuple[int, float]]]:
    """Each process's (pages, MB) points, in the order of the samples."""
    found: dict[str, list[tuple[int, float]]] = {}
    for sample in samples:
        for name, mb in sample.rss_mb.items():
            found.setdefault(name, []).append((sample.pages, mb))
    return found


def slope(points: Sequence[tuple[int, float]]) -> float | None:
    """The least-squares slope of MB against pages, in MB per :data:`PER_PAGES` pages (None: too few points)."""
    if len(points) < 3:
        return None
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((x - mean_x) ** 2 for x, _ in points)
    if var <= 0:
        return None
    cov = sum((x - mean_x) * (y - mean_y) for x, y in points)
    return cov / var * PER_PAGES


def growth(points: Sequence[tuple[int, float]], warm: int = WARM_PAGES) -> dict[str, Any]:
    """A process's figures: RSS at ``warm`` pages (the first sample at or past it), at the end and at most, and how
    it grew after ``warm`` pages — ``mb_per_100k``, the least-squares slope over those samples, and
    ``end_vs_warm``, the ratio of the last RSS to the one at ``warm`` pages. A process that did not live past
    ``warm`` pages (a recycled page-work process) has only ``end`` and ``max``, and ``pages`` (first, last)."""
    after = [(x, y) for x, y in points if x >= warm]
    figures: dict[str, Any] = {"end": points[-1][1] if points else None,
                               "max": max((y for _, y in points), default=None),
                               "pages": [points[0][0], points[-1][0]] if points else []}
    if len(after) >= 2 and after[-1][0] > after[0][0]:
        figures.update(at_warm=after[0][1], mb_per_100k=_round(slope(after)),
                       end_vs_warm=round(after[-1][1] / after[0][1], 3) if after[0][1] else None)
    return figures


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
