"""The pages' common ground: the Jinja2 environment (autoescaped), the filters, and :class:`Page`.

A page renders its template with the site's layout (navigation, the one-time status message of a POST, the form
token) and its own context; POSTs need the form token (:class:`manager.security.CsrfToken`).
"""

from __future__ import annotations

import time
import urllib.parse
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from twisted.internet import defer
from twisted.python.failure import Failure
from twisted.web import http, resource, server

from manager.jobs import InvalidJob, iso
from manager.security import CsrfToken
from messaging import spider_types

HERE = Path(__file__).parent
PAGES = ("submit", "spiders", "projects", "jobs", "fleet", "crawls", "schedules", "sites", "stats")
SPIDER_TYPES = spider_types.NAMES


def duration(seconds: float | None) -> str:
    """scrapyd's runtime format, ``str(timedelta)`` without microseconds: ``0:01:05``, ``1 day, 2:00:00``."""
    if seconds is None:
        return ""
    return str(timedelta(seconds=int(seconds)))


def local_time(seconds: float | None) -> str:
    """scrapyd's time format on its pages, ``str(datetime)`` without microseconds, local time."""
    return str(datetime.fromtimestamp(int(seconds))) if seconds else ""


def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True))
    env.filters["iso"] = iso
    env.filters["duration"] = duration
    env.filters["local"] = local_time
    return env


def _form(request: Any, name: str, default: str = "") -> str:
    values = request.args.get(name.encode())
    return values[0].decode("utf-8", "replace").strip() if values else default


def parse_pairs(text: str, what: str) -> dict[str, str]:
    """``name=value`` lines (the *Spiders* form's arguments and settings)."""
    pairs = {}
    for line in text.splitlines():
        if line.strip():
            name, sep, value = line.partition("=")
            if not sep:
                raise InvalidJob(f"{what} {line.strip()!r}: expected name=value")
            pairs[name.strip()] = value.strip()
    return pairs


class Page(resource.Resource):
    """A page: ``context`` (a dict or a Deferred of one) rendered with the page's template; POSTs need the token."""

    isLeaf = True
    template = ""

    def __init__(self, manager: Any, env: Environment, csrf: CsrfToken) -> None:
        super().__init__()
        self.manager, self.env, self.csrf = manager, env, csrf

    def context(self, request: Any) -> Any:
        return {}

    def render_GET(self, request: Any) -> Any:
        return self.show(request, self.context(request))

    def show(self, request: Any, context: Any, code: int = http.OK) -> Any:
        d = defer.maybeDeferred(lambda: context)
        d.addCallback(lambda data: self._write(request, data, code))
        d.addErrback(lambda f: self._write(request, {"error": f.getErrorMessage()}, http.INTERNAL_SERVER_ERROR))
        d.addErrback(lambda _: None)
        return server.NOT_DONE_YET

    def show_detail(self, request: Any, context: defer.Deferred[dict[str, Any]], template: str,
                    missing: type[Exception], what: str) -> Any:
        """A detail view: ``context`` rendered with ``template``; ``missing`` (no such thing) as the 404 page
        saying ``what``, any other failure as an error page."""

        def not_found(failure: Failure) -> None:
            failure.trap(missing)
            self._write(request, {"what": what}, http.NOT_FOUND, "notfound.html")

        context.addCallback(lambda data: self._write(request, data, http.OK, template))
        context.addErrback(not_found)
        context.addErrback(lambda f: self._write(request, {"what": f.getErrorMessage(), "title": "Error"},
                                                 http.INTERNAL_SERVER_ERROR, "notfound.html"))
        context.addErrback(lambda _: None)
        return server.NOT_DONE_YET

    def _write(self, request: Any, data: dict[str, Any], code: int, template: str | None = None) -> None:
        """Render the page's template, or ``template`` (a detail view, a 404) with the page's tab current."""
        m = self.manager
        flash = m.flashes.get(_form(request, "flash"))
        body = self.env.get_template(template or self.template).render(
            page=self.template.removesuffix(".html"), pages=PAGES, node=m.config.node_name, host=m.host,
            csrf=self.csrf.value, message=flash.text if flash else "", level=flash.level if flash else "",
            now=time.time(), **data)
        request.setResponseCode(code)
        request.setHeader(b"content-type", b"text/html; charset=utf-8")
        request.setHeader(b"content-security-policy",
                          b"default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
                          b"frame-ancestors 'none'; form-action 'self'")
        request.setHeader(b"x-frame-options", b"DENY")
        request.setHeader(b"x-content-type-options", b"nosniff")
        request.write(body.encode("utf-8"))
        request.finish()

    def render_POST(self, request: Any) -> Any:
        if not self.csrf.valid(_form(request, "csrf_token") or None):
            request.setResponseCode(http.FORBIDDEN)
            return b"forbidden: the form token is missing or stale (reload the page)\n"
        return self.post(request)

    def post(self, request: Any) -> Any:
        request.setResponseCode(http.NOT_ALLOWED)
        return b"method not allowed\n"

    def redirect(self, request: Any, path: str, message: str, level: str = "ok") -> Any:
        """303 to ``path`` showing ``message`` once: the text stays here, the URL carries only its id (a link
        elsewhere cannot make a page show words of its choosing)."""
        flash = self.manager.flashes.add(message, level)
        joiner = "&" if "?" in path else "?"
        request.redirect(f"{path}{joiner}{urllib.parse.urlencode({'flash': flash})}".encode())
        request.setResponseCode(http.SEE_OTHER)
        request.finish()
        return server.NOT_DONE_YET
