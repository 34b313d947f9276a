"""``/logs/``: the job logs as scrapyd serves them, and the stats LogParser would write beside them.

- Directories (``/logs/``, ``/logs/<project>/``, ``/logs/<project>/<spider>/``) are listed with scrapyd's own
  markup (Twisted's directory lister plus scrapyd's *Last modified* column): the logs of the jobs this manager ran,
  and of the workers ``crawlfleet up`` runs on this host (:mod:`manager.host_fleet`), under the same paths.
- A log (``<job>.log``) is ``text/plain`` with ``nosniff`` (a crawled ``<script>`` stays text), served by Twisted's
  static file resource: ``Range`` requests (Gerapy asks for ``bytes=-1000``), ``HEAD``, streamed, never read whole.
- ``<job>.json``: the job's stats in LogParser's format, ``/logs/stats.json`` every job's summary
  (:mod:`manager.logstats`): what ScrapydWeb's *Stats* page and Jobs dashboard read.

Only names made of safe segments are served: anything else (``..``, encoded slashes, other files) is 404.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from twisted.web import http, resource, server, static
from twisted.web.util import redirectTo

from manager import logstats
from manager.security import SEGMENT, safe_log_file
from manager.webservice import write_json

LISTED_DEPTH = 2  # /logs/<project>/<spider>/ is the deepest directory
TEXT = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class Listed:
    """One entry of a listing: a directory (``name/``) or a file, its size text and modification time."""

    name: str
    is_dir: bool
    size: str
    modified: float


def listed(name: str, path: Path) -> Listed | None:
    try:
        status = path.stat()
    except OSError:  # gone meanwhile
        return None
    is_dir = path.is_dir()
    return Listed(name, is_dir, "" if is_dir else static.formatFileSize(status.st_size), status.st_mtime)


class ScrapydDirectoryLister(static.DirectoryLister):
    """Twisted's lister with scrapyd's template (scrapyd's ``website.DirectoryLister``: a *Last modified* column),
    listing the given entries, wherever (or whatever) they are."""

    template = static.DirectoryLister.template.replace(
        "<th>Size</th>\n", "<th>Size</th>\n            <th>Last modified</th>\n")
    linePattern = static.DirectoryLister.linePattern.replace(
        "<td>%(size)s</td>\n", "<td>%(size)s</td>\n    <td>%(modified)s</td>\n")

    def __init__(self, entries: list[Listed], file_type: str = "text/plain") -> None:
        self.entries = {entry.name: entry for entry in entries}
        super().__init__(".", sorted(self.entries), defaultType=file_type)
        self.file_type = file_type

    def _getFilesAndDirectories(self, directory: Any) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
        dirs: list[dict[str, str]] = []
        files: list[dict[str, str]] = []
        for name in directory:
            entry = self.entries[name]
            modified = datetime.fromtimestamp(entry.modified).strftime("%Y-%m-%d %H:%M")
            if entry.is_dir:
                dirs.append({"text": escape(name) + "/", "href": quote(name, "/") + "/", "size": "",
                             "type": "[Directory]", "encoding": "", "modified": modified})
            else:
                files.append({"text": escape(name), "href": quote(name, "/"), "type": f"[{self.file_type}]",
                              "encoding": "", "size": entry.size, "modified": modified})
        return dirs, files


def not_found(request: Any, what: str = "no such log") -> bytes:
    request.setResponseCode(http.NOT_FOUND)
    request.setHeader(b"content-type", TEXT.encode())
    return f"{what}\n".encode()


class _TextFile(static.File):
    def _rangeToOffsetAndSize(self, start: int | None, end: int | None) -> tuple[int, int]:
        if start is None and end is not None:  # a suffix longer than the file is the whole file (RFC 9110 14.1.1)
            end = min(end, self.getFileSize())
        offset, size = super()._rangeToOffsetAndSize(start, end)
        return offset, size


def serve_text_file(request: Any, path: Path) -> Any:
    """A file as ``text/plain`` (nosniff, no scripts), with ``Range`` and ``HEAD``, streamed."""
    request.setHeader(b"x-content-type-options", b"nosniff")
    request.setHeader(b"content-security-policy", b"default-src 'none'")
    served = _TextFile(str(path), defaultType=TEXT)
    served.type, served.encoding = TEXT, None
    return served.render(request)


class Logs(resource.Resource):
    """``/logs/…``: a listing for a directory, a log, a job's stats JSON, the stats index; 404 for anything else."""

    isLeaf = True

    def __init__(self, manager: Any) -> None:
        super().__init__()
        self.manager = manager
        self.digests = logstats.LogDigests()

    @property
    def logs_dir(self) -> Path:
        return Path(self.manager.config.logs_dir)

    def render_GET(self, request: Any) -> Any:
        segments = [s.decode("utf-8", "replace") for s in request.postpath]
        if not segments:
            return redirectTo(b"/logs/", request)
        if segments[-1] == "":  # a directory: /logs/, /logs/<project>/, /logs/<project>/<spider>/
            entries = self.directory(segments[:-1])
            if entries is None:
                return not_found(request)
            return ScrapydDirectoryLister([e for n, p in entries.items() if (e := listed(n, p))]).render(request)
        if segments == ["stats.json"]:
            return self.respond_json(request, self.manager.in_thread(self.index))
        if len(segments) == 3 and segments[2].endswith(".json") and all(SEGMENT.match(s) for s in segments):
            job = segments[2].removesuffix(".json")
            path = self.manager.job_log(segments[0], segments[1], job)
            if path is None:
                return not_found(request, "no such job")
            return self.respond_json(request, self.manager.in_thread(self.job_stats, segments[0], segments[1],
                                                                      job, path))
        path = safe_log_file(self.logs_dir, segments) if len(segments) == 3 else None
        if path is None and len(segments) == 3 and segments[2].endswith(".log"):
            path = self.manager.job_log(segments[0], segments[1], segments[2].removesuffix(".log"))
        if path is None or not path.is_file():
            return not_found(request)
        return serve_text_file(request, path)

    render_HEAD = render_GET

    # --- listings -------------------------------------------------------------------------------------------------
    def directory(self, segments: list[str]) -> dict[str, Path] | None:
        """The entries of a listed directory (the manager's logs and this host's fleet workers'), or None."""
        if len(segments) > LISTED_DEPTH or not all(SEGMENT.match(s) for s in segments):
            return None
        root = self.logs_dir.resolve()
        root.mkdir(parents=True, exist_ok=True)  # no job yet: an empty listing, not a 404
        here = root.joinpath(*segments).resolve()
        entries: dict[str, Path] = {}
        if here.is_relative_to(root) and here.is_dir():
            for child in sorted(here.iterdir()):
                wanted = child.is_dir() if len(segments) < LISTED_DEPTH else child.is_file() and \
                    child.name.endswith(".log")
                if SEGMENT.match(child.name) and wanted:
                    entries[child.name] = child
        for fleet_job in self.manager.fleet_jobs(alive_only=False):
            log = Path(fleet_job.log_path)
            if not log.is_file():
                continue
            path = [self.manager.project, fleet_job.spider, f"{fleet_job.job}.log"]
            if path[:len(segments)] == segments:
                entries.setdefault(path[len(segments)], log.parent if len(segments) < LISTED_DEPTH else log)
        if not entries and segments and not (here.is_relative_to(root) and here.is_dir()):
            return None
        return entries

    # --- LogParser's files ----------------------------------------------------------------------------------------
    def job_stats(self, project: str, spider: str, job: str, path: Path) -> dict[str, Any]:  # in a thread
        digest = self.digests.read(path)
        json_url = f"{self.manager.config.url}/logs/{project}/{spider}/{job}.json"
        return logstats.logparser_json(digest, log_path=str(path), json_url=json_url, size=path.stat().st_size,
                                       live=self.manager.live_worker(job))

    def index(self) -> dict[str, Any]:  # in a thread
        datas: dict[str, dict[str, dict[str, Any]]] = {}
        for project, spider, job, path in self.manager.job_logs():
            try:
                data = self.job_stats(project, spider, job, path)
            except OSError:  # rotated away meanwhile
                continue
            datas.setdefault(project, {}).setdefault(spider, {})[job] = logstats.summary(data)
        return logstats.index(datas)

    @staticmethod
    def respond_json(request: Any, deferred: Any) -> Any:
        def failed(failure: Any) -> None:
            request.setResponseCode(http.INTERNAL_SERVER_ERROR)
            request.setHeader(b"content-type", TEXT.encode())
            request.write(f"stats unavailable: {failure.getErrorMessage()}\n".encode())
            request.finish()

        deferred.addCallbacks(lambda data: write_json(request, data), failed)
        deferred.addErrback(lambda _: None)  # the client went away
        return server.NOT_DONE_YET
