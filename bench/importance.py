"""Importance ordering: PageRank captured after crawling 10 % of a scale-free web, by importance vs breadth first.

    python -m bench.importance [--pages 20000] [--fraction 0.1] [--batch 50] [--seeds 5] [--json]

A generated directed graph with a power-law in-degree (each page links 2 to 12 others; a link goes, with probability
0.7, to a page drawn in proportion to the links it already has, else to any page — the copying model of the web
graph) and its PageRank (damping 0.85, power iteration). The crawl is simulated in process over the fleet's real
frontier scripts in a real Redis: the head of ``seeds`` is taken ``--batch`` pages at a time (as the dispatcher
takes it), each page's links are checked against a seen set (the Bloom filter's part) and committed as a worker
commits them — ``breadth``: :func:`messaging.tasks.push_seeds` (priority, then arrival: breadth first); ``importance``:
:func:`spiders.worker.importance.push_by_importance` (every link counted, seen or not; new URLs pushed by their count;
waiting ones raised). Printed: the share of the graph's PageRank held by the pages crawled once ``--fraction`` of them
are, for each order, as a share of the graph's PageRank and of what the best possible order (the pages of highest
PageRank first) would capture; the latter is the figure of the goal, since teleportation leaves every page at least
(1 - 0.85) / n, so that no 10 % of the pages can hold more than about 0.87 of the total. Goal (issue 30): importance
>= 0.9 where breadth first gets 0.7-0.88.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from typing import Any

from bench.dispatch_sim import redis_for_bench
from frontier.bloom import url_fingerprint
from messaging import keys
from messaging.tasks import Task, push_seeds
from spiders.worker.importance import Link, push_by_importance

CRAWL = "importance-bench"
GOAL = 0.9


def scale_free_graph(pages: int, seed: int = 4, copy: float = 0.7) -> list[list[int]]:
    """Out-links of each page: 2-12 per page, targets by preferential attachment (probability ``copy``) or uniform."""
    rng = random.Random(seed)
    targets_pool: list[int] = []
    links: list[list[int]] = [[] for _ in range(pages)]
    for page in rng.sample(range(pages), pages):
        chosen: set[int] = set()
        for _ in range(rng.randint(2, 12)):
            target = rng.choice(targets_pool) if targets_pool and rng.random() < copy else rng.randrange(pages)
            if target != page:
                chosen.add(target)
        links[page] = sorted(chosen)
        targets_pool.extend(chosen)
    return links


def pagerank(links: list[list[int]], damping: float = 0.85, iterations: int = 60) -> list[float]:
    n = len(links)
    rank = [1.0 / n] * n
    for _ in range(iterations):
        dangling = sum(rank[page] for page in range(n) if not links[page])
        base = (1.0 - damping) / n + damping * dangling / n
        new = [base] * n
        for page, targets in enumerate(links):
            if targets:
                share = damping * rank[page] / len(targets)
                for target in targets:
                    new[target] += share
        rank = new
    return rank


def url(page: int) -> str:
    return f"http://site{page % 997}.test/p/{page}"


def crawl(redis: Any, links: list[list[int]], order: str, budget: int, batch: int, seeds: list[int]) -> list[int]:
    """The pages crawled, in order, until ``budget`` pages; the frontier is ``seeds`` in Redis."""
    redis.flushdb()
    starts = [Task(url=url(page), crawlid=CRAWL, spider_type="universal") for page in seeds]
    push_seeds(redis, starts)
    seen = set(seeds)
    crawled: list[int] = []
    while len(crawled) < budget:
        head = redis.zpopmin(keys.SEEDS, min(batch, budget - len(crawled)))
        if not head:
            break
        new: list[tuple[str, Task]] = []
        counted: list[Link] = []
        for member, _score in head:
            task = Task.decode(member)
            page = int(task.url.rsplit("/", 1)[1])
            crawled.append(page)
            parent = url_fingerprint(task.url).hex()
            for target in links[page]:
                child = task.child(url(target))
                fingerprint = url_fingerprint(child.url).hex()
                counted.append(Link(CRAWL, fingerprint, parent, len(links[page])))
                if target not in seen:
                    seen.add(target)
                    new.append((fingerprint, child))
        if order == "importance":
            push_by_importance(redis, counted, new)
        elif new:
            push_seeds(redis, [task for _, task in new])
    return crawled


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--fraction", type=float, default=0.1, help="share of the pages crawled (default 0.1)")
    parser.add_argument("--batch", type=int, default=50, help="pages taken from the head of seeds at a time")
    parser.add_argument("--seeds", type=int, default=5, help="start pages (random)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.pages < 100 or not 0 < args.fraction <= 1:
        parser.error("--pages >= 100 and 0 < --fraction <= 1")
    links = scale_free_graph(args.pages)
    rank = pagerank(links)
    budget = max(1, int(args.pages * args.fraction))
    seeds = random.Random(7).sample(range(args.pages), args.seeds)
    best = sum(sorted(rank, reverse=True)[:budget])
    out = sys.stderr if args.json else sys.stdout
    captured: dict[str, float] = {}
    of_best: dict[str, float] = {}
    with redis_for_bench() as redis:
        for order in ("breadth", "importance"):
            pages = crawl(redis, links, order, budget, args.batch, seeds)
            mass = sum(rank[page] for page in pages)
            captured[order], of_best[order] = round(mass, 4), round(mass / best, 4)
            print(f"{order:>10}: {len(pages)} pages crawled ({args.fraction:.0%}): PageRank captured {mass:.3f} "
                  f"of the graph's, {mass / best:.3f} of the best possible order's", file=out)
    summary = {"pages": args.pages, "crawled": budget, "pagerank_captured": captured,
               "pagerank_captured_of_best": of_best, "best_possible": round(best, 4), "goal": GOAL,
               "met": of_best["importance"] >= GOAL}
    print(f"best possible order (the {budget} pages of highest PageRank): {best:.3f} of the graph's PageRank; goal: "
          f"importance >= {GOAL} of it: {'met' if summary['met'] else 'NOT met'}", file=out)
    if args.json:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
