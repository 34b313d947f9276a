"""Exports from the test's MongoDB-wire server: every format, resuming, bounded memory, the manager's endpoint."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

from deploy.procs import wait_for
from tests.e2e.test_manager_api import ManagerProcess
from tests.plugins.mongo import OwnMongo
from tests.plugins.services import Isolated, Processes

pytestmark = pytest.mark.e2e

TITLE = 'Flood, "storm" and\nrain: 防洪墙'  # a comma, quotes, a line break and CJK in one field


def item(n: int, text_chars: int = 300) -> dict[str, Any]:
    return {"url": f"http://news.test/{n}", "url_key": f"http://news.test/{n}", "title": f"{TITLE} {n}",
            "text": f"story {n} " + "word " * (text_chars // 5), "markdown": f"# {TITLE} {n}\n\nstory {n}",
            "metadata": {"author": [f"A{n}"], "language": "en"}, "depth": n % 4, "crawlid": "c"}


def fill(collection: Any, count: int, text_chars: int = 300) -> None:
    for start in range(0, count, 5000):
        collection.insert_many([item(n, text_chars) for n in range(start, min(count, start + 5000))], ordered=False)


def run_export(cf: Isolated, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "deploy.cli", "export", *args], cwd=cwd, env=cf.env,
                          capture_output=True, timeout=600)


def peak_rss_kb(env: dict[str, str], *args: str, cwd: Path) -> tuple[int, bytes]:
    """Run the CLI; its peak resident memory (kB, from wait4) and its stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "deploy.cli", "export", *args], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    stderr = proc.stderr.read() if proc.stderr else b""
    assert os.waitstatus_to_exitcode(status) == 0, stderr.decode(errors="replace")
    return usage.ru_maxrss, stderr


def test_every_format(cf: Isolated, tmp_path: Path) -> None:
    fill(cf.mongo()["c"], 1200)
    for fmt, out in (("jsonl", "c.jsonl"), ("csv", "c.csv"), ("parquet", "c.parquet"), ("markdown-dir", "c")):
        result = run_export(cf, "c", "--format", fmt, "--batch", "500", cwd=tmp_path)
        assert result.returncode == 0, result.stderr.decode()
        assert f"exported 1200 items of c to {out} ({fmt})" in result.stdout.decode()
    lines = (tmp_path / "c.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["url"] for r in rows] == [f"http://news.test/{n}" for n in range(1200)]
    assert rows[7]["title"] == f"{TITLE} 7" and rows[7]["metadata"] == {"author": ["A7"], "language": "en"}

    raw = (tmp_path / "c.csv").read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")  # a UTF-8 byte order mark: spreadsheets read UTF-8
    with open(tmp_path / "c.csv", encoding="utf-8-sig", newline="") as stream:
        table = list(csv.reader(stream))
    header, body = table[0], table[1:]
    assert header[:8] == ["_id", "url", "title", "text", "markdown", "metadata", "crawlid", "depth"]
    assert header[-1] == "_extra" and len(body) == 1200
    row = dict(zip(header, body[7], strict=True))
    assert row["title"] == f"{TITLE} 7" and json.loads(row["metadata"]) == {"author": ["A7"], "language": "en"}
    assert row["depth"] == "3" and row["_extra"] == ""

    import pyarrow.parquet as pq

    parts = sorted((tmp_path / "c.parquet").glob("part-*.parquet"))
    assert len(parts) == 3
    tables = [pq.read_table(part) for part in parts]
    assert sum(t.num_rows for t in tables) == 1200 and tables[0].column("title")[7].as_py() == f"{TITLE} 7"

    files = sorted((tmp_path / "c").glob("*.md"))
    assert len(files) == 1200
    sample = next(f for f in files if f.name.startswith("news-test-7-"))
    assert sample.read_text(encoding="utf-8").endswith(f"# {TITLE} 7\n\nstory 7\n")

    result = run_export(cf, "no-such-crawl", cwd=tmp_path)
    assert result.returncode != 0 and b"no items of crawl 'no-such-crawl'" in result.stderr


def test_an_interrupted_export_resumes_without_loss_or_repeat(cf: Isolated, tmp_path: Path) -> None:
    fill(cf.mongo()["big"], 30_000)
    proc = subprocess.Popen([sys.executable, "-m", "deploy.cli", "export", "big", "--batch", "100"], cwd=tmp_path,
                            env=cf.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    checkpoint = tmp_path / "big.jsonl.checkpoint"

    def halfway() -> bool:
        try:
            return 3000 <= json.loads(checkpoint.read_text())["count"] < 30_000
        except (OSError, ValueError):
            return False

    try:
        wait_for(halfway, 120, "the export to be under way")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert not json.loads(checkpoint.read_text())["done"]
    result = run_export(cf, "big", "--resume", "--batch", "1000", cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    urls = [json.loads(line)["url"] for line in (tmp_path / "big.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(urls) == 30_000 == len(set(urls))


def test_a_hundred_thousand_items_stream_in_bounded_memory(cf: Isolated, tmp_path: Path,
                                                          procs: Processes) -> None:
    # 220 MB of items: on a MongoDB of this test's own, gone with its process (a drop would take about 10 s)
    mongo = OwnMongo(procs, cf, tmp_path, in_memory=True)
    mongo.start()
    env = cf.with_env(CRAWLFLEET_MONGO_URI=mongo.uri)
    client = mongo.client()
    database = client[cf.settings.mongo_db]
    fill(database["small"], 10_000, text_chars=1000)
    fill(database["large"], 100_000, text_chars=1000)
    client.close()
    small_kb, _ = peak_rss_kb(env, "small", "--format", "csv", cwd=tmp_path)
    large_kb, _ = peak_rss_kb(env, "large", "--format", "csv", cwd=tmp_path)
    size = (tmp_path / "large.csv").stat().st_size
    print(f"\nexport peak RSS: 10^4 items {small_kb / 1024:.0f} MB, 10^5 items {large_kb / 1024:.0f} MB "
          f"(output {size / 2**20:.0f} MB)")
    assert size > 100 * 2**20
    assert large_kb < small_kb + 30 * 1024  # ten times the items, not ten times the memory

    manager = ManagerProcess(procs, env, tmp_path / "manager").start()
    before = _rss_kb(manager.proc.pid)
    with requests.get(f"{manager.url}/api/crawls/large/export", params={"format": "csv"}, stream=True,
                      timeout=120) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/csv")
        assert 'filename="large.csv"' in response.headers["content-disposition"]
        reader = csv.reader(io.TextIOWrapper(response.raw, encoding="utf-8-sig", newline=""))
        header = next(reader)
        count = 0
        for row in reader:
            count += 1
            if count == 50_000:  # half way: the manager holds a batch, not the crawl
                during = _rss_kb(manager.proc.pid)
            assert len(row) == len(header)
    assert count == 100_000
    print(f"manager RSS: {before / 1024:.0f} MB before, {during / 1024:.0f} MB half way through the download")
    assert during < before + 60 * 1024

    lines = requests.get(f"{manager.url}/api/crawls/small/export", timeout=120).text.splitlines()
    assert len(lines) == 10_000 and json.loads(lines[0])["url"] == "http://news.test/0"
    bad = requests.get(f"{manager.url}/api/crawls/small/export", params={"format": "xml"}, timeout=30)
    assert bad.status_code == 400 and "jsonl, csv" in bad.text
    assert requests.get(f"{manager.url}/api/crawls/none/export", timeout=30).status_code == 404
    mongo.discard()


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")

