"""What a crawl stores for its users, end to end: Markdown main text and structured metadata, chosen per crawl.

The demo web's stories carry OpenGraph, a Twitter card, JSON-LD and microdata (``deploy.demoweb.templates
.article_metadata``); every 7th story also a JSON-LD block that is not JSON. Items are read back from MongoDB.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from markdown_it import MarkdownIt

from deploy.demo_rules import DEMO_LIST_RULE, DEMO_UNIVERSAL_RULE
from deploy.demoweb.sites import build_sites
from deploy.demoweb.templates import MALFORMED_JSON_LD_EVERY

pytestmark = pytest.mark.e2e

NEWS, CHINA = "news.fleet.test", "china.fleet.test"
CRAWL_TIMEOUT = 180


def site_model(demoweb: dict[str, Any], name: str) -> Any:
    return next(s for s in build_sites(demoweb["pages"]) if getattr(s, "name", None) == name)


@pytest.mark.parametrize("page_processes", ["0", "1"], ids=["on-the-reactor", "in-a-process-pool"])
def test_items_carry_markdown_and_metadata_unless_the_crawl_chooses_otherwise(fleet: Any,
                                                                            page_processes: str) -> None:
    news, china = site_model(fleet.demoweb, NEWS), site_model(fleet.demoweb, CHINA)
    fleet.env["CRAWLFLEET_PAGE_PROCESSES"] = page_processes
    fleet.start(list_workers=1, universal_workers=1)
    fleet.submit(
        {"userid": "alice", "crawlid": "news-outputs", "spider_type": "list", "url": fleet.url(NEWS, "/world/"),
         "rule": DEMO_LIST_RULE},
        {"userid": "bob", "crawlid": "china-text-only", "spider_type": "universal", "url": fleet.url(CHINA, "/"),
         "rule": {**DEMO_UNIVERSAL_RULE, "outputs": ["text"]}},
    )
    fleet.wait_finished(["news-outputs", "china-text-only"], CRAWL_TIMEOUT)

    items = fleet.items("news-outputs")
    assert len(items) == len(news.section_ids("world"))
    broken_seen = 0
    parser = MarkdownIt("commonmark")
    for item in items:
        article_id = int(re.search(r"-([0-9]+)\.html$", item["url"]).group(1))
        article = news.article(article_id)
        headline = article.headline
        metadata = item["metadata"]
        assert metadata["title"] == headline.title and metadata["author"] == [article.author]
        assert metadata["published"] == headline.published.isoformat()
        assert metadata["modified"] > metadata["published"]
        assert metadata["section"] == news.section_label(headline.section) == "World"
        assert metadata["language"] == "en" and metadata["type"] == "article"
        assert metadata["canonical"] == fleet.url(NEWS, headline.path) and metadata["image"].startswith("http://")
        if article_id % MALFORMED_JSON_LD_EVERY == 0:
            broken_seen += 1  # stored all the same, its fields from the blocks that are sound
        markdown = item["markdown"]
        assert markdown.startswith(f"# {headline.title}\n\n")
        html = parser.render(markdown)
        for paragraph in article.paragraphs:
            assert f"<p>{paragraph}</p>" in html.replace("&quot;", '"').replace("&#39;", "'")
        assert "Advertisement" not in markdown and item["text"]
    assert broken_seen >= 1
    worker_logs = "".join(fleet.procs.log(proc) for proc in fleet.workers.values())
    assert ("page work (extraction, Markdown, metadata) in 1 process(es)" in worker_logs) == (page_processes == "1")

    items = fleet.items("china-text-only")
    assert len(items) == china.articles
    for item in items:
        assert item["text"] and item["title"] and "markdown" not in item and "metadata" not in item
