"""Deployed projects as the manager serves them: scrapyd's egg storage and spider list, for the whole cluster.

Eggs live in MongoDB (:class:`messaging.eggs.EggStorage`), so every manager lists the same projects and versions
and every host can load them; this host loads them through its cache (:class:`messaging.egg_cache.EggCache`,
fetched once per version). A version's spiders are what ``python -m spiders.runner --egg <file> list`` prints: the
project's own spider loader, in a child process with the egg activated (as scrapyd runs ``scrapyd.runner list``),
killed after CRAWLFLEET_EGG_CHECK_TIMEOUT; the answer is kept per egg digest for the manager's life.

:meth:`Projects.add` (``addversion.json``) runs that loader on the upload *before* storing anything, so an egg that
is not a ZIP, has no settings entry point, or whose settings or spiders fail to import is refused with the loader's
reason and nothing is stored; a good one is stored (file, then its version document) and kept in this host's cache.
Every blocking call runs in a thread; every method returns a Deferred.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from twisted.internet import defer

from messaging.egg_cache import EggCache, settings_module
from messaging.eggs import EggError, EggInfo, EggStorage, InvalidName, check_project, check_version

RUNNER = "spiders.runner"  # run as a program, never imported: the manager does not import spider code
STDERR_TAIL = 3000


class SpiderListFailed(EggError):
    """The project's spider loader failed on an egg (the message carries its reason and the end of its stderr)."""


class Reserved(EggError):
    pass


def loader_failure(returncode: int, stderr: bytes) -> str:
    """The reason a listing failed: the runner's ``error:`` line or the exception that ended the traceback, then
    the end of stderr (scrapyd answers with all of it)."""
    text = stderr.decode("utf-8", "replace").strip()
    lines = [line for line in text.splitlines() if line.strip()]
    last = lines[-1].strip() if lines else f"exit status {returncode}, no output"
    reason = last.removeprefix("error: ")
    tail = text[-STDERR_TAIL:]
    return f"the project's spiders cannot be loaded: {reason}" + (f"\n\n{tail}" if tail and tail != last else "")


def list_spiders(egg: Path, env: dict[str, str], cwd: Path, timeout: float) -> list[str]:
    """The spiders of an egg, listed by its own spider loader in a child process (blocking)."""
    argv = [sys.executable, "-m", RUNNER, "--egg", str(egg), "list", "-s", "LOG_STDOUT=0"]
    cwd.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(argv, capture_output=True, env=env, cwd=cwd, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise SpiderListFailed(f"the project's spider loader did not answer within {timeout:g} s "
                               "(CRAWLFLEET_EGG_CHECK_TIMEOUT)") from exc
    if done.returncode != 0:
        raise SpiderListFailed(loader_failure(done.returncode, done.stderr or done.stdout))
    return [line.strip() for line in done.stdout.decode("utf-8", "replace").splitlines() if line.strip()]


def check_upload(project: str, version: str, egg: bytes, max_bytes: int) -> None:
    check_project(project)
    check_version(version)
    if len(egg) > max_bytes:
        raise InvalidName(f"egg is {len(egg)} bytes, more than CRAWLFLEET_EGG_MAX_BYTES ({max_bytes})")
    if not zipfile.is_zipfile(io.BytesIO(egg)):
        raise InvalidName("egg is not a ZIP file (if using curl, use egg=@path not egg=path)")


class Projects:
    """The deployed projects (``builtin``, the installed project, is never one of them)."""

    def __init__(self, settings: Any, mongo_db: Callable[[], Any], env: dict[str, str], work_dir: Path,
                 builtin: str, in_thread: Callable[..., defer.Deferred[Any]]) -> None:
        self.settings = settings
        self._mongo_db = mongo_db
        self.env = {k: v for k, v in env.items() if k != "SCRAPY_SETTINGS_MODULE"}  # the egg names its own
        self.work_dir = work_dir
        self.builtin = builtin
        self.in_thread = in_thread
        self._storage: EggStorage | None = None
        self._cache: EggCache | None = None
        self._spiders: dict[str, list[str]] = {}  # egg digest -> its spiders
        self._listing: dict[str, list[defer.Deferred[list[str]]]] = {}  # digest -> who waits for its list

    @property
    def storage(self) -> EggStorage:
        if self._storage is None:
            self._storage = EggStorage(self._mongo_db(), self.settings.eggs_collection)
        return self._storage

    @property
    def cache(self) -> EggCache:
        if self._cache is None:
            directory = self.settings.egg_cache_dir or Path(self.settings.run_dir) / "eggs"
            self._cache = EggCache(directory, self.storage)
        return self._cache

    # --- reads ---------------------------------------------------------------------------------------------------
    def names(self) -> defer.Deferred[list[str]]:
        return self.in_thread(lambda: self.storage.projects())

    def exists(self, project: str) -> defer.Deferred[bool]:
        """Whether the project is deployed (a name that is not a valid one never is)."""
        try:
            check_project(project)
        except EggError:
            return defer.succeed(False)
        return self.in_thread(lambda: bool(self.storage.versions(project)))

    def versions(self, project: str) -> defer.Deferred[list[str]]:
        return self.in_thread(self.storage.versions, project)

    def infos(self, project: str | None = None) -> defer.Deferred[dict[str, list[EggInfo]]]:
        """The versions of the project (default: of every project), by project."""
        return self.in_thread(self.storage.infos, project)

    def resolve(self, project: str, version: str | None = None) -> defer.Deferred[EggInfo]:
        """The version (default: the latest): ProjectNotFound / VersionNotFound otherwise."""
        return self.in_thread(self.storage.get, project, version)

    def spiders(self, info: EggInfo) -> defer.Deferred[list[str]]:
        """The version's spiders: its egg fetched into this host's cache once, listed by its loader once."""
        if info.sha256 in self._spiders:
            return defer.succeed(list(self._spiders[info.sha256]))
        waiter: defer.Deferred[list[str]] = defer.Deferred()
        waiting = self._listing.setdefault(info.sha256, [])
        waiting.append(waiter)
        if len(waiting) == 1:  # the first asker lists; the others wait for its answer
            timeout = float(self.settings.egg_check_timeout)

            def fetch_and_list() -> list[str]:
                return list_spiders(self.cache.fetch(info), self.env, self.work_dir, timeout)

            self.in_thread(fetch_and_list).addBoth(self._listed, info.sha256)
        return waiter

    def _listed(self, result: Any, sha: str) -> None:
        if isinstance(result, list):
            self._spiders[sha] = result
        for waiter in self._listing.pop(sha, []):
            if isinstance(result, list):
                waiter.callback(list(result))
            else:
                waiter.errback(result)

    # --- writes --------------------------------------------------------------------------------------------------
    def add(self, project: str, version: str, egg: bytes) -> defer.Deferred[tuple[EggInfo, list[str]]]:
        """Check the egg with its own spider loader, then store it; nothing is stored when the check fails."""
        try:
            check_upload(project, version, egg, int(self.settings.egg_max_bytes))
            if project == self.builtin:
                raise Reserved(f"the {self.builtin} project is installed on the host, not deployed as eggs: "
                               "deploy under another project name")
        except EggError as exc:
            return defer.fail(exc)
        return self.in_thread(self._check_and_store, project, version, egg)

    def _check_and_store(self, project: str, version: str, egg: bytes) -> tuple[EggInfo, list[str]]:
        uploads = self.work_dir / ".uploads"
        uploads.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=uploads, prefix=f"{project}-", suffix=".egg") as tmp:
            tmp.write(egg)
            tmp.flush()
            settings_module(tmp.name)  # no entry point: refused before a process starts
            spiders = list_spiders(Path(tmp.name), self.env, self.work_dir,
                                   float(self.settings.egg_check_timeout))
        info = self.storage.put(project, version, egg)
        self._spiders[info.sha256] = spiders
        try:
            self.cache.put(info, egg)
        except OSError:  # a full disk here: the egg is stored, this host fetches it when it needs it
            pass
        return info, spiders

    def delete(self, project: str, version: str | None = None) -> defer.Deferred[list[EggInfo]]:
        """Delete a version or the whole project (ProjectNotFound / VersionNotFound when there is none)."""

        def delete() -> list[EggInfo]:
            deleted = self.storage.delete(project, version)
            for info in deleted:
                self._spiders.pop(info.sha256, None)
            return deleted

        return self.in_thread(delete)
