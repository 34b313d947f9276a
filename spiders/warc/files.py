"""WARC files of one worker: named, rotated at a size, each indexed (CDXJ) when it is closed.

:class:`RotatingWarcFiles` is plain synchronous code (the writer thread of ``writer.py`` owns it): records go
through warcio's :class:`~warcio.warcwriter.WARCWriter` with ``gzip=True`` (one gzip member per record, so a replay
tool can seek to any record), a ``warcinfo`` record opens every file, and after each record the file's size is
checked: at ``max_size`` bytes or more the file is closed, so a file ends within one record of the limit.
A closed file is renamed from ``….warc.gz.open`` to ``….warc.gz`` (readers never see half a file) and indexed by
cdxj-indexer into ``….cdxj`` beside it, in a child process (re-reading a file costs about a millisecond a page:
not the worker's CPU, nor its GIL).

Names: ``<prefix>-<timestamp>-<serial>-<job>.warc.gz``, the timestamp the file's opening (UTC, to the
millisecond, ``20260314080102123``), the serial counting this writer's files from 00000.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from warcio.warcwriter import WARCWriter

__all__ = ["RotatingWarcFiles", "index_file", "warc_name"]

logger = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9._@-]+")


def warc_name(prefix: str, opened: datetime, serial: int, job: str) -> str:
    stamp = opened.strftime("%Y%m%d%H%M%S") + f"{opened.microsecond // 1000:03d}"
    return f"{_UNSAFE.sub('_', prefix)}-{stamp}-{serial:05d}-{_UNSAFE.sub('_', job)}.warc.gz"


def index_file(path: Path) -> subprocess.Popen[bytes]:
    """Start cdxj-indexer on a closed WARC file, writing ``name.cdxj`` beside it (sorted, requests appended to
    their responses) through ``name.cdxj.open``: a child process, so re-reading the file costs the worker no
    CPU time or GIL. :meth:`RotatingWarcFiles.wait_indexes` waits for them and moves each index into place."""
    target = path.with_name(path.name.removesuffix(".warc.gz") + ".cdxj")
    partial = target.with_name(target.name + ".open")
    return subprocess.Popen([sys.executable, "-m", "cdxj_indexer.main", "--sort", "--post-append",
                             "-o", str(partial), str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


class RotatingWarcFiles:
    """Writes warcio records to the current file, opening, closing and indexing files as they fill."""

    def __init__(self, directory: str | Path, job: str, prefix: str = "crawlfleet", max_size: int = 10**9,
                 info: dict[str, str] | None = None, clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 index: Callable[[Path], Any] | None = index_file) -> None:
        if max_size <= 0:
            raise ValueError(f"max_size must be positive, not {max_size}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.job, self.prefix, self.max_size = job, prefix, max_size
        self.info = dict(info or {})
        self.clock = clock
        self.index = index
        self.serial = 0
        self.closed_files: list[Path] = []
        self.indexing: list[tuple[Path, Any]] = []  # (WARC file, its indexer process) not yet waited for
        self.index_failures = 0
        self._file: Any = None
        self._path: Path | None = None
        self._writer: WARCWriter | None = None

    @property
    def writer(self) -> WARCWriter:
        """The warcio writer of the current file (opened when needed): build records with it."""
        if self._writer is None:
            self._open()
        assert self._writer is not None
        return self._writer

    def _open(self) -> None:
        name = warc_name(self.prefix, self.clock(), self.serial, self.job)
        self.serial += 1
        self._path = self.directory / name
        self._file = open(self._path.with_name(name + ".open"), "wb")  # noqa: SIM115 - closed in close()
        self._writer = WARCWriter(self._file, gzip=True, warc_version="1.1")
        self._writer.write_record(self._writer.create_warcinfo_record(name, {
            "software": "crawlfleet (warcio)", "format": "WARC File Format 1.1", **self.info}))

    def write(self, *records: Any) -> None:
        """Write records (made with :attr:`writer`) one after the other; rotate once the file is full."""
        writer = self.writer
        for record in records:
            writer.write_record(record)
        if self._file.tell() >= self.max_size:
            self.close()

    @property
    def current_size(self) -> int:
        return self._file.tell() if self._file is not None else 0

    def close(self) -> None:
        """Close the current file (if any), move it to its final name and index it."""
        if self._file is None:
            return
        self._file.close()
        assert self._path is not None
        os.replace(self._path.with_name(self._path.name + ".open"), self._path)
        path = self._path
        self._file = self._writer = self._path = None
        self.closed_files.append(path)
        if self.index is not None:
            self.indexing.append((path, self.index(path)))
            self._reap(wait=False)

    def wait_indexes(self, timeout: float = 600.0) -> None:
        """Wait for the indexers still running (at the writer's close)."""
        self._reap(wait=True, timeout=timeout)

    def _reap(self, wait: bool, timeout: float = 600.0) -> None:
        running = []
        for path, process in self.indexing:
            if wait:
                try:
                    process.wait(timeout)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            if process.poll() is None:
                running.append((path, process))
                continue
            stem = path.name.removesuffix(".warc.gz")
            partial = path.with_name(stem + ".cdxj.open")
            errors = process.stderr.read().decode(errors="replace") if process.stderr else ""
            if process.stderr:
                process.stderr.close()
            if process.returncode == 0 and partial.exists():
                os.replace(partial, path.with_name(stem + ".cdxj"))
            else:
                self.index_failures += 1
                logger.error("CDXJ index of %s failed (exit %s): %s", path, process.returncode, errors[-500:])
        self.indexing = running
