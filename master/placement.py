"""What an entry of ``seeds`` is to the dispatcher: its task, the domain and queue score it goes to, or why it cannot
be placed (:class:`Unplaceable`: the dispatcher dead-letters it, ``master.staging``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from master.staging import DeadLetter
from messaging import keys
from messaging.domains import domain_of, domain_of_host
from messaging.tasks import DEFAULT_PRIORITY, queue_score, request_order


class Unplaceable(ValueError):
    """A task in ``seeds`` that no worker can be given (it goes to the dead letters); ``path`` says where."""

    def __init__(self, message: str, path: str = "$.url") -> None:
        super().__init__(message)
        self.path = path


@dataclass
class Entry:
    """One entry of ``seeds`` as a round reads it: its task, domain and queue score, or the dead letter it makes."""

    member: str
    score: float
    task: dict[str, Any]
    domain: str = ""
    queue_score: float = 0.0
    letter: DeadLetter | None = None
    pool: str = ""  # the workers it may go to (master.dispatcher.pool_of)


def parse_task(member: str) -> dict[str, Any]:
    """The task of a ``seeds`` member, with a string crawlid and spider type; :class:`Unplaceable` otherwise."""
    try:
        task = json.loads(member)
    except ValueError as exc:
        raise Unplaceable(f"not a JSON task: {exc}", "$") from None
    if not isinstance(task, dict):
        raise Unplaceable("a task is a JSON object", "$")
    for name in ("spider_type", "crawlid"):
        if not isinstance(task.get(name), str) or not task[name]:
            raise Unplaceable(f"a task needs a {name}", f"$.{name}")
    return task


def placement(task: dict[str, Any]) -> tuple[str, float]:
    """The task's domain (every domain-scoped key is formed from it) and its score in a queue; or
    :class:`Unplaceable` with the reason, under the one host rule the key builder applies."""
    url = task.get("url")
    if not isinstance(url, str):
        raise Unplaceable("a task needs a url")
    try:
        domain = fast_domain(url)
        keys.queue("-", domain)  # the key builder's own check, in case a rule ever diverges from domain_of's
    except ValueError as exc:  # InvalidDomain, or a URL urlsplit refuses
        raise Unplaceable(f"no usable host in {url[:200]!r}: {exc}") from None
    try:
        return domain, queue_score(int(task.get("priority", DEFAULT_PRIORITY)), int(task.get("depth", 0)),
                                   request_order(task))
    except (TypeError, ValueError) as exc:
        raise Unplaceable(f"bad priority or depth: {exc}", "$.priority") from None


def fast_domain(url: str) -> str:
    """``domain_of`` with a fast path for plain ``http(s)://host/...`` URLs (the host's domain is cached)."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme in ("http", "https"):
        host = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
        if host and not any(ch in host for ch in "@:[%") and host.isascii():
            return domain_of_host(host.lower())
    return domain_of(url)
