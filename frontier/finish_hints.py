"""The finisher's change log: which crawls' pending counts of which domains changed (``finish:{seeds}:touched``).

A crawl's tasks in worker queues are counted per domain slot (``pending:{<domain>}``, ``messaging/lua/pending.lua``)
so that each count changes atomically with the tasks it stands for, also on a Redis Cluster. The master's finisher
(``master.finisher``) must know when all of a crawl's counts are zero; reading every domain of the crawl on every check
cost O(domains) per check (17 reads per page at 5,000 hosts). Instead, whoever changes a count also names the
(domain, crawl) pair here, and the finisher re-reads only the named counts:

- the dispatcher's settle step adds the pairs of a batch's landed tasks in the same Lua call that takes them out of
  ``pending:{seeds}`` (so an increase is always logged before the crawl's ``seeds`` count can read zero);
- a worker's commit, a drop of unfetched tasks and the requeue of a retired worker add theirs right after the count
  went down (a crash in between loses a hint: the crawl is then found finished by the finisher's periodic re-read,
  late, never early).

A member is ``<domain> <crawlid>``: a domain holds no space, so the first space splits it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from messaging import keys
from messaging.clients import as_text


def member(domain: str, crawlid: str) -> str:
    return f"{domain} {crawlid}"


def parse(raw: str | bytes) -> tuple[str, str]:
    """(domain, crawlid) of a member."""
    domain, _, crawlid = as_text(raw).partition(" ")
    return domain, crawlid


def log_touched(client: Any, pairs: Iterable[tuple[str, str]]) -> None:
    """Queue (on a pipeline) or send one ``SADD`` naming the (domain, crawlid) pairs whose counts changed."""
    members = sorted({member(domain, crawlid) for domain, crawlid in pairs})
    if members:
        client.sadd(keys.FINISH_TOUCHED, *members)
