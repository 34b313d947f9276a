"""The console's own pages: *Sites*, *Fleet*, a job's log view, and the 404 page (see :mod:`manager.console`)."""

from __future__ import annotations

import urllib.parse
from typing import Any

from jinja2 import Environment
from twisted.web import http, server

from manager import console, sites
from manager.pages import Page, _form
from manager.security import CsrfToken


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
