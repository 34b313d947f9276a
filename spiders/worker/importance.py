"""Importance ordering (seed 004: Igloo orders its frontier by PageRank), optional per crawl: rule field ``importance``.

A page linked from many pages is usually important (its PageRank is high), so a crawl that fetches the most-linked
URLs first captures more of the web's PageRank early. For a crawl whose rule says ``"importance": true``, every link a
committed page holds counts as one more page linking to its URL (``importance:{seeds}:<crawlid>:inlinks``; a page's
links are counted once per distinct URL) — *before* the Bloom filter drops the links it has seen, since a
rediscovery is exactly what makes a URL important. A new URL goes into ``seeds`` with its priority raised by its count
so far (at most :data:`messaging.tasks.MAX_PRIORITY`); a URL still waiting in ``seeds`` when more pages link to it
has its score raised in place (its arrival order among equals is kept, and so is the task itself, the member that the
rest of the fleet knows: ``importance:{seeds}:<crawlid>:members`` remembers it by URL). All of it is one Lua call per
commit batch (``lua/importance.lua``), which also does the push of the batch's new URLs of such crawls — the commit
takes no more round trips than without importance. Every key is in the slot of ``seeds`` (Redis Cluster); the two
hashes expire :data:`KEEP_SECONDS` after the crawl's last commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from messaging import keys
from messaging.scripts import lua_constants
from messaging.tasks import DEFAULT_PRIORITY, SEEDS_SCORE_LUA, Task, check_priority

KEEP_SECONDS = 7 * 86400
RULE_FIELD = "importance"
IMPORTANCE_LUA = (lua_constants(DEFAULT_PRIORITY=DEFAULT_PRIORITY) + SEEDS_SCORE_LUA
                  + (Path(__file__).with_name("lua") / "importance.lua").read_text())


def wants_importance(rule: dict[str, Any] | None) -> bool:
    return bool(rule) and rule.get(RULE_FIELD) is True


@dataclass(frozen=True)
class Link:
    """One distinct link of one page: its crawl and its URL's fingerprint (hex)."""

    crawlid: str
    fingerprint: str


@dataclass(frozen=True)
class ImportanceResult:
    pushed: int  # new in seeds
    raised: int  # waiting in seeds, score raised


_scripts: dict[str, Any] = {}


def push_by_importance(redis: Any, links: Iterable[Link], new: Sequence[tuple[str, Task]],
                       keep_seconds: float = KEEP_SECONDS) -> ImportanceResult:
    """Count ``links`` (one per page and distinct URL), push ``new`` (fingerprint, task) into ``seeds`` by
    importance and raise the waiting ones; one round trip."""
    links = list(links)
    if not links and not new:
        return ImportanceResult(0, 0)
    crawls: dict[str, int] = {}
    for crawlid in [link.crawlid for link in links] + [task.crawlid for _, task in new]:
        crawls.setdefault(crawlid, len(crawls) + 1)
    script_keys = [keys.SEEDS, keys.SEEDS_SEQUENCE, keys.PENDING_SEEDS]
    for crawlid in crawls:
        script_keys += [keys.importance_inlinks(crawlid), keys.importance_members(crawlid)]
    args: list[Any] = [int(keep_seconds * 1000), len(links)]
    for link in links:
        args += [crawls[link.crawlid], link.fingerprint]
    args.append(len(new))
    for fingerprint, task in new:
        args += [crawls[task.crawlid], fingerprint, task.encode(), check_priority(task.priority), task.crawlid]
    if "importance" not in _scripts:
        _scripts["importance"] = redis.register_script(IMPORTANCE_LUA)
    pushed, raised = _scripts["importance"](keys=script_keys, args=args, client=redis)
    return ImportanceResult(int(pushed), int(raised))
