"""Deployed projects without services: names, scrapyd's version order, the host's egg cache (a storage stand-in in
memory), activation, the loader's error text, a deployed job's command line and environment, the proxy prefix."""

from __future__ import annotations

import hashlib
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from manager.jobs import Job
from manager.launcher import Launcher
from manager.project_pages import base_path
from manager.projects import loader_failure
from messaging.egg_cache import BadEgg, EggCache, EggChanged, activate, settings_module
from messaging.eggs import (
    DirectoryTraversalError,
    EggInfo,
    InvalidName,
    ProjectNotFound,
    VersionNotFound,
    check_project,
    check_version,
    sorted_versions,
)

pytestmark = pytest.mark.unit


def test_versions_sort_as_scrapyd_sorts_them() -> None:
    assert sorted_versions(["10.0", "2.0", "1.0"]) == ["1.0", "2.0", "10.0"]
    assert sorted_versions(["1700000010", "999999999"]) == ["999999999", "1700000010"]  # scrapyd-deploy's default
    assert sorted_versions(["1.0rc1", "1.0", "1.0.post1"]) == ["1.0rc1", "1.0", "1.0.post1"]
    assert sorted_versions(["r9-main", "10.0", "2.0"]) == ["10.0", "2.0", "r9-main"]  # one not PEP 440: strings
    assert sorted_versions([]) == []


@pytest.mark.parametrize("name", ["../p", "..", ".", "a/b", "a\\b", "x\0"])
def test_a_project_name_that_would_leave_its_directory_is_scrapyds_traversal_error(name: str) -> None:
    with pytest.raises(DirectoryTraversalError) as raised:
        check_project(name)
    assert str(raised.value) == name


def test_project_and_version_names() -> None:
    for good in ("quotesbot", "my-project_2", "a.b", "X" * 128):
        assert check_project(good) == good
    for bad in ("", ".hidden", "-x", "my project", "é", "X" * 129):
        with pytest.raises(InvalidName):
            check_project(bad)
    for good in ("1.0", "1700000000", "r12-feature/x", "v1.2-3-gabc ü"):
        assert check_version(good) == good
    for bad in ("", "1\n2", "a\x00", "\u202e1", "x" * 201):
        with pytest.raises(InvalidName):
            check_version(bad)


class MemoryStorage:
    """The egg storage's read side, in memory, counting downloads."""

    def __init__(self) -> None:
        self.eggs: dict[tuple[str, str], tuple[EggInfo, bytes]] = {}
        self.reads = 0

    def add(self, project: str, version: str, data: bytes) -> EggInfo:
        info = EggInfo(project, version, hashlib.sha256(data).hexdigest(), len(data), 1.0, object())
        self.eggs[(project, version)] = (info, data)
        return info

    def get(self, project: str, version: str | None = None) -> EggInfo:
        versions = sorted_versions(v for p, v in self.eggs if p == project)
        if not versions:
            raise ProjectNotFound(project)
        if (project, version or versions[-1]) not in self.eggs:
            raise VersionNotFound(project, version or "")
        return self.eggs[(project, version or versions[-1])][0]

    def read(self, info: EggInfo) -> bytes:
        self.reads += 1
        return self.eggs[(info.project, info.version)][1]


def test_the_cache_fetches_a_version_once_checks_its_digest_and_refuses_a_replaced_or_deleted_one(
        tmp_path: Path) -> None:
    storage = MemoryStorage()
    v1 = storage.add("shop", "1.0", b"egg one")
    cache = EggCache(tmp_path, storage)  # type: ignore[arg-type]
    path = cache.path("shop")
    assert path == tmp_path / "shop" / f"1_0-{v1.sha256}.egg" and path.read_bytes() == b"egg one"
    assert cache.path("shop", "1.0", v1.sha256) == path and storage.reads == 1  # fetched once
    path.write_bytes(b"egg 0ne")  # damaged on disk (same size): its digest no longer matches
    assert cache.path("shop", "1.0").read_bytes() == b"egg one" and storage.reads == 2
    assert not list(path.parent.glob(".tmp-*"))  # written beside, renamed into place

    storage.add("shop", "1.0", b"egg one, deployed again")  # same version name, another digest
    with pytest.raises(EggChanged, match="deployed again since the job was scheduled"):
        cache.path("shop", "1.0", v1.sha256)
    v2 = storage.add("shop", "2.0", b"egg two")
    assert cache.put(v2, b"egg two").read_bytes() == b"egg two"  # adopted: never downloaded
    assert cache.path("shop").name == f"2_0-{v2.sha256}.egg" and storage.reads == 2
    del storage.eggs[("shop", "2.0")]
    with pytest.raises(VersionNotFound):
        cache.path("shop", "2.0", v2.sha256)  # deleted: refused on every host, cached or not
    with pytest.raises(DirectoryTraversalError):
        cache.file_for(EggInfo("../x", "1", v2.sha256, 1, 1.0))


def egg(path: Path, entry_points: str | None, modules: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        if entry_points is not None:
            z.writestr("EGG-INFO/entry_points.txt", entry_points)
        for name, source in modules.items():
            z.writestr(name, source)
    return path


def test_activation_puts_the_egg_on_the_path_and_names_its_settings_module(tmp_path: Path,
                                                                            monkeypatch: Any) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    good = egg(tmp_path / "good.egg", "[scrapy]\nsettings = eggproj_a.settings\n",
               {"eggproj_a/__init__.py": "", "eggproj_a/settings.py": "BOT_NAME = 'from the egg'\n"})
    assert activate(good) == "eggproj_a.settings" and sys.path[0] == str(good)
    import importlib

    assert importlib.import_module("eggproj_a.settings").BOT_NAME == "from the egg"
    for entry_points, reason in ((None, "no EGG-INFO/entry_points.txt"), ("[console_scripts]\nx = y\n",
                                 "no \\[scrapy\\] settings entry point"), ("not ini", "unreadable")):
        with pytest.raises(BadEgg, match=reason):
            settings_module(egg(tmp_path / "bad.egg", entry_points, {}))
    (tmp_path / "text.egg").write_text("no zip")
    with pytest.raises(BadEgg, match="not a ZIP file"):
        settings_module(tmp_path / "text.egg")


def test_a_loader_failure_names_its_reason_first() -> None:
    traceback = (b"Traceback (most recent call last):\n  File \"x.py\", line 1\n"
                 b"ModuleNotFoundError: No module named 'q'\n")
    assert loader_failure(1, traceback).startswith(
        "the project's spiders cannot be loaded: ModuleNotFoundError: No module named 'q'\n\nTraceback")
    assert loader_failure(2, b"error: the egg is not a ZIP file\n") == (
        "the project's spiders cannot be loaded: the egg is not a ZIP file")
    assert loader_failure(-9, b"") == "the project's spiders cannot be loaded: exit status -9, no output"


def test_a_deployed_projects_job_runs_its_pinned_egg_in_its_own_directory(tmp_path: Path) -> None:
    job = Job("probe", "p-1", project="shop", version="1.0", egg_sha256="ab" * 32, args={"a": "1"})
    argv = job.crawl_args("/py")
    assert argv[:10] == ["/py", "-m", "spiders.runner", "--project", "shop", "--version", "1.0", "--sha256",
                         "ab" * 32, "crawl"] and argv[10] == "probe" and "a=1" in argv and "_job=p-1" in argv
    installed = Job("list", "l-1")
    assert installed.crawl_args("/py")[:4] == ["/py", "-m", "scrapy", "crawl"] and not installed.deployed
    assert Job.from_json({k: v for k, v in installed.to_json().items() if k not in ("version", "egg_sha256")}) \
        == installed  # a job queued before deployed projects existed still loads
    launcher = Launcher(SimpleNamespace(), SimpleNamespace(), tmp_path / "logs", 1, tmp_path / "repo", 1.0,
                        env={"SCRAPY_SETTINGS_MODULE": "spiders.settings", "X": "1"}, work_dir=tmp_path / "work")
    env, cwd = launcher.environment(job)
    assert "SCRAPY_SETTINGS_MODULE" not in env and env["SCRAPY_PROJECT"] == "shop" and env["X"] == "1"
    assert cwd == tmp_path / "work" / "shop" and cwd.is_dir()
    assert launcher.environment(installed) == (launcher.env, tmp_path / "repo")


@pytest.mark.parametrize(("header", "base"), [(None, ""), (b"/path/to", "/path/to"), (b"/path/to/", "/path/to"),
                                              (b"javascript:alert(1)//", ""), (b"//evil.example", ""),
                                              (b'/a"><script>', ""), (b"/a b", "")])
def test_the_proxy_prefix_is_used_only_when_it_is_a_plain_path(header: bytes | None, base: str) -> None:
    request = SimpleNamespace(getHeader=lambda name: header)
    assert base_path(request) == base
