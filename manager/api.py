"""crawlfleet's own API under ``/api`` (JSON in, JSON out; the same envelope fields as scrapyd's).

- ``POST /api/crawl``: a crawl request (seed table 4-1), validated as the Kafka monitor validates it, then produced
  to Kafka; the answer is the Kafka monitor's (``accepted``/``duplicate``, HTTP 202/200) or the reason it is not
  (``rejected``, 400, with the JSON path). ``?check=1`` validates without sending (the *Submit* page's check).
- ``GET /api/crawls``: the latest crawls and their progress; ``GET /api/crawls/<crawlid>``: one crawl's info (the
  Redis monitor's info answer, computed here); ``POST /api/crawls/<crawlid>/stop``, ``…/pause``, ``…/resume``: a
  stop, pause or resume request through Kafka, answered by a Redis monitor; ``GET …/failures`` and ``POST …/retry``:
  its failed URLs and their re-run (:mod:`manager.failures`).
- ``POST /api/sites/<domain>``: ``{"action": "rate"|"rate-remove"|"blacklist"|"blacklist-remove", "rate", "window",
  "burst", "adaptive"}`` through Kafka, answered by the Redis monitor's ZooKeeper plugin (the answer's ``effective``
  has the rate workers apply and the ``spacing`` of its hits).
- ``GET /api/nodes``: every manager and worker of the cluster; ``GET /api/stats``: the counters.
- ``/api/schedules``: crawls on a cron schedule (:mod:`manager.schedules`): list, add, show, pause, resume, remove.
"""

from __future__ import annotations

from typing import Any

from twisted.web import http, resource, server

from manager import charts, fleet
from manager.console import LogApi
from manager.export import CrawlExport
from manager.failures import CrawlFailures, RetryFailures
from manager.gateway import UNCONFIRMED
from manager.schedules import ScheduleApi
from manager.webservice import ApiError, JsonResource, read_json, write_json
from messaging.clock import RedisClock
from messaging.redis_monitor.plugins import Context
from messaging.redis_monitor.plugins.info import InfoPlugin

DEFAULT_USER = "manager"
STATUS_CODES = {"accepted": http.ACCEPTED, "duplicate": http.OK, "ok": http.OK, "rejected": http.BAD_REQUEST,
                "error": http.INTERNAL_SERVER_ERROR, UNCONFIRMED: http.ACCEPTED}  # sent, may still take effect


class AnswerResource(JsonResource):
    """Answers of the cluster keep their own status (accepted, rejected…), mapped to an HTTP code."""

    render = resource.Resource.render  # render_POST, not JsonResource's get/post

    def respond(self, request: Any, answer: dict[str, Any]) -> None:
        answer = {**answer, "node_name": self.manager.config.node_name}
        write_json(request, answer, STATUS_CODES.get(str(answer.get("status")), http.OK))

    def ask(self, request: Any, message: dict[str, Any], kind: str) -> Any:
        d = self.manager.in_thread(self.manager.gateway.ask, message, kind)
        d.addCallback(lambda answer: self.respond(request, answer))
        d.addErrback(lambda f: self._error(request, f))
        return server.NOT_DONE_YET


class SubmitCrawl(AnswerResource):
    def render_POST(self, request: Any) -> Any:
        try:
            message = read_json(request, self.manager.config.settings.max_message_bytes)
        except ApiError as exc:
            write_json(request, {"node_name": self.manager.config.node_name, "status": "rejected",
                                 "reason": exc.message}, exc.code)
            return server.NOT_DONE_YET
        message.setdefault("userid", DEFAULT_USER)
        if request.args.get(b"check") in ([b"1"], [b"true"]):
            return self.check(request, message)
        return self.ask(request, message, "crawl")

    def check(self, request: Any, message: dict[str, Any]) -> Any:
        from messaging.validation import Rejected

        try:
            kind, _ = self.manager.gateway.check(message, self.manager.config.settings.max_message_bytes)
        except Rejected as rejection:
            self.respond(request, {"status": "rejected", "reason": rejection.reason, "path": rejection.path})
            return server.NOT_DONE_YET
        if kind != "crawl":
            self.respond(request, {"status": "rejected", "reason": f"$: a crawl request was expected, not {kind}"})
        else:
            self.respond(request, {"status": "ok", "valid": True})
        return server.NOT_DONE_YET


class CrawlInfo(JsonResource):
    def __init__(self, manager: Any, crawlid: str) -> None:
        super().__init__(manager)
        self.crawlid = crawlid

    def get(self, request: Any) -> Any:
        def info() -> dict[str, Any]:
            context = Context(self.manager.redis, self.manager.config.settings)
            try:
                return InfoPlugin().handle("", {"crawlid": self.crawlid}, context)
            finally:
                context.close()

        return self.manager.in_thread(info)


class CrawlAction(AnswerResource):
    """``POST /api/crawls/<crawlid>/<action>``: stop, pause or resume, through Kafka."""

    def __init__(self, manager: Any, crawlid: str, action: str) -> None:
        super().__init__(manager)
        self.crawlid = crawlid
        self.action = action

    def render_POST(self, request: Any) -> Any:
        userid = arg_user(request)
        return self.ask(request, {"action": self.action, "userid": userid, "crawlid": self.crawlid}, self.action)


def arg_user(request: Any) -> str:
    values = request.args.get(b"userid")
    return values[0].decode("utf-8", "replace") if values else DEFAULT_USER


class Crawls(resource.Resource):
    """``/api/crawls`` (list), ``/api/crawls/<crawlid>`` (info), ``/api/crawls/<crawlid>/stop|pause|resume``,
    ``/api/crawls/<crawlid>/export?format=jsonl|csv`` (:mod:`manager.export`), ``…/failures`` and ``…/retry``
    (:mod:`manager.failures`)."""

    def __init__(self, manager: Any) -> None:
        super().__init__()
        self.manager = manager

    def render_GET(self, request: Any) -> Any:
        d = self.manager.in_thread(fleet.crawls, self.manager.redis)
        d.addCallback(lambda rows: write_json(request, {"node_name": self.manager.config.node_name,
                                                        "status": "ok", "crawls": rows}))
        d.addErrback(lambda f: write_json(request, {"status": "error", "message": f.getErrorMessage()}, 500))
        return server.NOT_DONE_YET

    def getChild(self, path: bytes, request: Any) -> Any:
        crawlid = path.decode("utf-8", "replace")
        rest = request.postpath
        if rest in ([b"stop"], [b"pause"], [b"resume"]):
            request.postpath = []
            return CrawlAction(self.manager, crawlid, rest[0].decode())
        if rest == [b"failures"]:
            request.postpath = []
            return CrawlFailures(self.manager, crawlid)
        if rest == [b"retry"]:
            request.postpath = []
            return RetryFailures(self.manager, crawlid)
        if rest == [b"export"]:
            request.postpath = []
            return CrawlExport(self.manager, crawlid)
        if not rest or rest == [b""]:
            return CrawlInfo(self.manager, crawlid)
        return resource.NoResource()


class Site(AnswerResource):
    def __init__(self, manager: Any, domain: str) -> None:
        super().__init__(manager)
        self.domain = domain

    def render_POST(self, request: Any) -> Any:
        try:
            body = read_json(request, 64 * 1024)
        except ApiError as exc:
            write_json(request, {"status": "rejected", "reason": exc.message}, exc.code)
            return server.NOT_DONE_YET
        message: dict[str, Any] = {key: body[key] for key in ("action", "rate", "window", "burst", "adaptive")
                                   if key in body}
        message.update(domain=self.domain, userid=body.get("userid") or DEFAULT_USER)
        return self.ask(request, message, "site")


class Sites(resource.Resource):
    def __init__(self, manager: Any) -> None:
        super().__init__()
        self.manager = manager

    def getChild(self, path: bytes, request: Any) -> Any:
        return Site(self.manager, path.decode("utf-8", "replace"))


class Nodes(JsonResource):
    def get(self, request: Any) -> Any:
        s = self.manager.config.settings
        return self.manager.in_thread(fleet.nodes, self.manager.redis, s.weight_window_minutes,
                                      self.manager.config.registry_ttl)


class Stats(JsonResource):
    def get(self, request: Any) -> Any:
        return self.manager.in_thread(fleet.stats, self.manager.redis, self.manager.config.settings
                                      .weight_window_minutes)


class StatsHistory(JsonResource):
    """``/api/history``: the per-minute samples of the last two hours (:mod:`manager.charts`)."""

    def get(self, request: Any) -> Any:
        redis = self.manager.redis
        return self.manager.in_thread(lambda: {"history": charts.history(redis, RedisClock(redis).now())})


def api_root(manager: Any) -> resource.Resource:
    root = resource.Resource()
    root.putChild(b"crawl", SubmitCrawl(manager))
    root.putChild(b"crawls", Crawls(manager))
    root.putChild(b"sites", Sites(manager))
    root.putChild(b"nodes", Nodes(manager))
    root.putChild(b"stats", Stats(manager))
    root.putChild(b"logs", LogApi(manager))
    root.putChild(b"history", StatsHistory(manager))
    root.putChild(b"schedules", ScheduleApi(manager))
    return root
