"""The demo web for the tests: ``demoweb`` (session) is a small demo web, stopped by PID at the end.

A test that needs a bigger web of its own uses ``own_demoweb(run_dir, pages)`` (started, yielded, stopped by PID).

``demoweb`` yields the runner's status (``pid``, ``port``, ``sites`` {name: ip}, ``urls`` {name: base URL},
``hosts_file``, ``pages``, ``slow_seconds``) plus ``run_dir`` and ``manifest`` (what the sites serve; see
:func:`deploy.demoweb.manifest`). Child processes resolve the names with ``CRAWLFLEET_HOSTS_FILE=hosts_file``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from deploy.demoweb import fetch, start_demoweb, stop_demoweb
from deploy.demoweb.router import MANIFEST_PATH

# Small enough to crawl in seconds, big enough for pagination on every list (news: 4 sections x 15 articles,
# 10 to a page), and a slow page that is clearly slow without slowing the suite down.
DEMOWEB_PAGES = 60
DEMOWEB_SLOW_SECONDS = 1.0


@pytest.fixture(scope="session")
def demoweb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    run_dir = tmp_path_factory.mktemp("demoweb")
    status = start_demoweb(run_dir, pages=DEMOWEB_PAGES, slow_seconds=DEMOWEB_SLOW_SECONDS)
    try:
        name, ip = next(iter(status["sites"].items()))
        _, _, body = fetch(ip, status["port"], name, MANIFEST_PATH)
        yield {**status, "run_dir": run_dir, "manifest": json.loads(body)}
    finally:
        stop_demoweb(run_dir)


@contextmanager
def own_demoweb(run_dir: Path, pages: int, **options: Any) -> Iterator[dict[str, Any]]:
    """A demo web of one test's own (``pages`` articles per site; ``options`` as :func:`start_demoweb` takes them),
    stopped by PID when the block ends; its status with ``run_dir``."""
    status = start_demoweb(run_dir, pages=pages, **options)
    try:
        yield {**status, "run_dir": run_dir}
    finally:
        stop_demoweb(run_dir)
