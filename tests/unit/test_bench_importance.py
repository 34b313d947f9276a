"""The importance benchmark's graph and PageRank (pure parts)."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.importance import pagerank, scale_free_graph

pytestmark = pytest.mark.unit


def test_the_graph_is_scale_free_and_its_pagerank_sums_to_one() -> None:
    links = scale_free_graph(3000)
    assert max(map(len, links)) <= 12 and sum(map(len, links)) > 5 * len(links)
    indegree = Counter(target for targets in links for target in targets)
    degrees = sorted(indegree.values(), reverse=True)
    assert degrees[0] > 20 * (sum(degrees) / len(links))  # hubs: far above the mean in-degree
    rank = pagerank(links)
    assert sum(rank) == pytest.approx(1.0, abs=1e-6)
    assert max(range(len(rank)), key=rank.__getitem__) in {page for page, _ in indegree.most_common(20)}
