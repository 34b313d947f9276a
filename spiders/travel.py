"""Requests that travel: a ``scrapy.Request`` one's own spider yields becomes a task any worker rebuilds (issue 35).

In plain Scrapy a request stays in the process that made it; in the fleet the worker that leases its task may be
another one, on another host. So a request travels as data, as Scrapy itself keeps requests in its disk queues
(``Request.to_dict(spider=…)`` and ``scrapy.utils.request.request_from_dict``): its URL, the *names* of its callback
and errback (methods of the spider), ``cb_kwargs``, its ``meta``, method, headers, body, cookies, priority,
``dont_filter``, flags, encoding, and the request class with its extra attributes (``FormRequest``, ``JsonRequest``
and any subclass whose ``attributes`` name them). :func:`pack` makes the task's fields (``messaging.tasks``: the
callback's name in ``callback``, the meta in ``meta``, the rest in ``request``, only what differs from a GET's
defaults, so the same request is always the same task); :func:`unpack` makes the Request again on the worker that
leased it.

**What cannot travel**, refused where it is yielded (:class:`CannotTravel`; the output middleware logs it and the
crawl counts it among its failures as ``untravelable: <what>``, never a silent drop):

- a callback or errback that is not a method of the spider — a lambda, a function, ``functools.partial``, a bound
  method of another object: only a name can travel, and the other worker has only its own spider to look it up in
  (pass values with ``cb_kwargs`` instead);
- ``meta``, ``cb_kwargs`` or cookies that are not JSON (a ``scrapy.Item``, a set, bytes, an object): only JSON
  comes back as it went (tuples would come back as lists, so they are refused too); keys that Scrapy or the fleet
  set for one download (the task, proxies, download slot and latency, redirect and retry counts) are left out;
- a request class that cannot be imported by name, or an extra attribute that is not JSON;
- a request larger than CRAWLFLEET_REQUEST_MAX_BYTES once a task (``size``).

Dedup keys a request by the project's own request fingerprint (``crawler.request_fingerprinter``, its
``REQUEST_FINGERPRINTER_CLASS``), taken when it is packed and carried in the task (``fp``; the crawl's Bloom filter
takes its first 16 bytes), so that every worker marks and checks the same value without rebuilding the request.
"""

from __future__ import annotations

import base64
import inspect
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from scrapy import Request
from scrapy.utils.misc import load_object

from messaging.counts import UNTRAVELABLE

FINGERPRINT_BYTES = 16  # what the Bloom filter hashes (frontier.bloom): the fingerprinter's first 16 bytes
# meta keys that belong to one download or to the fleet's bookkeeping, never to the request that travels
LOCAL_META = frozenset({
    "task", "task_member", "crawlid", "spider_type", "proxy", "proxy_id", "download_slot", "download_latency",
    "download_timeout", "redirect_times", "redirect_ttl", "redirect_urls", "redirect_reasons", "retry_times",
    "depth", "_scheduler_slot", "revisit", "page_encoding",
})
LOCAL_META_PREFIXES = ("fleet_",)
ASKED_META = frozenset({"fleet_render"})  # fleet keys a spider sets itself: a request asks to be rendered
DEFAULT_ENCODING = "utf-8"


class CannotTravel(ValueError):
    """A request that cannot become a task; ``what`` is its short reason (``callback``, ``meta``, ``size`` …)."""

    def __init__(self, what: str, message: str) -> None:
        super().__init__(message)
        self.what = what

    @property
    def reason(self) -> str:
        """The crawl's failure reason (``messaging.counts``): few distinct values, no URLs."""
        return f"{UNTRAVELABLE}: {self.what}"


@dataclass(frozen=True)
class Packed:
    """A request as a task's fields (:class:`messaging.tasks.Task`)."""

    url: str
    callback: str  # the spider method's name, "" for the default (parse)
    meta: dict[str, Any]
    request: dict[str, Any]  # the other fields, always with the fingerprint "fp"
    depth: int | None  # meta["depth"] when Scrapy's DepthMiddleware set it

    @property
    def fingerprint(self) -> bytes:
        return bytes.fromhex(self.request["fp"])


def fingerprint(fingerprinter: Any, request: Request) -> bytes:
    """The request's fingerprint as the crawl's Bloom filter takes it: the project's fingerprinter's first bytes."""
    return bytes(fingerprinter.fingerprint(request))[:FINGERPRINT_BYTES]


def pack(request: Request, spider: Any, fingerprinter: Any, max_bytes: int) -> Packed:
    """The task fields of ``request``, yielded by ``spider``; :class:`CannotTravel` when it cannot travel."""
    fields: dict[str, Any] = {"fp": fingerprint(fingerprinter, request).hex()}
    errback = method_name(spider, request.errback, "errback")
    if errback:
        fields["errback"] = errback
    if request.method != "GET":
        fields["method"] = request.method
    headers = _headers(request)
    if headers:
        fields["headers"] = headers
    if request.body:
        try:
            fields["body"] = request.body.decode("utf-8")
        except UnicodeDecodeError:
            fields["body64"] = base64.b64encode(request.body).decode("ascii")
    if request.cookies:
        fields["cookies"] = _json(request.cookies, "cookies")
    if request.cb_kwargs:
        fields["cb_kwargs"] = _json(request.cb_kwargs, "cb_kwargs")
    if request.dont_filter:
        fields["dont_filter"] = True
    if request.flags:
        fields["flags"] = _json(list(request.flags), "flags")
    if request.encoding.lower() != DEFAULT_ENCODING:
        fields["encoding"] = request.encoding
    if request.priority:
        fields["priority"] = int(request.priority)
    cls = type(request)
    if cls is not Request:
        fields["class"] = _class_path(cls)
        attrs = {name: _json(getattr(request, name), f"attribute {name}")
                 for name in cls.attributes if name not in Request.attributes}
        if attrs:
            fields["attrs"] = attrs
    meta = {key: value for key, value in request.meta.items() if not _local(key)}
    meta = _json(meta, "meta")
    packed = Packed(request.url, method_name(spider, request.callback, "callback"), meta, fields,
                    _depth(request.meta.get("depth")))
    size = len(json.dumps([packed.url, packed.meta, packed.request], separators=(",", ":"), ensure_ascii=False))
    if size > max_bytes:
        raise CannotTravel("size", f"the request is {size} bytes as a task, more than CRAWLFLEET_REQUEST_MAX_BYTES "
                                   f"({max_bytes}): keep large bodies and values out of requests")
    return packed


def unpack(url: str, callback: str, meta: Mapping[str, Any], fields: Mapping[str, Any], spider: Any) -> Request:
    """The Request again, on the worker that leased its task (ValueError: a method or class that is not there)."""
    kwargs: dict[str, Any] = {
        "url": url,
        "callback": _method(spider, callback) if callback else None,
        "errback": _method(spider, fields["errback"]) if fields.get("errback") else None,
        "method": fields.get("method", "GET"),
        "headers": {name: [value.encode("latin-1") for value in values]
                    for name, values in fields.get("headers", {}).items()},
        "body": _body(fields),
        "cookies": fields.get("cookies"),
        "meta": dict(meta),
        "encoding": fields.get("encoding", DEFAULT_ENCODING),
        "priority": int(fields.get("priority", 0)),
        "dont_filter": bool(fields.get("dont_filter", False)),
        "flags": list(fields.get("flags", [])),
        "cb_kwargs": dict(fields.get("cb_kwargs", {})),
    }
    cls: type[Request] = Request
    if fields.get("class"):
        loaded = load_object(fields["class"])
        if not (isinstance(loaded, type) and issubclass(loaded, Request)):
            raise ValueError(f"{fields['class']} is not a scrapy.Request class")
        cls = loaded
        kwargs.update(fields.get("attrs", {}))
    return cls(**kwargs)


def method_name(spider: Any, func: Callable[..., Any] | None, what: str) -> str:
    """The name under which ``func`` is a method of ``spider`` ("" for None); :class:`CannotTravel` otherwise."""
    if func is None:
        return ""
    if isinstance(func, str):  # Scrapy accepts a method name for a callback in some places
        return func
    target = getattr(func, "__func__", None)
    if getattr(func, "__self__", None) is spider and target is not None:
        name = getattr(target, "__name__", "")
        if getattr(getattr(spider, name, None), "__func__", None) is target:
            return name
        for name, member in inspect.getmembers(type(spider), inspect.isfunction):  # an alias (parse_b = parse_a)
            if member is target:
                return name
    shown = getattr(func, "__qualname__", None) or repr(func)
    raise CannotTravel(what, f"its {what} {shown} is not a method of the spider: a request travels to other workers "
                             f"with its {what}'s name only (a lambda, a function or another object's method cannot "
                             "travel; pass values with cb_kwargs)")


def _method(spider: Any, name: str) -> Any:
    method = getattr(spider, name, None)
    if method is None or not callable(method):
        raise ValueError(f"the spider has no method {name!r} (the task was made by another version of it?)")
    return method


def _headers(request: Request) -> dict[str, list[str]]:
    return {key.decode("latin-1"): [value.decode("latin-1") for value in values]
            for key, values in request.headers.items()}


def _body(fields: Mapping[str, Any]) -> bytes:
    if "body64" in fields:
        return base64.b64decode(fields["body64"])
    return str(fields.get("body", "")).encode("utf-8")


def _local(key: Any) -> bool:
    return isinstance(key, str) and key not in ASKED_META and (
        key in LOCAL_META or key.startswith(LOCAL_META_PREFIXES))


def _depth(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _class_path(cls: type) -> str:
    path = f"{cls.__module__}.{cls.__qualname__}"
    try:
        found = load_object(path)
    except (ImportError, AttributeError, NameError, ValueError):
        found = None
    if found is not cls:
        raise CannotTravel("class", f"its class {path} cannot be imported by that name on another worker")
    return path


def _json(value: Any, what: str) -> Any:
    """``value`` when it is JSON that comes back as it went (dict keys are strings, no tuples, finite numbers)."""
    problem = _not_json(value, what)
    if problem:
        raise CannotTravel("cookies" if what == "cookies" else what.split()[0],
                           f"its {problem}: a request travels to other workers as JSON")
    return value


def _not_json(value: Any, where: str) -> str:
    if value is None or isinstance(value, bool | int | str):
        return ""
    if isinstance(value, float):
        return "" if math.isfinite(value) else f"{where} holds {value!r}, not a JSON number"
    if isinstance(value, list):
        return next((p for i, v in enumerate(value) if (p := _not_json(v, f"{where}[{i}]"))), "")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where} has the key {key!r}, not a string"
            problem = _not_json(item, f"{where}[{key!r}]")
            if problem:
                return problem
        return ""
    return f"{where} holds a {type(value).__module__}.{type(value).__qualname__}, not JSON"
