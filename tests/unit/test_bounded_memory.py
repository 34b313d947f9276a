"""What keeps a long-lived process's memory flat (issue 40): bounded per-key structures and freed memory given back."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest

from frontier.robots_cache import MEMO_HOSTS
from messaging.bounded import BoundedDict, count_evictions, declare_memo, evictions
from messaging.memory import TrimThread
from messaging.metrics import MemoEvictions

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


MAPPED = """
import ctypes, sys
from messaging.memory import fix_mmap_threshold
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "fixed":
    print(fix_mmap_threshold())
else:
    print(True)
big = libc.malloc(4 << 20)  # mapped (over the threshold), then freed: glibc raises its dynamic threshold past it
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
libc.memset(big, 1, 4 << 20)
libc.free(big)
blocks, survivors = [], []
for _ in range(40):  # page-sized blocks (20 MB), each followed by a small object that lives on
    blocks.append(libc.malloc(512 << 10))
    survivors.append(libc.malloc(2048))
for block in blocks:
    libc.free(block)
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
print(libc.mallinfo2().fordblks)  # bytes free in the heap (holes)
"""


@pytest.mark.parametrize("mode", ["dynamic", "fixed"])
def test_a_fixed_mmap_threshold_keeps_page_sized_blocks_out_of_the_heap(mode):
    out = subprocess.run([sys.executable, "-c", MAPPED, mode], capture_output=True, text=True, timeout=60,
                         check=True, cwd=Path(__file__).resolve().parents[2]).stdout.split()
    assert out[0] == "True", out
    holes = int(out[1])
    if mode == "dynamic":
        assert holes > 15 << 20, out  # glibc's default: the freed blocks stay in the heap as holes
    else:
        assert holes < 5 << 20, out  # mapped alone and unmapped when freed


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


# --- what a bound evicted, counted per memo and served on every process's /metrics --------------------------------
def evicted_now(memo: str) -> int:
    return evictions().get(memo, 0)


def test_a_named_memo_counts_its_evictions_process_wide():
    memo = "test_named_memo"
    first: BoundedDict[int, int] = BoundedDict(2, memo=memo)
    assert memo in evictions()  # declared with its first instance: served as 0 before any eviction
    before = evicted_now(memo)
    second: BoundedDict[int, int] = BoundedDict(1, memo=memo, touch=True)
    for n in range(5):
        first[n] = second[n] = n
    assert first.evicted == 3 and second.evicted == 4
    assert evicted_now(memo) == before + 7 and "test_named_memo" in repr(first)
    unnamed: BoundedDict[int, int] = BoundedDict(1)
    unnamed[1] = unnamed[2] = 0
    assert unnamed.evicted == 1 and "" not in evictions()


def test_structures_bounded_another_way_count_too():
    declare_memo("test_wholesale")
    assert evicted_now("test_wholesale") == 0
    count_evictions("test_wholesale", 200_000)
    count_evictions("test_wholesale", 0)
    assert evicted_now("test_wholesale") == 200_000


def test_the_evictions_are_a_prometheus_counter_by_memo():
    registry = CollectorRegistry()
    registry.register(MemoEvictions())
    memo: BoundedDict[str, int] = BoundedDict(1, memo="test_scraped")
    memo["a"], memo["b"], memo["c"] = 1, 2, 3
    text = generate_latest(registry).decode()
    assert "# TYPE crawlfleet_memo_evictions_total counter" in text
    assert 'crawlfleet_memo_evictions_total{memo="test_scraped"} 2.0' in text
    # the default registry, which every process's endpoint serves (messaging.metrics), has it too
    assert REGISTRY.get_sample_value("crawlfleet_memo_evictions_total", {"memo": "test_scraped"}) == 2.0


def test_a_workers_rules_are_bounded_and_their_evictions_counted(monkeypatch):
    from spiders.spiders import base
    from spiders.worker.crawls import CrawlInfo

    monkeypatch.setattr(base, "MAX_RULES", 2)

    class Built(base.FleetSpider):
        name = "test_built"

        def build_rule(self, crawl):
            return {"built": crawl.crawlid}

    spider = Built()
    before = evicted_now("rules")
    crawls = [CrawlInfo(f"c{n}", rule={"rules": []}) for n in range(5)]
    assert [spider.rule_for(crawl) for crawl in crawls] == [{"built": f"c{n}"} for n in range(5)]
    assert list(spider._rules) == ["c3", "c4"] and evicted_now("rules") == before + 3
