"""The console's own pages: *Sites*, *Fleet*, a job's log view, and the 404 page (see :mod:`manager.console`)."""

from __future__ import annotations

import urllib.parse
from typing import Any

from jinja2 import Environment
from twisted.web import http, server

from manager import console, sites
from manager.gateway import UNCONFIRMED
from manager.pages import Page, _form
from manager.security import CsrfToken
from messaging.siteconfig import Rate


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
        kept = {name: _form(request, name) for name in ("q", "page") if _form(request, name)}
        back = "/sites" + (f"?{urllib.parse.urlencode(kept)}" if kept else "")  # the list as it was shown
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
        d.addCallback(lambda answer: self.redirect(request, back, *outcome(domain, action, answer)))
        d.addErrback(lambda f: self.redirect(request, back, f"{domain}: {action} failed: {f.getErrorMessage()}",
                                             "error"))
        return server.NOT_DONE_YET


DONE = {"rate": "rate set", "rate-remove": "own rate removed", "blacklist": "blacklisted",
        "blacklist-remove": "off the blacklist"}


def outcome(domain: str, action: str, answer: dict[str, Any]) -> tuple[str, str]:
    """The flash after a site change: what applies now (the rate and its spacing), or why not, or that it was sent
    and not confirmed yet (no answer in time: a Redis monitor may still apply it)."""
    status = answer.get("status")
    if status == "ok":
        applied = answer.get("effective") or {}
        rate = Rate(int(applied.get("rate") or 0), float(applied.get("window") or 1), int(applied.get("burst") or 1),
                    bool(applied.get("adaptive")))
        default = " (the default)" if applied.get("default") else ""
        return f"{answer.get('domain') or domain}: {DONE[action]}; it applies {rate.describe()}{default}", "ok"
    if status == UNCONFIRMED:
        return f"{domain}: {action} {answer.get('reason')} (this page shows it once applied)", "info"
    return f"{domain}: {action} {status}: {answer.get('reason') or 'no reason given'}", "error"


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
