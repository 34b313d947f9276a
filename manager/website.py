"""The manager's pages (seed 5.3, figs. 5-6 to 5-8), server-rendered with Jinja2 (autoescaped), and the site's root.

*Submit* (a crawl request: URL, rule, depth, priority, spider type, cookie; the rule is checked by
``/api/crawl?check=1`` before it is sent), *Spiders* (start a spider on any manager of the cluster: the host list
comes from the manager registry and a start on another host is forwarded to its ``schedule.json``), *Jobs*
(scrapyd's table: pending / running / finished, runtime, log link, Stop), *Crawls* (each crawl's progress; one
crawl's own page, see :mod:`manager.console`) and *Stats* (charts from ``/api/history`` then ``/api/stats``, drawn
with the vendored uPlot); *Fleet*, *Sites* and the log view live in :mod:`manager.console_pages`, *Schedules* in
:mod:`manager.schedules`, the home page (``/``, scrapyd's) and *Projects* (deployed projects) in
:mod:`manager.project_pages`. Every page POST
carries the form token (:class:`manager.security.CsrfToken`); :class:`ManagerSite` refuses cross-site and rebinding
requests before any resource sees them. Logs are served as ``text/plain`` with ``nosniff`` (a crawled ``<script>``
stays text).
"""

from __future__ import annotations

import json
import logging
import urllib.parse
import urllib.request
import uuid
from typing import Any

from twisted.internet import defer
from twisted.web import http, resource, server, static

from manager import console, console_data, fleet
from manager.api import api_root
from manager.channel import Limits, ManagerChannel, ManagerRequest
from manager.console_pages import FleetPage, LogViewPage, NotFoundPage, SitesPage
from manager.failures import reasons_of
from manager.failures import retry as retry_failures
from manager.fleet_crawls import forward_schedule
from manager.gateway import UNCONFIRMED
from manager.items import Items
from manager.jobs import InvalidJob
from manager.logs import Logs
from manager.metrics import MetricsResource, ProbeResource
from manager.pages import HERE, SPIDER_TYPES, Page, _form, environment, parse_pairs
from manager.project_pages import HomePage, ProjectsPage
from manager.registry import ManagerRegistry
from manager.schedules import SchedulesPage
from manager.security import CsrfToken, host_allowed, state_change_refusal, with_basic_auth
from manager.webservice import SCRAPYD_RESOURCES, ApiError, job_from_request
from messaging import clients

logger = logging.getLogger(__name__)
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
        return forward_schedule(self.manager, host, [(k.decode(), v.decode()) for k, vs in args.items() for v in vs])


class JobsPage(Page):
    """scrapyd's Jobs table (this manager's jobs and this host's `crawlfleet up` workers), then the cluster's other
    workers with their logs."""

    template = "jobs.html"

    def context(self, request: Any) -> Any:
        m = self.manager
        running, fleet_jobs = m.running(), m.fleet_jobs()
        data = {"pending": m.pending(), "running": running, "fleet": fleet_jobs, "finished": m.finished(),
                "project": m.project, "max_proc": m.config.max_proc, "others": [], "others_error": ""}
        here = {p.job.job for p in running} | {j.job for j in fleet_jobs}

        def others() -> dict[str, Any]:
            try:
                return {**data, "others": console_data.registered_workers(m, here)}
            except Exception as exc:  # Redis away: this host's jobs still show
                return {**data, "others_error": f"the worker registry is unreadable: {exc}"}

        return m.in_thread(others)

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
        d = console.crawl_context(self.manager, crawlid, page, item, reasons_of(request))
        return self.show_detail(request, d, "crawl.html", console_data.NoSuchCrawl, f"There is no crawl {crawlid}.")

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
        """A crawl's buttons: stop, pause and resume (through Kafka), retry its failed URLs (of a reason, or all)."""
        crawlid = _form(request, "crawlid")
        action = _form(request, "action") or "stop"
        back = f"/crawls/{urllib.parse.quote(crawlid, safe='')}" if _form(request, "back") == "crawl" else "/crawls"
        if action == "retry":
            return self._retry(request, crawlid, back)
        if action not in ("stop", "pause", "resume"):
            return self.redirect(request, back, f"unknown action {action!r}", "error")
        message = {"action": action, "userid": "manager", "crawlid": crawlid}
        d = self.manager.in_thread(self.manager.gateway.ask, message, action)
        d.addCallback(lambda a: self.redirect(request, back, f"{action} {crawlid}: {a.get('status')} "
                                              f"{a.get('reason') or ''}".strip(),
                                              {"ok": "ok", UNCONFIRMED: "info"}.get(a.get("status"), "error")))
        d.addErrback(lambda f: self.redirect(request, back, f"{action} {crawlid} failed: {f.getErrorMessage()}",
                                             "error"))
        return server.NOT_DONE_YET

    def _retry(self, request: Any, crawlid: str, back: str) -> Any:
        reasons = reasons_of(request)
        def done(result: dict[str, Any]) -> Any:
            if not result["submitted"]:
                return self.redirect(request, back, f"nothing to retry in {crawlid}" + (
                    f" ({result['skipped']} re-submitted already, not processed yet)" if result["skipped"] else ""))
            again = "; the finished crawl runs again" if result["reopened"] else ""
            return self.redirect(request, back, f"retry {result['retry']} of {crawlid}: {result['submitted']} failed "
                                 f"URLs re-submitted{again}")

        d = self.manager.in_thread(retry_failures, self.manager, crawlid, reasons)
        d.addCallback(done)
        d.addErrback(lambda f: self.redirect(request, back, f"retry of {crawlid} refused: {f.getErrorMessage()}",
                                             "error"))
        return server.NOT_DONE_YET


class StatsPage(Page):
    template = "stats.html"


class Root(resource.Resource):
    def __init__(self, manager: Any) -> None:
        super().__init__()
        env, csrf = environment(), CsrfToken()
        self.manager, self.env, self.csrf = manager, env, csrf
        for name, cls in SCRAPYD_RESOURCES.items():
            self.putChild(name, cls(manager))
        self.putChild(b"api", api_root(manager))
        self.putChild(b"logs", Logs(manager))
        self.putChild(b"items", Items(manager))
        self.putChild(b"metrics", MetricsResource(manager))
        self.putChild(b"static", static.File(str(HERE / "static"), defaultType="text/plain"))
        for name, page in ((b"", HomePage), (b"projects", ProjectsPage),
                          (b"submit", SubmitPage), (b"spiders", SpidersPage), (b"jobs", JobsPage),
                          (b"crawls", CrawlsPage), (b"stats", StatsPage), (b"fleet", FleetPage), (b"sites", SitesPage),
                          (b"schedules", SchedulesPage),
                          (b"logview", LogViewPage)):
            self.putChild(name, page(manager, env, csrf))

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
    """Refuses state changes without the token or a JSON body (:func:`manager.security.state_change_refusal`) and,
    without authentication, requests for a foreign Host; its connections bound bodies and read times
    (:mod:`manager.channel`)."""

    # Twisted types a site's protocol as its HTTP/2-negotiating wrapper of an HTTPChannel (HTTP/2 needs TLS, which
    # the manager does not serve); Site.buildProtocol sets up the channel itself alike, so it is built directly
    protocol = ManagerChannel  # type: ignore[assignment]  # the channel, not Twisted's private wrapper of one

    def __init__(self, root: Any, manager: Any) -> None:
        super().__init__(with_basic_auth(root, manager.config.auth), requestFactory=ManagerRequest)
        self.manager = manager
        self.csrf = root.csrf
        self.displayTracebacks = False
        s = manager.config.settings
        self.limits = Limits(max_body=s.manager_max_body, max_upload=s.manager_max_upload,
                             header_timeout=s.manager_header_timeout, body_timeout=s.manager_body_timeout)
        # a platform's probes carry no credentials and name the pod's address: answered before both checks (they
        # tell only whether the manager turns and its Redis answers)
        self.probes = {b"/livez": ProbeResource(manager.health, ready=False),
                       b"/readyz": ProbeResource(manager.health, ready=True)}

    def getResourceFor(self, request: Any) -> Any:
        probe = self.probes.get(request.path) if request.method in (b"GET", b"HEAD") else None
        if probe is not None:
            return probe
        config = self.manager.config
        if config.auth is None and not host_allowed(request, config.url, config.bind):
            return _Refused(http.FORBIDDEN, "Host not allowed (a manager without authentication answers only "
                                            "for loopback names)")
        reason = state_change_refusal(request, self.csrf)
        if reason is not None:
            logger.warning("refused %s %s: %s", request.method.decode(), request.uri.decode(), reason)
            return _Refused(http.FORBIDDEN, reason)
        return super().getResourceFor(request)


def build_site(manager: Any) -> ManagerSite:
    return ManagerSite(Root(manager), manager)
