"""The WARC writer on real files: names, records, digests (`warcio check`), revisits, rotation, CDXJ, pywb replay."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from spiders.warc.writer import Exchange, WarcWriter, payload_digest
from tests.plugins.pywb import replay_get, start_replay

pytestmark = pytest.mark.e2e

NAME = re.compile(r"^test-\d{17}-\d{5}-host1-universal-1\.warc\.gz$")
WARCIO = Path(sys.executable).with_name("warcio")


def exchange(url: str, body: bytes, when: datetime | None = None, status: int = 200) -> Exchange:
    return Exchange(url=url, method="GET", request_headers=[("User-Agent", "Mozilla/5.0 test")], request_body=b"",
                    status=status, reason="OK", response_headers=[("Content-Type", "text/html; charset=utf-8"),
                                                                  ("Transfer-Encoding", "chunked")],
                    body=body, fetched=when or datetime.now(UTC), ip="127.0.0.1",
                    fields={"crawlid": "c1", "job": "host1-universal-1", "depth": "1", "via": ""})


def records(path: Path) -> list:
    with open(path, "rb") as stream:
        found = []
        iterator = ArchiveIterator(stream)
        for record in iterator:
            record.content_stream().read()
            found.append((record.rec_type, dict(record.rec_headers.headers), iterator.get_record_offset(),
                          iterator.get_record_length()))
        return found


def warcio_check(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(WARCIO), "check", "-v", *map(str, paths)], capture_output=True, text=True, timeout=120)


def page(n: int, size: int = 3000) -> bytes:
    return (f"<html><body><h1>Page {n}</h1><p>" + f"text of page {n} " * (size // 16) + "</p></body></html>").encode()


def test_records_digests_revisits_and_the_index(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path, "host1-universal-1", prefix="test", max_size=10**9)
    writer.submit(exchange("http://news.test/a", page(1), datetime(2026, 3, 14, 8, 0, 1, tzinfo=UTC)))
    writer.submit(exchange("http://news.test/b", page(2)))
    writer.submit(exchange("http://news.test/a-copy", page(1)))  # the same payload under another URL
    writer.submit(exchange("http://news.test/a", page(1)))  # and the same URL again
    assert writer.close(timeout=60)
    [path] = writer.files.closed_files
    assert NAME.match(path.name) and not list(tmp_path.glob("*.open"))
    check = warcio_check(path)
    assert check.returncode == 0, check.stdout + check.stderr
    kinds = [kind for kind, *_ in records(path)]
    assert kinds == ["warcinfo"] + ["response", "request", "metadata"] * 2 + ["revisit", "request", "metadata"] * 2
    revisits = [headers for kind, headers, *_ in records(path) if kind == "revisit"]
    for headers in revisits:
        assert headers["WARC-Refers-To-Target-URI"] == "http://news.test/a"
        assert headers["WARC-Refers-To-Date"] == "2026-03-14T08:00:01.000000Z"
        assert headers["WARC-Payload-Digest"] == payload_digest(page(1))
        assert headers["WARC-Profile"].endswith("identical-payload-digest")
    assert writer.written == {"response": 2, "revisit": 2, "request": 4, "metadata": 4} and writer.failed == 0
    index = path.with_name(path.name.removesuffix(".warc.gz") + ".cdxj").read_text().splitlines()
    assert len(index) == 4  # the responses and revisits (requests and metadata are appended to their lines)
    assert sorted(line.split(" ")[0] for line in index) == ["test,news)/a", "test,news)/a", "test,news)/a-copy",
                                                            "test,news)/b"]
    assert sum('"mime": "warc/revisit"' in line for line in index) == 2


def test_rotation_ends_each_file_within_one_record_of_the_limit(tmp_path: Path) -> None:
    limit = 40_000
    writer = WarcWriter(tmp_path, "host1-universal-1", prefix="test", max_size=limit)
    bodies = [random.Random(n).randbytes(2000 + 97 * n) for n in range(60)]  # incompressible, sizes vary
    for n, body in enumerate(bodies):
        writer.submit(exchange(f"http://news.test/{n}", body))
    assert writer.close(timeout=60)
    files = writer.files.closed_files
    assert len(files) >= 5
    serials = [int(path.name.split("-")[2]) for path in files]
    assert serials == list(range(len(files)))
    for path in files:
        found = records(path)
        size = path.stat().st_size
        last_start = found[-1][2]
        if path != files[-1]:
            assert size >= limit > last_start  # the record that crossed the limit ends the file
        assert path.with_name(path.name.removesuffix(".warc.gz") + ".cdxj").exists()
    check = warcio_check(*files)
    assert check.returncode == 0, check.stdout + check.stderr
    assert sum(1 for path in files for kind, *_ in records(path) if kind == "response") == 60


def test_pywb_replays_a_response_and_a_revisit_from_the_writers_own_index(tmp_path: Path, pywb_bin: Path,
                                                                        procs) -> None:
    warcs = tmp_path / "warcs"
    writer = WarcWriter(warcs, "host1-universal-1", prefix="test")
    first = datetime(2026, 3, 14, 8, 0, 1, tzinfo=UTC)
    writer.submit(exchange("http://news.test/story", page(7), first))
    writer.submit(exchange("http://news.test/story-amp", page(7), datetime(2026, 3, 15, 9, 0, 0, tzinfo=UTC)))
    assert writer.close(timeout=60)
    base = start_replay(procs, pywb_bin, tmp_path / "pywb", warcs)
    status, _, body = replay_get(f"{base}/20260314080001id_/http://news.test/story")
    assert status == 200 and body == page(7)
    status, _, body = replay_get(f"{base}/20260315090000id_/http://news.test/story-amp")  # a revisit record
    assert status == 200 and body == page(7)
    status, _, _ = replay_get(f"{base}/20260315090000id_/http://news.test/never-crawled")
    assert status == 404
