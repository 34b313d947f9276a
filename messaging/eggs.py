"""Deployed Scrapy projects: their eggs, one per (project, version), in MongoDB where every host can load them.

scrapyd keeps eggs on one host's disk (``eggs/<project>/<version>.egg``); a fleet needs them wherever a manager
lists a project's spiders or a worker runs one. Here an egg is a GridFS file of the bucket
CRAWLFLEET_EGGS_COLLECTION (``_eggs.files``, ``_eggs.chunks`` in CRAWLFLEET_MONGO_DB; a crawl's items collection
starts with a letter or digit, so the names never meet), and each version is one small document of
``<bucket>.versions`` — project, version, SHA-256, size, upload time and the GridFS file's id — unique on
(project, version), so listings read only those documents.

A version is stored in two steps, the file and then its document (the commit point): a version is visible only
once both exist, a failed upload removes its file, and a version deployed again under the same name replaces the
document atomically before the file it pointed to is deleted. A project exists while it has a version, as in
scrapyd (deleting its last version deletes it).

Names are checked as scrapyd checks them, strictly: a project name becomes a path segment (logs, the hosts' egg
cache), so a separator or a dot name is a :class:`DirectoryTraversalError` (scrapyd's error), and any other name
outside letters, digits, ``.``, ``_`` and ``-`` an :class:`InvalidName`. A version is never a path (the cache names
files by digest), so it only has to be printable; versions sort as scrapyd sorts them (:func:`sorted_versions`).
"""

from __future__ import annotations

import hashlib
import re
import time
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

PROJECT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
MAX_VERSION_LENGTH = 200


class EggError(ValueError):
    """A project, version or egg that cannot be stored or loaded; the message says why."""


class DirectoryTraversalError(EggError):
    """A project name that would leave its directory (scrapyd's name and message: ``DirectoryTraversalError: ../p``)."""


class InvalidName(EggError):
    pass


class ProjectNotFound(EggError):
    def __init__(self, project: str) -> None:
        super().__init__(f"project '{project}' not found")


class VersionNotFound(EggError):
    def __init__(self, project: str, version: str) -> None:
        super().__init__(f"version '{version}' not found")
        self.project = project


class StorageUnavailable(RuntimeError):
    """MongoDB did not answer: nothing was stored or deleted."""


def check_project(name: str) -> str:
    if name in (".", "..") or any(sep in name for sep in ("/", "\\", "\0")):
        raise DirectoryTraversalError(name)
    if not PROJECT_NAME.match(name):
        raise InvalidName(f"project name {name!r} is invalid: letters, digits, '.', '_' and '-', starting with a "
                          "letter or digit, at most 128")
    return name


def check_version(version: str) -> str:
    if not version or len(version) > MAX_VERSION_LENGTH:
        raise InvalidName(f"version {version[:40]!r} is invalid: 1 to {MAX_VERSION_LENGTH} characters")
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in version):
        raise InvalidName(f"version {version!r} is invalid: control characters")
    return version


def sorted_versions(versions: Iterable[str]) -> list[str]:
    """scrapyd's order (1.6, ``eggstorage.sorted_versions``): by PEP 440 when every version is one (``2.0`` before
    ``10.0``, ``1699999999`` timestamps by value), else as strings. The last one is the latest."""
    versions = list(versions)
    try:
        return sorted(versions, key=Version)
    except InvalidVersion:
        return sorted(versions)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class EggInfo:
    project: str
    version: str
    sha256: str
    size: int
    uploaded: float
    file_id: Any = None

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> EggInfo:
        return cls(doc["project"], doc["version"], doc["sha256"], int(doc["size"]), float(doc["uploaded"]),
                   doc["file_id"])

    def to_json(self) -> dict[str, Any]:
        return {"project": self.project, "version": self.version, "sha256": self.sha256, "size": self.size,
                "uploaded": self.uploaded}


def _mongo_errors() -> tuple[type[BaseException], ...]:
    from pymongo.errors import ConnectionFailure, OperationFailure

    return ConnectionFailure, OperationFailure


class EggStorage:
    """The eggs of every project, in one MongoDB database (``db``: a pymongo ``Database``). Blocking: call it
    from a thread in the manager. Every MongoDB failure is raised as :class:`StorageUnavailable`."""

    def __init__(self, db: Any, bucket: str = "_eggs", clock: Any = time.time) -> None:
        import gridfs

        self.db = db
        self.files = gridfs.GridFSBucket(db, bucket_name=bucket)
        self.versions_collection = db[f"{bucket}.versions"]
        self.clock = clock
        self._indexed = False

    def _call(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        from pymongo.errors import DuplicateKeyError

        try:
            if not self._indexed:
                self.versions_collection.create_index([("project", 1), ("version", 1)], unique=True)
                self._indexed = True
            return function(*args, **kwargs)
        except DuplicateKeyError:
            raise
        except _mongo_errors() as exc:
            raise StorageUnavailable(f"the egg storage (MongoDB) failed: {exc}") from exc

    # --- reads -----------------------------------------------------------------------------------------------------
    def projects(self) -> list[str]:
        return sorted(self._call(self.versions_collection.distinct, "project"))

    def versions(self, project: str) -> list[str]:
        check_project(project)
        docs = self._call(lambda: list(self.versions_collection.find({"project": project}, {"version": 1})))
        return sorted_versions(doc["version"] for doc in docs)

    def infos(self, project: str | None = None) -> dict[str, list[EggInfo]]:
        """Every version of the project (default: of every project) in :func:`sorted_versions` order, by project."""
        where = {} if project is None else {"project": check_project(project)}
        by_project: dict[str, dict[str, EggInfo]] = {}
        for doc in self._call(lambda: list(self.versions_collection.find(where))):
            by_project.setdefault(doc["project"], {})[doc["version"]] = EggInfo.from_doc(doc)
        return {name: [versions[v] for v in sorted_versions(versions)]
                for name, versions in sorted(by_project.items())}

    def get(self, project: str, version: str | None = None) -> EggInfo:
        """The version (default: the latest); :class:`ProjectNotFound` or :class:`VersionNotFound` otherwise."""
        check_project(project)
        if version is None:
            versions = self.versions(project)
            if not versions:
                raise ProjectNotFound(project)
            version = versions[-1]
        doc = self._call(self.versions_collection.find_one, {"project": project, "version": version})
        if doc is None:
            raise VersionNotFound(project, version)
        return EggInfo.from_doc(doc)

    def read(self, info: EggInfo) -> bytes:
        """The egg's bytes, checked against the digest stored with them."""
        from gridfs.errors import NoFile

        try:
            data: bytes = self._call(lambda: self.files.open_download_stream(info.file_id).read())
        except NoFile as exc:  # deleted (or replaced) between the version's document and now
            raise VersionNotFound(info.project, info.version) from exc
        if digest(data) != info.sha256:
            raise EggError(f"the egg of {info.project} {info.version} read from MongoDB does not match its digest")
        return data

    # --- writes ----------------------------------------------------------------------------------------------------
    def put(self, project: str, version: str, data: bytes) -> EggInfo:
        """Store (or replace) a version: the file first, then the document that makes it visible."""
        check_project(project)
        check_version(version)
        sha = digest(data)
        file_id = self._call(self.files.upload_from_stream, f"{project}/{version}.egg", data,
                             metadata={"project": project, "version": version, "sha256": sha})
        info = EggInfo(project, version, sha, len(data), self.clock(), file_id)
        doc = {"project": project, "version": version, "sha256": sha, "size": len(data),
               "uploaded": info.uploaded, "file_id": file_id}
        try:
            previous = self._replace(doc)
        except BaseException:
            self._forget_file(file_id)
            raise
        if previous is not None and previous["file_id"] != file_id:
            self._forget_file(previous["file_id"])
        return info

    def _replace(self, doc: dict[str, Any]) -> dict[str, Any] | None:
        from pymongo.errors import DuplicateKeyError

        where = {"project": doc["project"], "version": doc["version"]}
        previous: dict[str, Any] | None
        try:
            previous = self._call(self.versions_collection.find_one_and_replace, where, doc, upsert=True)
        except DuplicateKeyError:  # the same new version stored by another manager at the same moment: replace it
            previous = self._call(self.versions_collection.find_one_and_replace, where, doc, upsert=True)
        return previous

    def delete(self, project: str, version: str | None = None) -> list[EggInfo]:
        """Delete a version, or every version of the project; the deleted ones are returned."""
        check_project(project)
        if version is not None:
            doc = self._call(self.versions_collection.find_one_and_delete, {"project": project, "version": version})
            if doc is None:
                raise VersionNotFound(project, version)
            docs = [doc]
        else:
            docs = self._call(lambda: list(self.versions_collection.find({"project": project})))
            if not docs:
                raise ProjectNotFound(project)
            self._call(self.versions_collection.delete_many, {"_id": {"$in": [doc["_id"] for doc in docs]}})
        for doc in docs:
            self._forget_file(doc["file_id"])
        return [EggInfo.from_doc(doc) for doc in docs]

    def _forget_file(self, file_id: Any) -> None:
        """Delete a file no document points to (any more); a failure leaves an unreachable file, never a version."""
        from gridfs.errors import NoFile

        try:
            self._call(self.files.delete, file_id)
        except (NoFile, StorageUnavailable):
            pass
