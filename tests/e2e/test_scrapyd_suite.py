"""scrapyd 1.6.0's own integration tests (its sdist's ``integration_tests/``), unchanged, against a live manager.

They are run as scrapyd's CI runs them: ``pytest integration_tests`` against a server with basic authentication
``hello12345:67890world`` and no project of its own ``[settings]`` (its ``listprojects.json`` must answer ``[]``:
here CRAWLFLEET_MANAGER_BUILTIN_PROJECT=0, the manager without its installed project). The sdist comes from PyPI
once (``pip download --no-deps --no-binary :all: scrapyd==1.6.0``) into a cache directory kept between runs; its
tests address 127.0.0.1:6800, which :mod:`tests.plugins.scrapyd_address` points at the manager's free port.
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.e2e.test_manager_api import ManagerProcess
from tests.plugins.services import REPO, Isolated, Processes

pytestmark = pytest.mark.e2e
SCRAPYD = "scrapyd==1.6.0"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "crawlfleet" / "tests"
AUTH = "hello12345:67890world"
TESTS = 31  # test_webservice.py (27) and test_website.py (4) of scrapyd 1.6.0


def scrapyd_sdist() -> Path:
    """The unpacked sdist of scrapyd 1.6.0 (downloaded once, under a lock so that parallel runs share it)."""
    root = CACHE / "scrapyd-1.6.0"
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / "scrapyd-1.6.0.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "integration_tests" / "test_webservice.py").exists():
            subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                            SCRAPYD, "-d", str(CACHE)], check=True, timeout=300)
            with tarfile.open(CACHE / "scrapyd-1.6.0.tar.gz") as sdist:
                sdist.extractall(CACHE, filter="data")
    return root


@pytest.fixture(scope="module")
def sdist() -> Path:
    return scrapyd_sdist()


def test_scrapyds_own_integration_tests_pass_unchanged(sdist: Path, cf: Isolated, procs: Processes,
                                                        tmp_path: Path) -> None:
    manager = ManagerProcess(procs, cf.env, tmp_path / "manager", CRAWLFLEET_MANAGER_AUTH=AUTH,
                             CRAWLFLEET_MANAGER_BUILTIN_PROJECT="0").start()
    # the plugin by its own name: the sdist's own ``tests`` package would hide ``tests.plugins``
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests" / "plugins"), "SCRAPYD_TESTS_URL": manager.url}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "scrapyd_address", "-p",
                          "no:cacheprovider", "-q", "-rfE", "--no-header", "-W", "error", "-W",
                          "ignore::ResourceWarning", "integration_tests"],
                         cwd=sdist, env=env, capture_output=True, text=True, timeout=300)
    report = run.stdout[-6000:] + run.stderr[-2000:]
    assert run.returncode == 0, report
    assert re.search(rf"\b{TESTS} passed\b", run.stdout), report
