"""scrapyd's JSON API, same paths, parameters and envelope, so that scrapyd clients work unchanged.

Every answer is ``{"status": "ok", "node_name": …, …}`` or ``{"status": "error", "node_name": …, "message": …}``
(HTTP 200 for a bad parameter, as scrapyd). The project is ``crawlfleet``, installed rather than deployed: there are
no eggs, so ``listversions.json`` lists none and ``addversion.json``, ``delversion.json`` and ``delproject.json``
answer with an error that says so. ``schedule.json`` takes ``project``, ``spider``, ``jobid``, ``priority``,
``setting=NAME=VALUE`` (repeated) and any other parameter as a spider argument; ``cancel.json`` takes ``project``,
``job`` and scrapyd's optional ``signal`` (default TERM here: a fleet worker hands its tasks back on SIGTERM).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.python.failure import Failure
from twisted.web import http, resource, server

from manager.jobs import RESERVED_ARGS, InvalidJob, Job, new_job_id, timestamp


class ApiError(Exception):
    def __init__(self, message: str, code: int = http.OK) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def arg(request: Any, name: str, default: str | None = None, required: bool = True) -> str | None:
    values = request.args.get(name.encode())
    if not values:
        if required and default is None:
            raise ApiError(f"'{name}' parameter is required")
        return default
    try:
        return values[0].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(f"{name} is invalid: {exc}") from exc


def write_json(request: Any, data: dict[str, Any], code: int = http.OK) -> None:
    body = json.dumps(data, ensure_ascii=False).encode("utf-8") + b"\n"
    request.setResponseCode(code)
    request.setHeader(b"content-type", b"application/json; charset=utf-8")
    request.setHeader(b"x-content-type-options", b"nosniff")
    request.setHeader(b"cache-control", b"no-store")
    request.setHeader(b"content-length", str(len(body)).encode())
    if request.method != b"HEAD":
        request.write(body)
    request.finish()


def read_json(request: Any, limit: int) -> dict[str, Any]:
    """A request's JSON object body (at most ``limit`` bytes), or ApiError (413, 400) with the reason."""
    body = request.content.read(limit + 1)
    if len(body) > limit:
        raise ApiError(f"request body larger than {limit} bytes", http.REQUEST_ENTITY_TOO_LARGE)
    try:
        data = json.loads(body or b"{}")
    except ValueError as exc:
        raise ApiError(f"$: not JSON: {exc}", http.BAD_REQUEST) from exc
    if not isinstance(data, dict):
        raise ApiError("$: a JSON object is expected", http.BAD_REQUEST)
    return data


class JsonResource(resource.Resource):
    """A JSON endpoint: ``get``/``post`` return a dict (or a Deferred of one); errors become the error envelope."""

    isLeaf = True
    get: Callable[[Any], Any] | None = None
    post: Callable[[Any], Any] | None = None

    def __init__(self, manager: Any) -> None:
        super().__init__()
        self.manager = manager

    def envelope(self, data: dict[str, Any]) -> dict[str, Any]:
        return {"node_name": self.manager.config.node_name, "status": "ok", **data}

    @property
    def methods(self) -> str:
        """scrapyd's ``Allow``: OPTIONS and HEAD always, then GET and POST where the resource has them."""
        return ", ".join(["OPTIONS", "HEAD", *(m for m, h in (("GET", self.get), ("POST", self.post)) if h)])

    def render(self, request: Any) -> Any:
        # scrapyd's CORS headers on every answer (a browser page elsewhere may read the JSON; state changes from
        # another site are still refused by ManagerSite before this resource is reached)
        request.setHeader(b"access-control-allow-origin", b"*")
        request.setHeader(b"access-control-allow-methods", self.methods.encode())
        request.setHeader(b"access-control-allow-headers", b"X-Requested-With")
        if request.method == b"OPTIONS":  # as scrapyd: 204, no body, Allow
            request.setHeader(b"allow", self.methods.encode())
            request.setHeader(b"content-length", b"0")
            request.setResponseCode(http.NO_CONTENT)
            return b""
        handler = {b"GET": self.get, b"HEAD": self.get, b"POST": self.post}.get(request.method)
        if handler is None:
            request.setHeader(b"allow", self.methods.encode())
            write_json(request, {"node_name": self.manager.config.node_name, "status": "error",
                                 "message": f"method {request.method.decode()} not allowed; use {self.methods}"},
                       http.NOT_ALLOWED)
            return server.NOT_DONE_YET
        d = defer.maybeDeferred(handler, request)
        d.addCallbacks(lambda data: write_json(request, self.envelope(data)), lambda f: self._error(request, f))
        d.addErrback(lambda _: None)  # the client went away
        return server.NOT_DONE_YET

    def _error(self, request: Any, failure: Failure) -> None:
        code = http.OK
        if failure.check(ApiError):
            message, code = failure.value.message, failure.value.code
        elif failure.check(InvalidJob):
            message = str(failure.value)
        else:
            message = f"{failure.type.__name__}: {failure.getErrorMessage()}"
            if not failure.check(ValueError):
                code = http.INTERNAL_SERVER_ERROR
        write_json(request, {"node_name": self.manager.config.node_name, "status": "error", "message": message},
                   code)


def _check_project(manager: Any, project: str | None) -> None:
    if project is not None and project != manager.project:
        raise ApiError(f"project '{project}' not found")


class DaemonStatus(JsonResource):
    def get(self, request: Any) -> dict[str, Any]:
        m = self.manager
        return {"pending": m.queue.count(), "running": len(m.launcher.processes), "finished": len(m.history)}


def job_from_request(request: Any, manager: Any) -> Job:
    """A :class:`Job` from ``schedule.json``'s parameters (also the *Spiders* page's form, with ``arg``)."""
    project, spider = arg(request, "project"), arg(request, "spider")
    _check_project(manager, project)
    try:
        priority = float(arg(request, "priority", "0") or 0)
    except ValueError as exc:
        raise ApiError(f"priority is invalid: {exc}") from exc
    settings: dict[str, str] = {}
    for raw in request.args.get(b"setting", []):
        name, sep, value = raw.decode("utf-8", "replace").partition("=")
        if not sep:
            raise ApiError(f"setting {name!r} is invalid: expected NAME=VALUE")
        settings[name.strip()] = value
    args = {key.decode("utf-8", "replace"): values[0].decode("utf-8", "replace")
            for key, values in request.args.items() if key.decode("utf-8", "replace") not in RESERVED_ARGS}
    job_id = arg(request, "jobid", required=False) or new_job_id(spider or "")
    return Job(spider=spider or "", job=job_id, priority=priority, settings=settings, args=args,
               project=project or "")


class Schedule(JsonResource):
    def post(self, request: Any) -> Any:
        if arg(request, "_version", required=False):
            raise ApiError("version not found: the crawlfleet project is installed, not deployed as eggs")
        job = job_from_request(request, self.manager)
        return self.manager.schedule(job).addCallback(lambda job_id: {"jobid": job_id})


SIGNALS = {"TERM": signal.SIGTERM, "INT": signal.SIGINT, "KILL": signal.SIGKILL, "QUIT": signal.SIGQUIT}


class Cancel(JsonResource):
    def post(self, request: Any) -> dict[str, Any]:
        project, job = arg(request, "project"), arg(request, "job")
        _check_project(self.manager, project)
        name = (arg(request, "signal", "TERM") or "TERM").upper().removeprefix("SIG")
        sig = int(name) if name.isdigit() else SIGNALS.get(name)
        if sig is None:
            raise ApiError(f"signal is invalid: {name!r}")
        return {"prevstate": self.manager.cancel(job, sig)}


class ListProjects(JsonResource):
    def get(self, request: Any) -> dict[str, Any]:
        return {"projects": [self.manager.project]}


class ListVersions(JsonResource):
    def get(self, request: Any) -> dict[str, Any]:
        _check_project(self.manager, arg(request, "project"))
        return {"versions": []}


class ListSpiders(JsonResource):
    def get(self, request: Any) -> Any:
        _check_project(self.manager, arg(request, "project"))
        return self.manager.catalog.get().addCallback(lambda spiders: {"spiders": spiders})


class Status(JsonResource):
    def get(self, request: Any) -> dict[str, Any]:
        job = arg(request, "job")
        _check_project(self.manager, arg(request, "project", required=False))
        return {"currstate": self.manager.state_of(job)}


def listjobs(manager: Any) -> dict[str, Any]:
    p = manager.project
    return {
        "pending": [{"id": j.job, "project": p, "spider": j.spider, "version": None, "settings": j.settings,
                     "args": j.args, "priority": j.priority} for j in manager.pending()],
        "running": [{"id": r.job.job, "project": p, "spider": r.job.spider, "pid": r.pid,
                     "start_time": timestamp(r.record.start_time),
                     "log_url": manager.log_url(p, r.job.spider, r.job.job), "items_url": None}
                    for r in manager.running()],
        "finished": [{"id": f.job, "project": f.project, "spider": f.spider, "pid": f.pid,
                      "start_time": timestamp(f.start_time), "end_time": timestamp(f.end_time),
                      "exit_status": f.exit_status, "log_url": manager.log_url(f.project, f.spider, f.job),
                      "items_url": None} for f in manager.finished()],
    }


class ListJobs(JsonResource):
    def get(self, request: Any) -> dict[str, Any]:
        _check_project(self.manager, arg(request, "project", required=False))
        return listjobs(self.manager)


class NotDeployed(JsonResource):
    """addversion / delversion / delproject: there are no eggs to add or delete."""

    def post(self, request: Any) -> dict[str, Any]:
        raise ApiError("the crawlfleet project is installed on the host, not deployed as eggs: upgrade the "
                       "crawlfleet package and restart the manager instead")


SCRAPYD_RESOURCES: dict[bytes, type[JsonResource]] = {
    b"daemonstatus.json": DaemonStatus, b"schedule.json": Schedule, b"cancel.json": Cancel,
    b"listjobs.json": ListJobs, b"listprojects.json": ListProjects, b"listspiders.json": ListSpiders,
    b"listversions.json": ListVersions, b"status.json": Status, b"addversion.json": NotDeployed,
    b"delversion.json": NotDeployed, b"delproject.json": NotDeployed,
}
