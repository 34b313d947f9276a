"""Politeness steps for several due domains in two round trips (the ready walk's batch, :mod:`frontier.ready`).

:meth:`frontier.politeness.Politeness.take_many` serves one domain in two round trips (its queue's heads, then one
step per allowed head). In a broad crawl most domains hold a few tasks, so a walk that visits one domain per two
round trips pays them per task. :func:`take_domains` does the same for a group of due domains at once: the heads of
every queue in one pipeline, robots.txt checked in Python, then every step in one pipeline (on a Redis Cluster, one
plain pipeline per node: :func:`frontier.node_pipes.run_by_node`). Each step is the very atomic call of ``take``,
with the head it must find (``changed`` otherwise), so the windows and the pacing are exactly those of single steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from frontier.node_pipes import run_by_node
from frontier.politeness import Outcome, Politeness, TakeResult
from messaging import keys
from messaging.clients import as_text
from messaging.tasks import Task


def take_domains(engine: Politeness, domains: Sequence[str], limit: int,
                 ip: str | None = None) -> list[list[TakeResult]]:
    """Up to ``limit`` steps per domain; for each domain (in order) the steps that took, then the first that did not
    (if any), as ``take_many``; tasks dropped unfetched (robots.txt) are in each list's first result's ``removed``."""
    limit = max(1, limit)
    open_domains = [domain for domain in domains if not engine.rates.is_blacklisted(domain)]
    pipe = engine.redis.pipeline(transaction=False)
    for domain in open_domains:
        pipe.zrange(keys.queue(engine.job, domain), 0, limit - 1)
    heads = dict(zip(open_domains, pipe.execute(), strict=True)) if open_domains else {}
    expected: dict[str, list[str]] = {}
    disallowed: dict[str, list[str]] = {}
    pending: dict[str, str | None] = {}
    for domain in open_domains:
        expected[domain], disallowed[domain], pending[domain] = _allowed(
            engine, [as_text(raw) for raw in heads[domain]])
    removed = _drop(engine, disallowed)
    calls: list[tuple[Any, list[str], list[Any]]] = []
    owners: list[str] = []
    for domain in open_domains:
        for head in expected[domain]:
            calls.append((engine._take, *engine._step_call(domain, head, None, ip or engine.ip)))
            owners.append(domain)
    steps: dict[str, list[TakeResult]] = {domain: [] for domain in open_domains}
    for domain, reply in zip(owners, run_by_node(engine.redis, calls), strict=True):
        steps[domain].append(engine._step_result(domain, reply))
    out: list[list[TakeResult]] = []
    for domain in domains:
        if domain not in heads:  # blacklisted: the ordinary step drops its queue
            out.append([engine.take(domain, ip=ip)])
            continue
        if not heads[domain]:
            out.append([TakeResult(Outcome.EMPTY, domain)])
            continue
        results = _first_refusal(steps[domain])
        url = pending[domain]
        if not results and url is not None and not expected[domain]:
            # the first head left waits for its robots.txt: asking again now would claim or poll a second time
            results = [engine.robots_pending(domain, url)]
        elif not results:  # all disallowed, or a new head arrived: the ordinary step says why
            results = [engine.take(domain, ip=ip)]
        results[0].removed = removed[domain] + results[0].removed
        out.append(results)
    return out


def _allowed(engine: Politeness, members: list[str]) -> tuple[list[str], list[str], str | None]:
    """The heads a step may take (up to the first whose robots.txt is not known yet), the disallowed ones, and the
    URL of that first unknown head (``None``: every head's verdict is known)."""
    if engine.robots is None:
        return members, [], None
    allowed: list[str] = []
    disallowed: list[str] = []
    for member in members:
        url = Task.decode(member).url
        verdict = engine.robots.allowed(url, engine.user_agent)
        if verdict is None:
            return allowed, disallowed, url
        (allowed if verdict else disallowed).append(member)
    return allowed, disallowed, None


def _drop(engine: Politeness, disallowed: dict[str, list[str]]) -> dict[str, list[Task]]:
    """Disallowed heads leave their queues (one pipeline); only those really removed are handed back."""
    removed: dict[str, list[Task]] = {domain: [] for domain in disallowed}
    wanted = [(domain, members) for domain, members in disallowed.items() if members]
    if not wanted:
        return removed
    pipe = engine.redis.pipeline(transaction=False)
    for domain, members in wanted:
        for member in members:
            pipe.zrem(keys.queue(engine.job, domain), member)
    replies = iter(pipe.execute())
    for domain, members in wanted:
        removed[domain] = [Task.decode(member) for member in members if next(replies)]
        if removed[domain]:
            engine._count("robots_disallowed", len(removed[domain]))
    return removed


def _first_refusal(results: list[TakeResult]) -> list[TakeResult]:
    taken = [result for result in results if result.outcome == Outcome.TAKEN]
    refused = next((result for result in results if result.outcome != Outcome.TAKEN), None)
    return taken + ([refused] if refused is not None and refused.outcome != "changed" else [])
