"""The site's home page and the *Projects* page (deployed Scrapy projects: versions, spiders, deploy, run, delete).

``/`` is scrapyd's home page in the console's layout: the projects this manager serves and links to the pages and
``/logs/``. Behind a reverse proxy that mounts the manager under a path, its links carry the proxy's
``X-Forwarded-Prefix`` (as scrapyd's, its ``prefix_header``), when that is a plain path.

``/projects`` lists the projects (the installed one, whose spiders are on *Spiders*, then the deployed ones: their
versions, the latest and when it was deployed) and deploys an egg by upload (what ``scrapyd-deploy`` sends to
``addversion.json``: the same checks, the same answer). ``/projects/<project>`` shows its versions (digest, size,
upload time) and one version's spiders as its own spider loader lists them (``?version=``, default the latest),
runs a spider of that version on this manager (the job pins it), and deletes a version or the project. Every form
carries the page token; deletions ask for confirmation (``data-confirm``).
"""

from __future__ import annotations

import re
import time
import urllib.parse
from typing import Any

from twisted.internet import defer
from twisted.web import server

from manager.jobs import InvalidJob, Job, new_job_id
from manager.pages import Page, _form, parse_pairs
from messaging.eggs import EggError, ProjectNotFound, check_project

PREFIX = re.compile(r"(/[A-Za-z0-9._~%!$&'()*+,;=:@-]+)*\Z")


def base_path(request: Any) -> str:
    """The ``X-Forwarded-Prefix`` a reverse proxy sends (``/path/to``), or "" when absent or not a plain path."""
    value = (request.getHeader(b"x-forwarded-prefix") or b"").decode("latin-1").strip().rstrip("/")
    return value if PREFIX.match(value) else ""


def project_url(project: str, version: str | None = None) -> str:
    url = f"/projects/{urllib.parse.quote(project, safe='')}"
    return url + (f"?{urllib.parse.urlencode({'version': version})}" if version else "")


def first_paragraph(message: str) -> str:
    """A loader's reason without the traceback that follows it (the page shows one line)."""
    return message.split("\n\n", 1)[0]


class HomePage(Page):
    template = "home.html"

    def context(self, request: Any) -> Any:
        d = self.manager.project_names()
        d.addErrback(lambda f: [self.manager.project] if self.manager.builtin else [])
        return d.addCallback(lambda names: {"projects": names, "base": base_path(request), "url":
                                            self.manager.config.url,
                                            "builtin": self.manager.project if self.manager.builtin else None})


class ProjectsPage(Page):
    template = "projects.html"

    def render_GET(self, request: Any) -> Any:
        project = self._project(request)
        if not project:
            return self.show(request, self.context(request))
        d = self.project_context(project, _form(request, "version") or None)
        return self.show_detail(request, d, "project.html", ProjectNotFound,
                                f"There is no deployed project {project}.")

    @staticmethod
    def _project(request: Any) -> str:
        return request.postpath[0].decode("utf-8", "replace") if request.postpath and request.postpath[0] else ""

    def context(self, request: Any) -> Any:
        m = self.manager
        d = m.projects.infos()
        d.addCallback(lambda infos: {"deployed": infos, "builtin": m.project if m.builtin else None,
                                     "storage_error": None, "now_version": str(int(time.time()))})
        d.addErrback(lambda f: {"deployed": {}, "builtin": m.project if m.builtin else None,
                                "storage_error": f.getErrorMessage(), "now_version": str(int(time.time()))})
        return d

    def project_context(self, project: str, version: str | None) -> defer.Deferred[dict[str, Any]]:
        projects = self.manager.projects

        def chosen(infos: dict[str, list[Any]]) -> Any:
            versions = infos.get(project)
            if not versions:
                raise ProjectNotFound(project)
            info = next((i for i in versions if i.version == version), versions[-1])
            data = {"project": project, "versions": versions, "info": info, "latest": versions[-1].version,
                    "spiders": [], "spiders_error": None}
            d = projects.spiders(info)
            d.addCallback(lambda spiders: {**data, "spiders": spiders})
            d.addErrback(lambda f: {**data, "spiders_error": first_paragraph(f.getErrorMessage())})
            return d

        try:
            check_project(project)
        except EggError:
            return defer.fail(ProjectNotFound(project))
        return projects.infos(project).addCallback(chosen)

    # --- forms -----------------------------------------------------------------------------------------------------
    def post(self, request: Any) -> Any:
        action = _form(request, "action")
        handler = {"deploy": self._deploy, "run": self._run, "delversion": self._delete,
                   "delproject": self._delete}.get(action)
        if handler is None:
            return self.redirect(request, "/projects", f"unknown action {action!r}", "error")
        return handler(request, action)

    def _deploy(self, request: Any, action: str) -> Any:
        project = _form(request, "project")
        version = _form(request, "version") or str(int(time.time()))  # scrapyd-deploy's default version
        egg = request.args.get(b"egg", [b""])[0]
        if not egg:
            return self.redirect(request, "/projects", "choose the egg to deploy (scrapyd-deploy --build-egg "
                                                       "FILE builds one)", "error")
        d = self.manager.projects.add(project, version, egg)
        d.addCallbacks(lambda added: self.redirect(request, project_url(project), f"deployed {project} {version}: "
                                                   f"{len(added[1])} spiders"),
                       lambda f: self.redirect(request, "/projects", f"{project} {version} not deployed: "
                                               f"{first_paragraph(f.getErrorMessage())}", "error"))
        return server.NOT_DONE_YET

    def _run(self, request: Any, action: str) -> Any:
        project, version, spider = _form(request, "project"), _form(request, "version"), _form(request, "spider")
        back = project_url(project, version)
        try:
            job = Job(spider=spider, job=new_job_id(spider), project=project, version=version or None,
                      args=parse_pairs(_form(request, "arguments"), "argument"),
                      settings=parse_pairs(_form(request, "settings"), "setting"))
        except InvalidJob as exc:
            return self.redirect(request, back, f"not started: {exc}", "error")
        d = self.manager.schedule(job)
        d.addCallbacks(lambda job_id: self.redirect(request, "/jobs", f"started {job_id} ({project} {job.version})"),
                       lambda f: self.redirect(request, back, f"not started: {f.getErrorMessage()}", "error"))
        return server.NOT_DONE_YET

    def _delete(self, request: Any, action: str) -> Any:
        project = _form(request, "project")
        version = _form(request, "version") if action == "delversion" else None
        what = f"{project} {version}" if version else f"project {project}"
        projects = self.manager.projects

        def back(left: bool) -> str:  # the project's page while it has versions left
            return project_url(project) if left else "/projects"

        d = projects.delete(project, version)
        d.addCallback(lambda _: projects.exists(project) if version else False)
        d.addCallbacks(lambda left: self.redirect(request, back(left), f"deleted {what}"),
                       lambda f: self.redirect(request, back(bool(version)), f"{what} not deleted: "
                                               f"{f.getErrorMessage()}", "error"))
        return server.NOT_DONE_YET
