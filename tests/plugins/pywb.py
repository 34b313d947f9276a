"""pywb, the replay tool, in a virtualenv of its own (its pins are not the project's): created on first use.

``pywb_bin`` is the venv's ``bin`` directory (``wb-manager``, ``wayback``). It lives under
``CRAWLFLEET_PYWB_VENV`` or ``.venv-pywb`` beside the project's ``.venv``; creating it needs PyPI (or the
configured index). When pip cannot install pywb the tests that need it are skipped with pip's last lines as the
reason; nothing else is skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def pywb_bin() -> Path:
    venv = Path(os.environ.get("CRAWLFLEET_PYWB_VENV") or ROOT / ".venv-pywb")
    bin_dir = venv / "bin"
    if (bin_dir / "wayback").exists() and (bin_dir / "wb-manager").exists():
        return bin_dir
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=120)
        result = subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "pywb"],
                                capture_output=True, text=True, timeout=900)
    except (subprocess.SubprocessError, OSError) as exc:
        pytest.skip(f"pywb cannot be installed: {exc}")
    if result.returncode != 0 or not (bin_dir / "wayback").exists():
        last_lines = (result.stderr or result.stdout).strip().splitlines()[-3:]
        pytest.skip("pywb cannot be installed: " + " | ".join(last_lines))
    return bin_dir


def start_replay(procs: object, pywb_bin: Path, work: Path, warc_dir: Path, collection: str = "crawl") -> str:
    """Start ``wayback`` on a free loopback port over the WARC files of ``warc_dir`` and *their own* CDXJ indexes
    (the ``.cdxj`` files the writer put beside them); the base URL of the collection. Stopped by ``procs``."""
    from deploy.procs import free_port, wait_for

    work.mkdir(parents=True, exist_ok=True)
    (work / "config.yaml").write_text(
        f"collections:\n  {collection}:\n    index_paths: {warc_dir}/\n    archive_paths: {warc_dir}/\n"
        "framed_replay: false\n", encoding="utf-8")
    port = free_port()
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(work)}
    procs.start([str(pywb_bin / "wayback"), "-p", str(port), "-b", "127.0.0.1", "-t", "2"], env,  # type: ignore[attr-defined]
                name="wayback", cwd=work)
    base = f"http://127.0.0.1:{port}/{collection}"

    def up() -> bool:
        try:
            replay_get(f"http://127.0.0.1:{port}/")
            return True
        except OSError:
            return False

    wait_for(up, 60, "pywb's wayback to answer")
    return base


def replay_get(url: str) -> tuple[int, dict[str, str], bytes]:
    """GET from the replay server (redirects followed: pywb redirects to a capture's exact timestamp)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()
