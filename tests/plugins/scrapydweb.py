"""ScrapydWeb 1.6.0 from PyPI, in a virtualenv of its own, for the tests that run it against a manager.

ScrapydWeb pins old releases of Flask, SQLAlchemy and friends, so it never shares the project's environment: the
``scrapydweb`` fixture creates ``<cache>/scrapydweb-1.6.0-py3.X`` (``$XDG_CACHE_HOME/crawlfleet-tests``, by default
``~/.cache/crawlfleet-tests``) with the interpreter the project's venv is built on and ``pip install
scrapydweb==1.6.0`` (PyPI only), once, under a lock, marking it complete last: a second run (or a concurrent one)
finds it ready in milliseconds, an interrupted build is started again. :class:`ScrapydWeb` writes its settings
file in a directory of the test and runs it on a free loopback port, a child stopped by PID.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from deploy.procs import free_port, port_open, wait_for
from tests.plugins.services import Processes

VERSION = "1.6.0"
INSTALL_TIMEOUT = 900
START_TIMEOUT = 60


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "crawlfleet-tests"


def ensure_venv(root: Path | None = None) -> Path:
    """The virtualenv with ScrapydWeb (created once); returns its directory."""
    root = root or cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"scrapydweb-{VERSION}-py{sys.version_info.major}.{sys.version_info.minor}"
    marker = target / ".complete"
    with (root / f"{target.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time; the others find it built
        if marker.exists():
            return target
        shutil.rmtree(target, ignore_errors=True)  # an interrupted build: again from scratch
        python = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([python, "-m", "venv", str(target)], check=True, timeout=INSTALL_TIMEOUT)
        subprocess.run([str(target / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "install", "-q",
                        f"scrapydweb=={VERSION}"], check=True, timeout=INSTALL_TIMEOUT)
        marker.write_text(VERSION)  # last: a venv without it is not trusted
    return target


SETTINGS = """\
# ScrapydWeb's settings for one test (scrapydweb_settings_v11.py, read from its working directory)
SCRAPYDWEB_BIND = '127.0.0.1'
SCRAPYDWEB_PORT = {port}
ENABLE_AUTH = False
SCRAPYD_SERVERS = [{server!r}]
CHECK_SCRAPYD_SERVERS = True
LOCAL_SCRAPYD_SERVER = ''
ENABLE_LOGPARSER = False
ENABLE_MONITOR = False
SHOW_SCRAPYD_ITEMS = True
SCRAPYD_LOG_EXTENSIONS = ['.log']
JOBS_SNAPSHOT_INTERVAL = 0
"""


class ScrapydWeb:
    """One ScrapydWeb process watching one scrapyd node (``user:password@host:port``)."""

    def __init__(self, venv: Path, procs: Processes, workdir: Path, server: str) -> None:
        self.venv, self.procs, self.workdir, self.server = venv, procs, workdir, server
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: Any = None

    def start(self) -> ScrapydWeb:
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "scrapydweb_settings_v11.py").write_text(SETTINGS.format(port=self.port, server=self.server))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.workdir),
               "DATA_PATH": str(self.workdir / "data"), "LANG": "C.UTF-8"}
        self.proc = self.procs.start([str(self.venv / "bin" / "scrapydweb")], env, name="scrapydweb",
                                     cwd=self.workdir)
        wait_for(lambda: port_open(self.port), START_TIMEOUT, "ScrapydWeb listening",
                 alive=lambda: f"exited:\n{self.procs.log(self.proc)[-3000:]}" if self.proc.poll() is not None
                 else None)
        return self

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return requests.get(f"{self.url}{path}", timeout=120, **kwargs)

    def post(self, path: str, **kwargs: Any) -> requests.Response:
        return requests.post(f"{self.url}{path}", timeout=120, **kwargs)


@pytest.fixture(scope="session")
def scrapydweb_venv() -> Iterator[Path]:
    yield ensure_venv()
