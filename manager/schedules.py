"""Schedules in the manager: ``/api/schedules`` (JSON, the manager's envelope) and the *Schedules* page.

Both read and change the schedules in Redis with :class:`messaging.schedules.ScheduleStore`, as ``crawlfleet
schedule`` does (in a thread, never on the reactor); the leading master fires them.

- ``GET /api/schedules``: every schedule (``schedules``: name, cron, tz, state, request with its notify URL redacted,
  ``next`` and ``last`` firing with their crawl ids, ``missed``);
- ``POST /api/schedules`` with ``{"name", "cron", "tz", "request", "replace"}``: add (or replace) one; a bad name,
  expression, zone or request answers 400 with the reason;
- ``GET /api/schedules/<name>``: one schedule and its latest firings (``history``); 404 when there is none;
- ``POST /api/schedules/<name>/pause``, ``…/resume``, ``…/remove`` (or ``DELETE /api/schedules/<name>``).
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

from twisted.web import http, server

from manager.pages import Page, _form
from manager.webservice import ApiError, JsonResource, read_json
from messaging.schedules import DEFAULT_TZ, InvalidSchedule, ScheduleStore, local_time

ACTIONS = ("pause", "resume", "remove")


def _store(manager: Any) -> ScheduleStore:
    return ScheduleStore(manager.redis)


def add_schedule(manager: Any, body: dict[str, Any]) -> dict[str, Any]:
    """Add (or replace) a schedule from the API's or the page's fields; ApiError 400 with the reason."""
    try:
        found = _store(manager).add(str(body.get("name") or ""), str(body.get("cron") or ""),
                                    str(body.get("tz") or DEFAULT_TZ), body.get("request"),
                                    max_bytes=manager.config.settings.max_message_bytes,
                                    replace=bool(body.get("replace")))
    except InvalidSchedule as exc:
        raise ApiError(str(exc), http.BAD_REQUEST) from None
    return found.to_json()


def change_schedule(manager: Any, name: str, action: str) -> dict[str, Any]:
    if not getattr(_store(manager), action)(name):
        raise ApiError(f"there is no schedule {name!r}", http.NOT_FOUND)
    return {"name": name, "action": action}


def schedule_rows(manager: Any) -> list[dict[str, Any]]:
    """Every schedule as the API shows it, with its times written in its zone for the page."""
    rows = []
    for found in _store(manager).all():
        row = found.to_json()
        row["next_text"] = local_time(row["next"]["due"], found.tz) if row["next"] else "–"
        row["last_text"] = local_time(row["last"]["due"], found.tz) if row["last"] else "–"
        row["paused_text"] = local_time(found.paused, found.tz) if found.paused else ""
        row["request_text"] = json.dumps(row["request"], sort_keys=True, ensure_ascii=False)
        rows.append(row)
    return rows


class ScheduleApi(JsonResource):
    """``/api/schedules`` and, below it, one schedule and its actions."""

    isLeaf = False

    def get(self, request: Any) -> Any:
        return self.manager.in_thread(lambda: {"schedules": [s.to_json() for s in _store(self.manager).all()]})

    def post(self, request: Any) -> Any:
        body = read_json(request, self.manager.config.settings.max_message_bytes + 4096)
        return self.manager.in_thread(lambda: {"schedule": add_schedule(self.manager, body)})

    def getChild(self, path: bytes, request: Any) -> Any:
        if not path:
            return self
        name = path.decode("utf-8", "replace")
        rest = request.postpath
        action = rest[0].decode("utf-8", "replace") if rest and rest[0] else ""
        request.postpath = []
        return OneSchedule(self.manager, name, action)


class OneSchedule(JsonResource):
    def __init__(self, manager: Any, name: str, action: str) -> None:
        super().__init__(manager)
        self.name, self.action = name, action

    def render(self, request: Any) -> Any:
        if request.method == b"DELETE" and not self.action:
            self.action = "remove"
            request.method = b"POST"
        return super().render(request)

    def get(self, request: Any) -> Any:
        if self.action:
            raise ApiError(f"use POST for {self.action}", http.NOT_ALLOWED)

        def read() -> dict[str, Any]:
            store = _store(self.manager)
            found = store.get(self.name)
            if found is None:
                raise ApiError(f"there is no schedule {self.name!r}", http.NOT_FOUND)
            history = store.history(self.name, self.manager.config.settings.schedule_history)
            return {"schedule": {**found.to_json(), "history": history}}

        return self.manager.in_thread(read)

    def post(self, request: Any) -> Any:
        if self.action not in ACTIONS:
            raise ApiError(f"unknown action {self.action!r}: pause, resume or remove", http.NOT_FOUND)
        return self.manager.in_thread(change_schedule, self.manager, self.name, self.action)


class SchedulesPage(Page):
    """``/schedules``: every schedule with its next and last firing (links to the crawls), pause, resume, remove,
    and a form to add one."""

    template = "schedules.html"

    def context(self, request: Any) -> Any:
        grace = self.manager.config.settings.schedule_grace
        return self.manager.in_thread(lambda: {"schedules": schedule_rows(self.manager), "form": {},
                                               "grace": grace, "default_tz": DEFAULT_TZ})

    def post(self, request: Any) -> Any:
        action = _form(request, "action")
        if action in ACTIONS:
            name = _form(request, "name")
            d = self.manager.in_thread(change_schedule, self.manager, name, action)
            d.addCallbacks(lambda _: self.redirect(request, "/schedules", f"schedule {name}: {action} done"),
                           lambda f: self.redirect(request, "/schedules", f"schedule {name}: {f.getErrorMessage()}",
                                                   "error"))
            return server.NOT_DONE_YET
        form = {name: _form(request, name) for name in ("name", "cron", "tz", "request")}
        try:
            body: dict[str, Any] = {**form, "request": json.loads(form["request"] or "null")}
        except ValueError as exc:
            return self._again(request, form, f"the crawl request is not JSON: {exc}")
        d = self.manager.in_thread(add_schedule, self.manager, body)
        d.addCallbacks(lambda added: self.redirect(
            request, "/schedules?" + urllib.parse.urlencode({"name": added["name"]}),
            f"schedule {added['name']} added: next firing {added['next']['crawlid'] if added['next'] else '–'}"),
            lambda f: self._again(request, form, f.getErrorMessage()))
        return server.NOT_DONE_YET

    def _again(self, request: Any, form: dict[str, str], error: str) -> Any:
        """The page again with what was typed and why it was not added (400)."""
        d = self.manager.in_thread(schedule_rows, self.manager)
        d.addCallback(lambda rows: {"schedules": rows, "form": form, "error": error, "default_tz": DEFAULT_TZ,
                                    "grace": self.manager.config.settings.schedule_grace})
        return self.show(request, d, http.BAD_REQUEST)

