"""Page work in a process pool: how big the pool is, and what one page's work returns (pure functions)."""

from __future__ import annotations

import pytest

from spiders.pipelines.extract import ExtractPipeline
from spiders.pipelines.metadata import MetadataPipeline
from spiders.pipelines.pagework import page_work, pool_size
from tests.unit.test_metadata import NEWS

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("setting", "host_workers", "cores", "expected"), [
    (0, 1, 8, 0), (3, 4, 2, 3),  # explicit
    (-1, 1, 2, 1), (-1, 2, 2, 0), (-1, 2, 3, 1), (-1, 0, 1, 0), (-1, 4, 4, 0),  # more than one core per worker
])
def test_pool_size(setting, host_workers, cores, expected):
    assert pool_size(setting, host_workers, cores) == expected


def test_page_work_gives_what_the_two_pipelines_give():
    url = "https://daily.test/2026/03/storm"
    result = page_work(NEWS, url, ["text", "markdown", "metadata"])
    item = ExtractPipeline().process_item(MetadataPipeline().process_item({"url": url, "_html": NEWS}))
    assert result["metadata"] == item["metadata"] and result["broken"] == 1
    assert {k: result["extracted"][k] for k in ("text", "markdown", "title", "published")} == {
        k: item.get(k) for k in ("text", "markdown", "title", "published")}
    only_text = page_work(NEWS, url, ["text"])
    assert "metadata" not in only_text and "markdown" not in only_text["extracted"]
