"""Giving freed memory back to the system: glibc's ``malloc_trim`` every so often (issue 40).

A long-lived process of the fleet allocates and frees a page's worth of memory many times a second (a response body,
its parsed tree, the pickled page sent to a page process, a batch of items) while a few small objects it keeps (a
lease, a task, a log record) land in between. glibc's allocator only returns memory to the system from the top of a
heap, and its mmap threshold rises with the largest block freed so far, so that freed page-sized blocks stay in the
heap as holes around the objects that live on: the process's resident memory grows with the number of pages it has
handled although what it holds does not. ``malloc_trim(0)`` walks every arena and gives each whole free page back
(``madvise``), whatever lies above it; a few milliseconds for a heap of some hundred MB, called from a thread of its
own so that nothing waits on it. Elsewhere (musl, macOS) there is no such call, and :func:`malloc_trim` does nothing.

The trim thread also fixes glibc's mmap threshold at :data:`MMAP_THRESHOLD` (``mallopt(M_MMAP_THRESHOLD)``): by
default glibc raises it to the largest block freed so far (up to 32 MB), after which a page's body, its decoded text
and its pickled copy (tens to hundreds of KB each) come from the heap, where they leave holes that ``malloc_trim``
cannot give back whole. Fixed, every block from 128 KiB up is mapped on its own and returned when freed: a worker's
resident memory rose 45.7 MB per 100,000 pages after the first 10,000 with the dynamic threshold, 24.3 with this call
and 10.4 with the same threshold set from the start by glibc's ``MALLOC_MMAP_THRESHOLD_=131072`` (``bench.soak
--pages 30000 --workers 1``, one run each on a shared machine, issue 40).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)
MMAP_THRESHOLD = 128 * 1024  # glibc's initial default, kept: blocks from this size up are mapped and unmapped alone
M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
_libc: Any = None
_looked_up = False


def _trim_function() -> Callable[[int], int] | None:
    global _libc, _looked_up
    if not _looked_up:
        _looked_up = True
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc.malloc_trim.argtypes = [ctypes.c_size_t]
            _libc.malloc_trim.restype = ctypes.c_int
        except (OSError, AttributeError):
            _libc = None
    return _libc.malloc_trim if _libc is not None else None


def fix_mmap_threshold(size: int = MMAP_THRESHOLD) -> bool:
    """Stop glibc raising its mmap threshold (see the module docstring); whether it took (False without glibc)."""
    if _trim_function() is None or not hasattr(_libc, "mallopt"):
        return False
    _libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    _libc.mallopt.restype = ctypes.c_int
    return bool(_libc.mallopt(M_MMAP_THRESHOLD, size))


def malloc_trim() -> bool:
    """Give the free pages of every malloc arena back to the system; whether any memory was released (False where
    the C library has no ``malloc_trim``)."""
    trim = _trim_function()
    return bool(trim(0)) if trim is not None else False


class TrimThread:
    """Calls :func:`malloc_trim` every ``interval`` seconds in a daemon thread until :meth:`stop` (0: never)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.trims = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="malloc-trim", daemon=True)

    def start(self) -> TrimThread:
        if self.interval > 0 and _trim_function() is not None:
            fix_mmap_threshold()
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            malloc_trim()
            self.trims += 1
