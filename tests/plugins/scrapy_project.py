"""An ordinary Scrapy project written by a test, deployed as its users deploy one: ``scrapyd-deploy``.

:func:`write_project` writes ``scrapy.cfg`` (its ``[deploy]`` target the manager under test), the package with its
settings and the given spider modules; :func:`deploy` runs scrapyd-client's ``scrapyd-deploy`` in it (it builds
the egg with setuptools' ``bdist_egg`` and posts it to ``addversion.json``) and returns the server's JSON answer;
:func:`build_egg` builds the egg file only (``scrapyd-deploy --build-egg``), for an upload by hand.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

SETTINGS = """\
BOT_NAME = {name!r}
SPIDER_MODULES = [{name!r} + ".spiders"]
TWISTED_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
ROBOTSTXT_OBEY = False
TELNETCONSOLE_ENABLED = False
"""


def write_project(root: Path, name: str, url: str, modules: dict[str, str], settings: str = "") -> Path:
    """A Scrapy project in ``root`` (rewritten when it exists): ``modules`` maps a module path inside the package
    (``"spiders/probe.py"``, ``"late.py"``) to its source."""
    package = root / name
    (package / "spiders").mkdir(parents=True, exist_ok=True)
    (root / "scrapy.cfg").write_text(f"[settings]\ndefault = {name}.settings\n\n[deploy]\nurl = {url}/\n"
                                     f"project = {name}\n")
    (package / "__init__.py").write_text("")
    (package / "spiders" / "__init__.py").write_text("")
    (package / "settings.py").write_text(SETTINGS.format(name=name) + settings)
    for path, source in modules.items():
        (package / path).parent.mkdir(parents=True, exist_ok=True)
        (package / path).write_text(textwrap.dedent(source))
    return root


def scrapyd_deploy(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scrapyd_client.deploy", *args], cwd=root, capture_output=True,
                          text=True, timeout=180)


def deploy(root: Path, version: str) -> dict[str, Any]:
    """``scrapyd-deploy --version <version>``: the server's answer (scrapyd-deploy prints it on stdout)."""
    done = scrapyd_deploy(root, "--version", version)
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def build_egg(root: Path, egg: Path) -> Path:
    done = scrapyd_deploy(root, "--build-egg", str(egg))
    assert done.returncode == 0 and egg.exists(), done.stderr
    return egg
