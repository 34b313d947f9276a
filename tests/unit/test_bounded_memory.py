"""What keeps a long-lived process's memory flat (issue 40): bounded per-key structures and freed memory given back."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from frontier.robots_cache import MEMO_HOSTS
from messaging.bounded import BoundedDict
from messaging.memory import TrimThread

pytestmark = pytest.mark.unit


def test_a_bounded_dict_keeps_its_limit_evicting_the_least_recently_set_and_counting_them():
    seen: BoundedDict[str, int] = BoundedDict(3)
    for n in range(10):
        seen[f"host{n}"] = n
    assert list(seen) == ["host7", "host8", "host9"] and seen.evicted == 7 and len(seen) == 3
    seen["host7"] = 70  # set again: the most recent now
    seen["host10"] = 10
    assert list(seen.items()) == [("host9", 9), ("host7", 70), ("host10", 10)] and seen.evicted == 8
    assert seen.get("host8") is None and seen.pop("host9") == 9 and "host9" not in seen


def test_a_touching_bounded_dict_is_an_lru_cache():
    cache: BoundedDict[str, int] = BoundedDict(2, touch=True)
    cache["a"], cache["b"] = 1, 2
    assert cache["a"] == 1  # read: "b" is now the least recently used
    cache["c"] = 3
    assert set(cache) == {"a", "c"} and cache.evicted == 1
    with pytest.raises(ValueError):
        BoundedDict(0)


def test_the_robots_memo_is_bounded():
    assert 1_000 <= MEMO_HOSTS <= 100_000


HOLES = """
from messaging.memory import malloc_trim

def rss_kb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))

blocks, survivors = [], []
for n in range(2_000):
    blocks.append(bytes(50_000))  # 100 MB of page-sized blocks, as response bodies are
    if n % 10 == 0:
        survivors.append(bytes(1_000))  # objects that live on (a lease, a task), allocated in between
blocks.clear()
before = rss_kb()
released = malloc_trim()
print(before, rss_kb(), released, len(survivors))
"""


def test_malloc_trim_gives_back_the_holes_that_freed_page_sized_blocks_leave_around_survivors():
    # a fresh interpreter: what its heap holds is only this
    out = subprocess.run([sys.executable, "-c", HOLES], capture_output=True, text=True, timeout=60, check=True,
                         cwd=Path(__file__).resolve().parents[2]).stdout.split()
    before, after = int(out[0]), int(out[1])
    assert out[2] == "True" and before > 90_000, out  # the freed blocks were still resident (glibc, Debian)
    assert before - after > 60_000, out  # most of it given back, although the survivors are still there


def test_the_trim_thread_trims_until_stopped():
    thread = TrimThread(0.01).start()
    try:
        deadline = threading.Event()
        for _ in range(500):
            if thread.trims >= 2:
                break
            deadline.wait(0.01)
        assert thread.trims >= 2
    finally:
        thread.stop()
    assert TrimThread(0).start().trims == 0  # 0: never
