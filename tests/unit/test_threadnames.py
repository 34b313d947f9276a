"""messaging.threadnames: a thread's name in /proc, cut to the kernel's 15 bytes, never an error."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from messaging.threadnames import COMM_BYTES, name_os_thread

pytestmark = pytest.mark.unit


def named_in_proc(name: str | None, thread_name: str) -> tuple[bool, str]:
    seen: dict[str, object] = {}

    def run() -> None:
        seen["named"] = name_os_thread(name)
        seen["comm"] = Path(f"/proc/self/task/{threading.get_native_id()}/comm").read_text().strip()

    thread = threading.Thread(target=run, name=thread_name)
    thread.start()
    thread.join(5)
    return bool(seen["named"]), str(seen["comm"])


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="Linux /proc only")
def test_a_thread_gets_its_python_name_in_proc_cut_to_15_bytes() -> None:
    assert named_in_proc(None, "feed-job-1") == (True, "feed-job-1")
    named, comm = named_in_proc(None, "heartbeat-a-very-long-job-id")
    assert named and comm == "heartbeat-a-very-long-job-id"[:COMM_BYTES]
    assert named_in_proc("réacteur-éé-ééé", "x")[1] == "réacteur-éé-"  # cut at a character, not inside one


def test_without_proc_it_says_so_and_does_not_raise(tmp_path: Path) -> None:
    assert name_os_thread("feed", proc=tmp_path / "missing") is False
