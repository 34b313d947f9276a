"""A thread's name, seen by the operating system too: ``top -H``, ``ps -L`` and ``/proc/<pid>/task/<tid>/comm``.

Python before 3.14 names its threads only for itself: every thread of a worker shows in ``/proc`` as ``python3``,
so nothing outside the process can tell the feed thread's CPU from the reactor's (``bench.crawl --profile``
splits a worker's CPU by thread so). A long-lived thread calls :func:`name_os_thread` once, first thing; the
kernel keeps 15 bytes of the name. Elsewhere than Linux (no ``/proc/self/task``) it does nothing.
"""

from __future__ import annotations

import threading
from pathlib import Path

__all__ = ["COMM_BYTES", "name_os_thread"]

COMM_BYTES = 15  # the kernel's TASK_COMM_LEN (16) less its terminating NUL


def name_os_thread(name: str | None = None, proc: Path = Path("/proc/self/task")) -> bool:
    """Give the calling thread ``name`` (default: its Python name) in the operating system; False where it
    cannot (not Linux, ``/proc`` not mounted): the name is a convenience, never a reason to fail."""
    name = name if name is not None else threading.current_thread().name
    comm = name.encode("utf-8")[:COMM_BYTES].decode("utf-8", "ignore")
    try:
        (proc / str(threading.get_native_id()) / "comm").write_text(comm)
    except OSError:
        return False
    return True
