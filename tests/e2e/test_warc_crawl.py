"""WARC files of a real crawl: a worker with CRAWLFLEET_WARC_DIR crawls the demo web twice; the files pass
`warcio check`, the second crawl's pages are revisit records, and pywb replays a page and its revisit."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from deploy.demo_rules import DEMO_LIST_RULE
from deploy.demoweb.sites import build_sites
from deploy.procs import stop_pid
from tests.plugins.pywb import replay_get, start_replay

pytestmark = pytest.mark.e2e

NEWS = "news.fleet.test"
CRAWL_TIMEOUT = 180
MAX_SIZE = 150_000


def test_a_crawl_archives_what_it_fetches(fleet: Any, tmp_path: Path, pywb_bin: Path, procs: Any) -> None:
    news = next(s for s in build_sites(fleet.demoweb["pages"]) if getattr(s, "name", None) == NEWS)
    warc_dir = tmp_path / "warc"
    fleet.env.update(CRAWLFLEET_WARC_DIR=str(warc_dir), CRAWLFLEET_WARC_MAX_SIZE=str(MAX_SIZE),
                     CRAWLFLEET_WARC_PREFIX="demo")
    fleet.start(list_workers=1)
    for crawlid in ("world-1", "world-2"):  # the second crawl fetches the same pages: revisits
        fleet.submit({"userid": "alice", "crawlid": crawlid, "spider_type": "list",
                      "url": fleet.url(NEWS, "/world/"), "rule": DEMO_LIST_RULE})
        fleet.wait_finished([crawlid], CRAWL_TIMEOUT)
    [(job, worker)] = fleet.workers.items()
    stop_pid(worker.pid, timeout=30)  # SIGTERM: the spider closes, the writer finishes and indexes its last file

    files = sorted(warc_dir.glob("*.warc.gz"))
    assert files and not list(warc_dir.glob("*.open"))
    assert all(re.fullmatch(rf"demo-\d{{17}}-\d{{5}}-{re.escape(job)}\.warc\.gz", p.name) for p in files)
    check = subprocess.run([str(Path(sys.executable).with_name("warcio")), "check", *map(str, files)],
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout + check.stderr
    responses: dict[str, list[str]] = {}
    revisits: dict[str, list[dict[str, str]]] = {}
    for path in files:
        assert path.with_name(path.name.removesuffix(".warc.gz") + ".cdxj").stat().st_size > 0
        with open(path, "rb") as stream:
            for record in ArchiveIterator(stream):
                uri = record.rec_headers.get_header("WARC-Target-URI")
                if record.rec_type == "response":
                    responses.setdefault(uri, []).append(record.rec_headers.get_header("WARC-Date"))
                elif record.rec_type == "revisit":
                    revisits.setdefault(uri, []).append(dict(record.rec_headers.headers))
        if path != files[-1]:
            assert path.stat().st_size >= MAX_SIZE
    articles = [fleet.url(NEWS, news.article_path(i)) for i in news.section_ids("world")]
    assert set(articles) <= set(responses)
    for url in articles:  # the second crawl's copy of each story is a revisit of the first's
        assert len(responses[url]) == 1 and len(revisits.get(url, [])) == 1, url
        revisit = revisits[url][0]
        assert revisit["WARC-Refers-To-Target-URI"] == url
        assert revisit["WARC-Refers-To-Date"] == responses[url][0]

    log = procs.log(worker)
    share = re.search(r"'warc/writer_cpu_share': ([0-9.]+)", log)
    assert share is not None, log[-3000:]
    print(f"\nWARC writer CPU share of the worker: {float(share.group(1)):.3f}")

    base = start_replay(procs, pywb_bin, tmp_path / "pywb", warc_dir)
    url = articles[0]
    title = news.headline(news.section_ids("world")[0]).title
    for date in (responses[url][0], revisits[url][0]["WARC-Date"]):
        stamp = re.sub(r"[^0-9]", "", date)[:14]
        status, headers, body = replay_get(f"{base}/{stamp}id_/{url}")
        if headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        assert status == 200 and title.encode() in body.replace(b"&#x27;", b"'").replace(b"&#39;", b"'")
    assert json.dumps(revisits[url][0])  # headers are plain strings
