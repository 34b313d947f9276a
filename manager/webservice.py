"""scrapyd's JSON API, same paths, parameters and envelope, so that scrapyd clients work unchanged.

Every answer is ``{"status": "ok", "node_name": …, …}`` or ``{"status": "error", "node_name": …, "message": …}``
(HTTP 200 for a bad parameter, as scrapyd; 503 when the egg storage, MongoDB, does not answer, so that
``scrapyd-deploy`` fails too). The projects are the installed ``crawlfleet`` (its rule spiders; no versions, and
``addversion.json``, ``delversion.json`` and ``delproject.json`` refuse it) and the deployed ones
(:mod:`manager.projects`), the same on every manager of the cluster:

- ``addversion.json`` (``project``, ``version``, ``egg``): the egg is checked by its own spider loader in a child
  process, then stored; one that fails gives the loader's reason and nothing is stored. Answers ``project``,
  ``version`` and ``spiders`` (their number), as scrapyd.
- ``listprojects.json`` (the installed project first), ``listversions.json`` (scrapyd's order; none for an unknown
  project), ``listspiders.json`` (``_version``, default the latest), ``delversion.json``, ``delproject.json``.
  Project names are checked as scrapyd checks them: ``../p`` is ``DirectoryTraversalError: ../p``.
- ``schedule.json`` takes ``project``, ``spider``, ``_version``, ``jobid``, ``priority``, ``setting=NAME=VALUE``
  (repeated) and any other parameter as a spider argument; a deployed project's job pins the version
  (``_version``, default the latest when scheduled) and its egg's digest, and is a fleet crawl whose id is the job
  id (:mod:`manager.fleet_crawls`: ``_workers``, how many workers; ``_hosts``, on which managers; ``_crawl``, one
  more worker of a running crawl); the job is finished when its crawl is, and its ``cancel.json`` stops the crawl.
  ``cancel.json`` takes ``project``, ``job`` and scrapyd's optional ``signal`` (default TERM here: a fleet worker
  hands its tasks back on SIGTERM);
  ``status.json``, ``listjobs.json`` (per project) and ``daemonstatus.json`` as scrapyd.
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
from messaging.eggs import DirectoryTraversalError, EggError, StorageUnavailable


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
        if isinstance(failure.value, ApiError):
            message, code = failure.value.message, failure.value.code
        elif failure.check(DirectoryTraversalError):  # scrapyd's words for it
            message = f"DirectoryTraversalError: {failure.value}"
        elif failure.check(InvalidJob, EggError):
            message = str(failure.value)
        elif failure.check(StorageUnavailable):  # non-2xx: scrapyd-deploy and CI jobs see the deploy failed
            message, code = str(failure.value), http.SERVICE_UNAVAILABLE
        else:
            message = f"{type(failure.value).__name__}: {failure.getErrorMessage()}"
            if not failure.check(ValueError):
                code = http.INTERNAL_SERVER_ERROR
        write_json(request, {"node_name": self.manager.config.node_name, "status": "error", "message": message},
                   code)


def known_project(manager: Any, project: str | None) -> defer.Deferred[None]:
    """Fires when the project is one the manager answers for (or none is given); ApiError as scrapyd says it."""
    if project is None:
        return defer.succeed(None)

    def check(known: bool) -> None:
        if not known:
            raise ApiError(f"project '{project}' not found")

    return manager.has_project(project).addCallback(check)


def installed(manager: Any, project: str) -> bool:
    """The served installed project (no eggs: versions cannot be added or deleted)."""
    return bool(project == manager.project and manager.builtin)


class DaemonStatus(JsonResource):
    def get(self, request: Any) -> dict[str, Any]:
        m = self.manager
        return {"pending": m.queue.count(), "running": len(m.launcher.processes), "finished": len(m.history)}


def job_from_request(request: Any, manager: Any) -> Job:
    """A :class:`Job` from ``schedule.json``'s parameters (also the pages' forms); the project, version and spider
    are checked by :meth:`manager.app.Manager.schedule`."""
    project, spider = arg(request, "project"), arg(request, "spider")
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
               project=project or "", version=arg(request, "_version", required=False) or None,
               crawl=arg(request, "_crawl", required=False) or None)


def fleet_params(request: Any) -> tuple[int | None, list[str]]:
    """A fleet crawl's ``_workers`` (None: the manager's default) and ``_hosts`` (comma-separated)."""
    raw = arg(request, "_workers", required=False)
    try:
        workers = int(raw) if raw else None
    except ValueError as exc:
        raise ApiError(f"_workers is invalid: {exc}") from exc
    hosts = [host.strip() for host in (arg(request, "_hosts", required=False) or "").split(",") if host.strip()]
    return workers, hosts


class Schedule(JsonResource):
    def post(self, request: Any) -> Any:
        job = job_from_request(request, self.manager)
        workers, hosts = fleet_params(request)
        return self.manager.schedule(job, workers, hosts).addCallback(lambda job_id: {"jobid": job_id})


SIGNALS = {"TERM": signal.SIGTERM, "INT": signal.SIGINT, "KILL": signal.SIGKILL, "QUIT": signal.SIGQUIT}


class Cancel(JsonResource):
    def post(self, request: Any) -> Any:
        project, job = arg(request, "project"), arg(request, "job")
        name = (arg(request, "signal", "TERM") or "TERM").upper().removeprefix("SIG")
        sig = int(name) if name.isdigit() else SIGNALS.get(name)
        if sig is None:
            raise ApiError(f"signal is invalid: {name!r}")
        d = known_project(self.manager, project)
        return d.addCallback(lambda _: {"prevstate": self.manager.cancel(job, sig, project=project)})


class ListProjects(JsonResource):
    def get(self, request: Any) -> Any:
        return self.manager.project_names().addCallback(lambda names: {"projects": names})


class ListVersions(JsonResource):
    """scrapyd's answer: the versions in its order, none for a project that does not exist."""

    def get(self, request: Any) -> Any:
        project = arg(request, "project") or ""
        if installed(self.manager, project):
            return {"versions": []}
        return self.manager.projects.versions(project).addCallback(lambda versions: {"versions": versions})


class ListSpiders(JsonResource):
    def get(self, request: Any) -> Any:
        project, version = arg(request, "project") or "", arg(request, "_version", required=False) or None
        if installed(self.manager, project):
            if version is not None:
                raise ApiError(f"version '{version}' not found")
            return self.manager.catalog.get().addCallback(lambda spiders: {"spiders": spiders})
        d = known_project(self.manager, project)
        d.addCallback(lambda _: self.manager.projects.resolve(project, version))
        d.addCallback(self.manager.projects.spiders)
        return d.addCallback(lambda spiders: {"spiders": spiders})


class Status(JsonResource):
    def get(self, request: Any) -> Any:
        job, project = arg(request, "job"), arg(request, "project", required=False)
        d = known_project(self.manager, project)
        return d.addCallback(lambda _: {"currstate": self.manager.state_of(job, project)})


def listjobs(manager: Any, project: str | None = None) -> dict[str, Any]:
    """scrapyd's job lists (of ``project``, or all); running: this manager's jobs, then this host's ``crawlfleet up``
    workers (of the installed project)."""
    def mine(p: str) -> bool:
        return project is None or p == project

    finished = manager.finished()
    going = [f for f in finished if manager.crawl_runs(f)]  # a fleet crawl's job whose first worker ended
    return {
        "pending": [{"id": j.job, "project": j.project, "spider": j.spider, "version": j.version,
                     "settings": j.settings, "args": j.args, "priority": j.priority}
                    for j in manager.pending() if mine(j.project)],
        "running": [{"id": r.job.job, "project": r.job.project, "spider": r.job.spider, "pid": r.pid,
                     "start_time": timestamp(r.record.start_time),
                     "log_url": manager.log_url(r.job.project, r.job.spider, r.job.job),
                     "items_url": manager.items_url(r.job.project, r.job.spider, r.job.job)}
                    for r in manager.running() if mine(r.job.project)]
        + [{"id": f.job, "project": manager.project, "spider": f.spider, "pid": f.pid,
            "start_time": timestamp(f.start_time or None),
            "log_url": manager.log_url(manager.project, f.spider, f.job),
            "items_url": manager.items_url(manager.project, f.spider, f.job)}
           for f in manager.fleet_jobs() if mine(manager.project)]
        + [{"id": f.job, "project": f.project, "spider": f.spider, "pid": None, "start_time": timestamp(f.start_time),
            "log_url": manager.log_url(f.project, f.spider, f.job),
            "items_url": manager.items_url(f.project, f.spider, f.job)}
           for f in going if mine(f.project)],
        "finished": [{"id": f.job, "project": f.project, "spider": f.spider, "pid": f.pid,
                      "start_time": timestamp(f.start_time), "end_time": timestamp(f.end_time),
                      "exit_status": f.exit_status, "log_url": manager.log_url(f.project, f.spider, f.job),
                      "items_url": manager.items_url(f.project, f.spider, f.job)}
                     for f in finished if mine(f.project) and f not in going],
    }


class ListJobs(JsonResource):
    def get(self, request: Any) -> Any:
        project = arg(request, "project", required=False)
        return known_project(self.manager, project).addCallback(lambda _: listjobs(self.manager, project))


def egg_arg(request: Any) -> bytes:
    """The egg's bytes, as uploaded (multipart, as scrapyd-deploy sends it, or form-encoded)."""
    values = request.args.get(b"egg")
    if not values:
        raise ApiError("'egg' parameter is required")
    return bytes(values[0])


def not_deployed(project: str) -> ApiError:
    return ApiError(f"the {project} project is installed on the host, not deployed as eggs: upgrade the "
                    "crawlfleet package and restart the manager instead")


class AddVersion(JsonResource):
    def post(self, request: Any) -> Any:
        project, version = arg(request, "project") or "", arg(request, "version") or ""
        egg = egg_arg(request)
        d = self.manager.projects.add(project, version, egg)
        return d.addCallback(lambda added: {"project": project, "version": version, "spiders": len(added[1])})


class DeleteVersion(JsonResource):
    def post(self, request: Any) -> Any:
        project, version = arg(request, "project") or "", arg(request, "version") or ""
        if installed(self.manager, project):
            raise not_deployed(project)
        return self.manager.projects.delete(project, version).addCallback(lambda _: {})


class DeleteProject(JsonResource):
    def post(self, request: Any) -> Any:
        project = arg(request, "project") or ""
        if installed(self.manager, project):
            raise not_deployed(project)
        return self.manager.projects.delete(project).addCallback(lambda _: {})


SCRAPYD_RESOURCES: dict[bytes, type[JsonResource]] = {
    b"daemonstatus.json": DaemonStatus, b"schedule.json": Schedule, b"cancel.json": Cancel,
    b"listjobs.json": ListJobs, b"listprojects.json": ListProjects, b"listspiders.json": ListSpiders,
    b"listversions.json": ListVersions, b"status.json": Status, b"addversion.json": AddVersion,
    b"delversion.json": DeleteVersion, b"delproject.json": DeleteProject,
}
