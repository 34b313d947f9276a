"""Importance ordering (seed 004: Igloo orders its frontier by PageRank), optional per crawl: rule field ``importance``.

A page linked from many pages is usually important (its PageRank is high), so a crawl that fetches the most-linked
URLs first captures more of the web's PageRank early. For a crawl whose rule says ``"importance": true``, every link a
committed page holds (once per distinct URL) adds to its URL's score in ``importance:{seeds}:<crawlid>:inlinks``:
1 — one more page linking to it — plus the linking page's own score shared among its links (one step of PageRank,
as OPIC computes it on line: a page linked from important pages is important). Links count *before* the Bloom filter
drops the ones it has seen, since a rediscovery is exactly what makes a URL important. A new URL goes into ``seeds``
with its priority raised by :data:`LEVEL_STEP` x log2(1 + score) (at most :data:`messaging.tasks.MAX_PRIORITY`);
a URL still waiting in ``seeds`` when its score grows has its score in ``seeds`` raised in place (its arrival order
among equals is kept, and so is the task itself, the member the rest of the fleet knows:
``importance:{seeds}:<crawlid>:members`` remembers it by URL). All of it is one Lua call per commit batch
(``lua/importance.lua``), which also does the push of the batch's new URLs of such crawls — the commit takes no more
round trips than without importance. Every key is in the slot of ``seeds`` (Redis Cluster); the two hashes expire
:data:`KEEP_SECONDS` after the crawl's last commit. ``python -m bench.importance`` measures the PageRank captured.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from messaging import keys
from messaging.scripts import lua_constants, lua_script
from messaging.tasks import DEFAULT_PRIORITY, SEEDS_SCORE_LUA, Task, check_priority

KEEP_SECONDS = 7 * 86400
LEVEL_STEP = 16  # priority levels per doubling of a URL's score (one link: +16; 1,000: +159, capped at 255)
RULE_FIELD = "importance"
_CONSTANTS = lua_constants(DEFAULT_PRIORITY=DEFAULT_PRIORITY, LEVEL_STEP=LEVEL_STEP)
IMPORTANCE = lua_script(Path(__file__).with_name("lua") / "importance.lua", prefix=_CONSTANTS + SEEDS_SCORE_LUA)


def wants_importance(rule: dict[str, Any] | None) -> bool:
    return rule is not None and rule.get(RULE_FIELD) is True


@dataclass(frozen=True)
class Link:
    """One distinct link of one page: its crawl, its URL's fingerprint (hex), the linking page's fingerprint and how
    many distinct links that page has (its score is shared among them)."""

    crawlid: str
    fingerprint: str
    parent: str = ""
    links: int = 1


@dataclass(frozen=True)
class ImportanceResult:
    pushed: int  # new in seeds
    raised: int  # waiting in seeds, score raised


def push_by_importance(redis: Any, links: Iterable[Link], new: Sequence[tuple[str, Task] | tuple[str, Task, int]],
                       keep_seconds: float = KEEP_SECONDS, entries: Sequence[str] = ()) -> ImportanceResult:
    """Count ``links`` (one per page and distinct URL), push ``new`` (fingerprint, task[, entry]) into ``seeds`` by
    importance and raise the waiting ones; one round trip. ``entries``: the children journal's entries of the pushing
    pages (``spiders.worker.journal``); a push naming one (its 1-based index) is made only if that entry is still
    there, and every entry is deleted in the same call."""
    links = list(links)
    if not links and not new:
        return ImportanceResult(0, 0)
    crawls: dict[str, int] = {}
    for crawlid in [link.crawlid for link in links] + [push[1].crawlid for push in new]:
        crawls.setdefault(crawlid, len(crawls) + 1)
    script_keys = [keys.SEEDS, keys.SEEDS_SEQUENCE, keys.PENDING_SEEDS]
    for crawlid in crawls:
        script_keys += [keys.importance_inlinks(crawlid), keys.importance_members(crawlid)]
    script_keys += entries
    args: list[Any] = [int(keep_seconds * 1000), len(links)]
    for link in links:
        args += [crawls[link.crawlid], link.fingerprint, link.parent, max(1, link.links)]
    args.append(len(new))
    for fingerprint, task, *entry in new:
        args += [crawls[task.crawlid], fingerprint, task.encode(), check_priority(task.priority), task.crawlid,
                 entry[0] if entry else 0]
    args.append(len(entries))
    pushed, raised = IMPORTANCE.on(redis)(keys=script_keys, args=args, client=redis)
    return ImportanceResult(int(pushed), int(raised))
