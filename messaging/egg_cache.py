"""A host's egg cache: each deployed version fetched from the egg storage once, checked by its digest, activated.

Whatever runs a deployed project's code on a host — the manager listing its spiders, a job's process, a fleet
worker of its crawl — asks :meth:`EggCache.path` for (project, version, digest) and gets a local file:
``<CRAWLFLEET_EGG_CACHE_DIR>/<project>/<version>-<sha256>.egg`` (the version's unsafe characters replaced, as
scrapyd names its egg files; the digest makes the name unique). The version's document is read on every call (one
small query), so a version deleted or deployed again since a job was scheduled is refused the same way on every
host, cached or not; the bytes are downloaded only when the file is missing or does not match its digest, under a
lock per file so that the processes of one host download it once, and written to a temporary file renamed into
place, so no process ever loads half an egg. Files are never removed while the host runs: a running process may
import from its egg long after it started, even after its version was deleted (``zipimport`` reopens the file).

:func:`activate` does what scrapyd's runner does with ``pkg_resources`` (deprecated), with the standard library:
the egg goes first on ``sys.path`` (``zipimport``) and its ``[scrapy] settings`` entry point names the settings
module.
"""

from __future__ import annotations

import configparser
import contextlib
import fcntl
import hashlib
import os
import re
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from messaging.eggs import EggError, EggInfo, EggStorage, check_project

UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
CHUNK = 1 << 20


class EggChanged(EggError):
    """The version was deployed again (another digest) after the job that pinned it was scheduled."""


class BadEgg(EggError):
    pass


def file_digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            sha.update(chunk)
    return sha.hexdigest()


def write_atomically(target: Path, data: bytes) -> None:
    """``data`` at ``target``, all or nothing: a temporary file beside it, synced, then renamed into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".egg", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class EggCache:
    def __init__(self, directory: Path | str, storage: EggStorage) -> None:
        self.directory = Path(directory)
        self.storage = storage

    def file_for(self, info: EggInfo) -> Path:
        version = UNSAFE.sub("_", info.version)[:64]
        return self.directory / check_project(info.project) / f"{version}-{info.sha256}.egg"

    def path(self, project: str, version: str | None = None, sha256: str | None = None) -> Path:
        """The local file of the version (default: the latest), fetched if needed. With ``sha256`` (a job's pinned
        digest) a version deployed again since is refused (:class:`EggChanged`); a deleted one raises
        :class:`~messaging.eggs.VersionNotFound`."""
        info = self.storage.get(project, version)
        if sha256 is not None and info.sha256 != sha256:
            raise EggChanged(f"version '{info.version}' of project '{project}' was deployed again since the job was "
                             f"scheduled (sha256 {info.sha256[:12]}…, the job's {sha256[:12]}…): schedule it again")
        return self.fetch(info)

    def fetch(self, info: EggInfo) -> Path:
        target = self.file_for(info)
        if self._valid(target, info):
            return target
        with self._locked(target):
            if not self._valid(target, info):  # another process of this host may have fetched it meanwhile
                write_atomically(target, self.storage.read(info))
        return target

    def put(self, info: EggInfo, data: bytes) -> Path:
        """Keep bytes at hand (the egg a manager has just stored) so that this host never downloads them."""
        target = self.file_for(info)
        with self._locked(target):
            if not self._valid(target, info):
                write_atomically(target, data)
        return target

    @staticmethod
    def _valid(path: Path, info: EggInfo) -> bool:
        try:
            return path.stat().st_size == info.size and file_digest(path) == info.sha256
        except FileNotFoundError:
            return False

    @contextlib.contextmanager
    def _locked(self, target: Path) -> Iterator[None]:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.with_name(target.name + ".lock"), "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def open_cache(settings: Any) -> tuple[EggCache, Any]:
    """The host's cache on the configured storage, and the MongoDB client to close when done."""
    from messaging import clients

    client = clients.mongo_client(settings, serverSelectionTimeoutMS=10000)
    storage = EggStorage(client[settings.mongo_db], settings.eggs_collection)
    return EggCache(settings.egg_cache_dir or Path(settings.run_dir) / "eggs", storage), client


def settings_module(path: Path | str) -> str:
    """The egg's Scrapy settings module: its ``[scrapy] settings`` entry point (scrapyd-deploy writes it)."""
    try:
        with zipfile.ZipFile(path) as egg:
            text = egg.read("EGG-INFO/entry_points.txt").decode("utf-8")
    except zipfile.BadZipFile as exc:
        raise BadEgg("the egg is not a ZIP file") from exc
    except KeyError as exc:
        raise BadEgg("the egg has no EGG-INFO/entry_points.txt: build it with scrapyd-deploy (or setup.py "
                     "bdist_egg with entry_points={'scrapy': ['settings = <project>.settings']})") from exc
    parser = configparser.ConfigParser()
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        raise BadEgg(f"the egg's EGG-INFO/entry_points.txt is unreadable: {exc}") from exc
    module = parser.get("scrapy", "settings", fallback="").partition(":")[0].strip()
    if not module:
        raise BadEgg("the egg's EGG-INFO/entry_points.txt has no [scrapy] settings entry point (scrapyd-deploy "
                     "writes 'settings = <project>.settings')")
    return module


def activate(path: Path | str) -> str:
    """Put the egg first on ``sys.path`` and return its settings module (scrapyd's ``activate_egg``)."""
    module = settings_module(path)
    sys.path.insert(0, str(path))
    return module
