"""The manager's pages (seed 5.3, figs. 5-6 to 5-8), server-rendered with Jinja2 (autoescaped), and the site's root.

*Submit* (a crawl request: URL, rule, depth, priority, spider type, cookie; the rule is checked by
``/api/crawl?check=1`` before it is sent), *Spiders* (start a spider on any manager of the cluster: the host list
comes from the manager registry and a start on another host is forwarded to its ``schedule.json``), *Jobs*
(pending / running / finished, runtime, log link, Stop), *Crawls* (each crawl's progress, one crawl's latest items,
Stop) and *Stats* (live charts from ``/api/stats``, drawn with the vendored uPlot). Every page POST carries the form
token (:class:`manager.security.CsrfToken`); :class:`ManagerSite` refuses cross-site and rebinding requests before any
resource sees them. Logs are served as ``text/plain`` with ``nosniff`` (a crawled ``<script>`` stays text).
"""

from __future__ import annotations

import base64
import json
import logging
import time
import urllib.parse
import urllib.request
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from twisted.internet import defer
from twisted.web import http, resource, server, static
from twisted.web.util import Redirect

from manager import console, console_data, fleet, sites
from manager.api import api_root
from manager.jobs import InvalidJob, iso
from manager.logs import Logs
from manager.metrics import MetricsResource
from manager.registry import ManagerRegistry
from manager.security import CsrfToken, cross_site_reason, host_allowed, with_basic_auth
from manager.webservice import SCRAPYD_RESOURCES, ApiError, job_from_request
from messaging import clients

logger = logging.getLogger(__name__)
HERE = Path(__file__).parent
PAGES = ("submit", "spiders", "jobs", "fleet", "crawls", "sites", "stats")
SPIDER_TYPES = ("list", "universal")


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

    def _write(self, request: Any, data: dict[str, Any], code: int) -> None:
        m = self.manager
        flash = m.flashes.get(_form(request, "flash"))
        body = self.env.get_template(self.template).render(
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


class SubmitPage(Page):
    template = "submit.html"

    def context(self, request: Any) -> Any:
        return {"form": {}, "spider_types": SPIDER_TYPES, "answer": None}

    def post(self, request: Any) -> Any:
        form = {name: _form(request, name) for name in
                ("url", "spider_type", "rule", "maxdepth", "priority", "cookie", "crawlid", "userid")}
        message: dict[str, Any] = {"url": form["url"], "spider_type": form["spider_type"],
                                   "crawlid": form["crawlid"] or f"crawl-{uuid.uuid4().hex[:10]}",
                                   "userid": form["userid"] or "manager"}
        try:
            message["rule"] = json.loads(form["rule"] or "null")
            for name in ("maxdepth", "priority"):
                if form[name]:
                    message[name] = int(form[name])
        except ValueError as exc:
            answer = {"status": "rejected", "reason": f"the rule or a number is not valid: {exc}"}
            return self.show(request, {"form": form, "spider_types": SPIDER_TYPES, "answer": answer})
        if form["cookie"]:
            message["cookie"] = form["cookie"]
        d = self.manager.in_thread(self.manager.gateway.ask, message, "crawl")
        d.addCallback(lambda answer: {"form": form, "spider_types": SPIDER_TYPES,
                                      "answer": {**answer, "crawlid": message["crawlid"]}})
        return self.show(request, d)


class SpidersPage(Page):
    template = "spiders.html"

    def context(self, request: Any) -> Any:
        def managers() -> list[dict[str, Any]]:
            try:
                return [m.to_json() for m in ManagerRegistry(self.manager.redis,
                                                                   self.manager.config.registry_ttl).live()]
            except Exception as exc:  # Redis away: this host alone
                logger.warning("manager registry unreadable: %s", exc)
                return []

        d = defer.gatherResults([self.manager.catalog.get(), self.manager.in_thread(managers)])
        d.addCallback(lambda results: {"spiders": results[0], "managers": results[1] or [
            {"host": self.manager.host, "url": self.manager.config.url}]})
        return d

    def post(self, request: Any) -> Any:
        host = _form(request, "host") or self.manager.host
        try:
            args = parse_pairs(_form(request, "arguments"), "argument")
            settings = parse_pairs(_form(request, "settings"), "setting")
        except InvalidJob as exc:
            return self.redirect(request, "/spiders", f"not started: {exc}", "error")
        request.args = {**{k.encode(): [v.encode()] for k, v in args.items()},  # reserved names come after
                        b"project": [self.manager.project.encode()], b"spider": [_form(request, "spider").encode()],
                        b"priority": [(_form(request, "priority") or "0").encode()],
                        b"setting": [f"{k}={v}".encode() for k, v in settings.items()]}
        if host != self.manager.host:
            d = self.manager.in_thread(self._forward, host, request.args)
        else:
            try:
                d = self.manager.schedule(job_from_request(request, self.manager))
            except (ApiError, InvalidJob) as exc:
                d = defer.fail(exc)
        d.addCallbacks(lambda job: self.redirect(request, "/jobs", f"started {job} on {host}"),
                       lambda f: self.redirect(request, "/spiders", f"not started on {host}: {f.getErrorMessage()}",
                                               "error"))
        return server.NOT_DONE_YET

    def _forward(self, host: str, args: dict[bytes, list[bytes]]) -> str:
        """Start the job on another manager of the cluster through its scrapyd API (same credentials)."""
        url = ManagerRegistry(self.manager.redis, self.manager.config.registry_ttl).url_of(host)
        if url is None:
            raise ApiError(f"no manager registered as {host!r}")
        body = urllib.parse.urlencode([(k.decode(), v.decode()) for k, vs in args.items() for v in vs]).encode()
        forward = urllib.request.Request(f"{url}/schedule.json", data=body, method="POST")
        if self.manager.config.auth:
            token = base64.b64encode(":".join(self.manager.config.auth).encode()).decode()
            forward.add_header("Authorization", f"Basic {token}")
        with urllib.request.urlopen(forward, timeout=15) as response:
            answer = json.loads(response.read())
        if answer.get("status") != "ok":
            raise ApiError(answer.get("message", "refused"))
        return str(answer["jobid"])


class JobsPage(Page):
    template = "jobs.html"

    def context(self, request: Any) -> Any:
        m = self.manager
        return {"pending": m.pending(), "running": m.running(), "finished": m.finished(), "project": m.project,
                "max_proc": m.config.max_proc}

    def post(self, request: Any) -> Any:
        job = _form(request, "job")
        state = self.manager.cancel(job)
        text = {"pending": f"removed pending job {job}", "running": f"stopping {job} (SIGTERM)"}
        if state is None:
            return self.redirect(request, "/jobs", f"no pending or running job {job}", "error")
        return self.redirect(request, "/jobs", text[state])


class CrawlsPage(Page):
    """``/crawls`` (every crawl, live) and ``/crawls/<crawlid>`` (one crawl; 404 for an unknown id)."""

    template = "crawls.html"

    def render_GET(self, request: Any) -> Any:
        crawlid = request.postpath[0].decode("utf-8", "replace") if request.postpath and request.postpath[0] else ""
        if not crawlid:
            return self.show(request, self.context(request))
        try:
            page = int(_form(request, "page", "1") or 1)
            item = int(_form(request, "item")) if _form(request, "item") else None
        except ValueError:
            page, item = 1, None
        d = console.crawl_context(self.manager, crawlid, page, item)
        d.addCallback(lambda data: self._write_with(request, "crawl.html", data, http.OK))
        d.addErrback(lambda f: f.trap(console_data.NoSuchCrawl) and self._write_with(
            request, "notfound.html", {"what": f"There is no crawl {crawlid}."}, http.NOT_FOUND))
        d.addErrback(lambda f: self._write_with(request, "notfound.html", {"what": f.getErrorMessage(),
                                                                            "title": "Error"},
                                                http.INTERNAL_SERVER_ERROR))
        d.addErrback(lambda _: None)
        return server.NOT_DONE_YET

    def _write_with(self, request: Any, template: str, data: dict[str, Any], code: int) -> None:
        previous, self.template = self.template, template
        try:
            self._write(request, {**data, "page_name": "crawls"}, code)
        finally:
            self.template = previous

    def context(self, request: Any) -> Any:
        crawlid = _form(request, "crawl")
        m = self.manager

        def read() -> dict[str, Any]:
            data: dict[str, Any] = {"crawls": fleet.crawls(m.redis), "crawl": crawlid, "items": []}
            if crawlid:
                mongo = clients.mongo_client(m.config.settings, serverSelectionTimeoutMS=2000)
                try:
                    data["items"] = fleet.latest_items(mongo[m.config.settings.mongo_db], crawlid)
                finally:
                    mongo.close()
            return data

        return m.in_thread(read)

    def post(self, request: Any) -> Any:
        crawlid = _form(request, "crawlid")
        back = f"/crawls/{urllib.parse.quote(crawlid, safe='')}" if _form(request, "back") == "crawl" else "/crawls"
        message = {"action": "stop", "userid": "manager", "crawlid": crawlid}
        d = self.manager.in_thread(self.manager.gateway.ask, message, "stop")
        d.addCallback(lambda a: self.redirect(request, back, f"stop {crawlid}: {a.get('status')} "
                                              f"{a.get('reason') or ''}".strip(),
                                              "ok" if a.get("status") == "ok" else "error"))
        d.addErrback(lambda f: self.redirect(request, back, f"stop {crawlid} failed: {f.getErrorMessage()}",
                                             "error"))
        return server.NOT_DONE_YET


class StatsPage(Page):
    template = "stats.html"


class SitesPage(Page):
    """``/sites``: every site's queues, rate, spacing, next hit, block, robots.txt, statuses; edit rate and blacklist
    (sent as the CLI sends them: a site request through Kafka, applied to ZooKeeper by the Redis monitor)."""

    template = "sites.html"
    ACTIONS = ("rate", "rate-remove", "blacklist", "blacklist-remove")

    def context(self, request: Any) -> Any:
        try:
            page = int(_form(request, "page", "1") or 1)
        except ValueError:
            page = 1
        query = sites.SiteQuery(_form(request, "q").lower(), page)
        m = self.manager
        return m.in_thread(lambda: sites.sites_view(m.redis, m.site_watch, query))

    def post(self, request: Any) -> Any:
        domain, action = _form(request, "domain"), _form(request, "action")
        back = "/sites?" + urllib.parse.urlencode({"q": _form(request, "q") or domain})
        if action not in self.ACTIONS:
            return self.redirect(request, back, f"unknown action {action!r}", "error")
        message: dict[str, Any] = {"action": action, "userid": "manager", "domain": domain}
        try:
            if action == "rate":
                message["rate"] = int(_form(request, "hits"))
                if _form(request, "window"):
                    message["window"] = float(_form(request, "window"))
        except ValueError:
            return self.redirect(request, back, f"{domain}: hits and window must be numbers", "error")
        d = self.manager.in_thread(self.manager.gateway.ask, message, "site")
        d.addCallback(lambda a: self.redirect(
            request, back, f"{domain}: {action} {a.get('status')} {a.get('reason') or ''}".strip(),
            "ok" if a.get("status") == "ok" else "error"))
        d.addErrback(lambda f: self.redirect(request, back, f"{domain}: {action} failed: {f.getErrorMessage()}",
                                             "error"))
        return server.NOT_DONE_YET


class FleetPage(Page):
    template = "fleet.html"

    def context(self, request: Any) -> Any:
        return console.fleet_context(self.manager)


class LogViewPage(Page):
    """``/logview/job/<job>``: the job's log, tailed and followed in the browser (``logview.js``)."""

    template = "logview.html"

    def context(self, request: Any) -> Any:
        parts = [p.decode("utf-8", "replace") for p in request.postpath]
        job = parts[1] if len(parts) == 2 and parts[0] == "job" else ""
        return {"job": job, "page_name": "jobs"}


class NotFoundPage(Page):
    """A proper 404 page (not Twisted's bare one), in the site's layout."""

    template = "notfound.html"

    def __init__(self, manager: Any, env: Environment, csrf: CsrfToken, what: str) -> None:
        super().__init__(manager, env, csrf)
        self.what = what

    def render(self, request: Any) -> Any:
        return self.show(request, {"what": self.what}, http.NOT_FOUND)


class Root(resource.Resource):
    def __init__(self, manager: Any) -> None:
        super().__init__()
        env, csrf = environment(), CsrfToken()
        self.manager, self.env, self.csrf = manager, env, csrf
        for name, cls in SCRAPYD_RESOURCES.items():
            self.putChild(name, cls(manager))
        self.putChild(b"api", api_root(manager))
        self.putChild(b"logs", Logs(manager.config.logs_dir))
        self.putChild(b"metrics", MetricsResource(manager))
        self.putChild(b"static", static.File(str(HERE / "static"), defaultType="text/plain"))
        for name, cls in ((b"submit", SubmitPage), (b"spiders", SpidersPage), (b"jobs", JobsPage),
                          (b"crawls", CrawlsPage), (b"stats", StatsPage), (b"fleet", FleetPage), (b"sites", SitesPage),
                          (b"logview", LogViewPage)):
            self.putChild(name, cls(manager, env, csrf))
        self.putChild(b"", Redirect(b"/jobs"))

    def getChild(self, path: bytes, request: Any) -> Any:
        name = path.decode("utf-8", "replace")
        return NotFoundPage(self.manager, self.env, self.csrf, f"There is no page /{name} on this manager.")


class _Refused(resource.Resource):
    isLeaf = True

    def __init__(self, code: int, reason: str) -> None:
        super().__init__()
        self.code, self.reason = code, reason

    def render(self, request: Any) -> bytes:
        request.setResponseCode(self.code)
        request.setHeader(b"content-type", b"application/json")
        return json.dumps({"status": "error", "message": self.reason}).encode() + b"\n"


class ManagerSite(server.Site):
    """Refuses cross-site state changes and (without authentication) requests for a foreign Host."""

    def __init__(self, root: Any, manager: Any) -> None:
        super().__init__(with_basic_auth(root, manager.config.auth))
        self.manager = manager
        self.displayTracebacks = False

    def getResourceFor(self, request: Any) -> Any:
        config = self.manager.config
        if config.auth is None and not host_allowed(request, config.url, config.bind):
            return _Refused(http.FORBIDDEN, "Host not allowed (a manager without authentication answers only "
                                            "for loopback names)")
        reason = cross_site_reason(request)
        if reason is not None:
            logger.warning("refused a cross-site %s %s: %s", request.method.decode(), request.uri.decode(), reason)
            return _Refused(http.FORBIDDEN, f"cross-site request refused: {reason}")
        return super().getResourceFor(request)


def build_site(manager: Any) -> ManagerSite:
    return ManagerSite(Root(manager), manager)
