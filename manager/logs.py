"""``/logs/``: the job logs as scrapyd serves them, so that tools which read scrapyd's pages work unchanged.

Directories (``/logs/``, ``/logs/<project>/``, ``/logs/<project>/<spider>/``) are listed with scrapyd's own
markup (Twisted's directory lister plus scrapyd's *Last modified* column); a log file is ``text/plain`` with
``nosniff`` (a crawled ``<script>`` stays text). Only names made of safe segments inside the logs directory are
served: anything else (``..``, encoded slashes, other files) is 404.
"""

from __future__ import annotations

from datetime import datetime
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from twisted.web import http, resource, static
from twisted.web.util import redirectTo

from manager.security import SEGMENT, safe_log_file

LISTED_DEPTH = 2  # /logs/<project>/<spider>/ is the deepest directory


class ScrapydDirectoryLister(static.DirectoryLister):
    """Twisted's lister with scrapyd's template (scrapyd's ``website.DirectoryLister``: a *Last modified* column)."""

    template = static.DirectoryLister.template.replace(
        "<th>Size</th>\n", "<th>Size</th>\n            <th>Last modified</th>\n")
    linePattern = static.DirectoryLister.linePattern.replace(
        "<td>%(size)s</td>\n", "<td>%(size)s</td>\n    <td>%(modified)s</td>\n")

    def _getFilesAndDirectories(self, directory: Any) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
        dirs: list[dict[str, str]] = []
        files: list[dict[str, str]] = []
        for name in directory:
            name = name.decode() if isinstance(name, bytes) else name
            child = Path(self.path) / name
            modified = datetime.fromtimestamp(child.stat().st_mtime).strftime("%Y-%m-%d %H:%M")
            if child.is_dir():
                dirs.append({"text": escape(name) + "/", "href": quote(name, "/") + "/", "size": "",
                             "type": "[Directory]", "encoding": "", "modified": modified})
            else:
                files.append({"text": escape(name), "href": quote(name, "/"), "type": "[text/plain]",
                              "encoding": "", "size": static.formatFileSize(child.stat().st_size),
                              "modified": modified})
        return dirs, files


def listed_names(directory: Path, depth: int) -> list[str]:
    """The entries a listing shows: safe names; directories above the files' level, ``.log`` files at it."""
    names = []
    for child in sorted(directory.iterdir()):
        if not SEGMENT.match(child.name):
            continue
        if (depth < LISTED_DEPTH and child.is_dir()) or (depth == LISTED_DEPTH and child.name.endswith(".log")
                                                         and child.is_file()):
            names.append(child.name)
    return names


def safe_log_dir(logs_dir: Path, segments: list[str]) -> Path | None:
    """The directory named by up to two safe segments inside ``logs_dir``, or None."""
    if len(segments) > LISTED_DEPTH or not all(SEGMENT.match(s) for s in segments):
        return None
    root = logs_dir.resolve()
    path = root.joinpath(*segments).resolve()
    return path if path.is_relative_to(root) and path.is_dir() else None


class Logs(resource.Resource):
    """``/logs/…``: a listing for a directory, the text of a log file, 404 for anything else."""

    isLeaf = True

    def __init__(self, logs_dir: Path) -> None:
        super().__init__()
        self.logs_dir = logs_dir

    def render_GET(self, request: Any) -> Any:
        segments = [s.decode("utf-8", "replace") for s in request.postpath]
        if not segments:
            return redirectTo(b"/logs/", request)
        if segments[-1] == "":  # a directory: /logs/, /logs/<project>/, /logs/<project>/<spider>/
            if segments == [""]:
                self.logs_dir.mkdir(parents=True, exist_ok=True)  # no job yet: an empty listing, not a 404
            directory = safe_log_dir(self.logs_dir, segments[:-1])
            if directory is None:
                return self._not_found(request)
            names = listed_names(directory, len(segments) - 1)
            return ScrapydDirectoryLister(str(directory), names, defaultType="text/plain").render(request)
        path = safe_log_file(self.logs_dir, segments)
        if path is None:
            return self._not_found(request)
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        request.setHeader(b"x-content-type-options", b"nosniff")
        request.setHeader(b"content-security-policy", b"default-src 'none'")
        return path.read_bytes()

    @staticmethod
    def _not_found(request: Any) -> bytes:
        request.setResponseCode(http.NOT_FOUND)
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        return b"no such log\n"
