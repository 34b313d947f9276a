"""Structured metadata (spiders.extraction.metadata, spiders.pipelines.metadata): normalised, bounded, forgiving."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from spiders.extraction.metadata import MAX_LIST, MAX_VALUE_CHARS, page_metadata
from spiders.pipelines.metadata import MetadataPipeline

pytestmark = pytest.mark.unit

NEWS = """<!doctype html><html lang="en-gb"><head><title>Storm | Daily Test</title>
<link rel="canonical" href="/2026/03/storm">
<meta property="og:title" content="Storm closes the harbour">
<meta property="og:image" content="/img/storm.jpg">
<meta property="og:type" content="article">
<meta name="twitter:card" content="summary_large_image"><meta name="twitter:title" content="Storm (twitter)">
<meta property="article:section" content="Weather">
<script type="application/ld+json">{"@context": "https://schema.org", "@graph": [
  {"@type": "WebSite", "name": "Daily Test"},
  {"@type": ["NewsArticle"], "headline": "Storm closes the harbour", "datePublished": "2026-03-14T08:00:00Z",
   "dateModified": "2026-03-14T09:30:00Z", "author": [{"@type": "Person", "name": "Maya Perez"}, "Li Wei"],
   "inLanguage": "en_GB", "publisher": {"@type": "Organization", "name": "Daily Test"}}]}</script>
<script type="application/ld+json">{"@type": "NewsArticle", "headline": "broken" </script>
</head><body><h1>Storm closes the harbour</h1></body></html>"""

SHOP = """<html><head><title>Kettle</title></head><body>
<div itemscope itemtype="https://schema.org/Product"><h1 itemprop="name">Steel kettle 1.7 l</h1>
<div itemprop="offers" itemscope itemtype="https://schema.org/Offer"><span itemprop="price" content="39.90">39,90</span>
<meta itemprop="priceCurrency" content="EUR"><link itemprop="availability" href="https://schema.org/InStock"></div>
</div></body></html>"""


def test_news_page_fields_from_json_ld_opengraph_and_head():
    metadata, broken = page_metadata(NEWS, "https://daily.test/2026/03/storm?ref=x")
    assert broken == 1  # the second block is not JSON: skipped, counted
    assert metadata["title"] == "Storm closes the harbour"  # OpenGraph before Twitter and <title>
    assert metadata["author"] == ["Maya Perez", "Li Wei"]
    assert metadata["published"] == "2026-03-14T08:00:00Z" and metadata["modified"] == "2026-03-14T09:30:00Z"
    assert metadata["section"] == "Weather" and metadata["language"] == "en-GB"
    assert metadata["canonical"] == "https://daily.test/2026/03/storm"
    assert metadata["image"] == "https://daily.test/img/storm.jpg"
    assert metadata["site_name"] == "Daily Test" and "product" not in metadata


def test_product_from_microdata():
    metadata, broken = page_metadata(SHOP, "https://shop.test/kettle")
    assert broken == 0
    assert metadata["product"] == {"name": "Steel kettle 1.7 l", "price": "39.90", "currency": "EUR",
                                   "availability": "InStock"}


def test_product_from_json_ld_aggregate_offer_and_opengraph_price():
    page = """<html><head><script type="application/ld+json">
    // a comment line, as some plugins write
    {"@type": "Product", "name": "Tent", "brand": {"@type": "Brand", "name": "Peak"},
     "offers": {"@type": "AggregateOffer", "lowPrice": 120, "priceCurrency": "USD",
                "availability": "http://schema.org/OutOfStock"}}</script></head><body></body></html>"""
    metadata, broken = page_metadata(page)
    assert broken == 0
    assert metadata["product"] == {"name": "Tent", "price": "120", "currency": "USD", "availability": "OutOfStock",
                                   "brand": "Peak"}
    og = ('<html><head><meta property="og:type" content="product"><meta property="og:title" content="Lamp">'
          '<meta property="product:price:amount" content="15.00"><meta property="product:price:currency" '
          'content="GBP"></head></html>')
    assert page_metadata(og)[0]["product"] == {"price": "15.00", "currency": "GBP", "name": "Lamp"}


def test_bounded_and_never_raising():
    huge = "x" * (MAX_VALUE_CHARS * 5)
    authors = [{"name": f"Author {i}"} for i in range(1000)]
    block = json.dumps({"@type": "Article", "headline": huge, "author": authors, "keywords": ["k"] * 5000})
    nested = "[" * 100_000 + "]" * 100_000  # deeper than json can read: a broken block, not a crash
    page = (f'<html><head><script type="application/ld+json">{block}</script>'
            f'<script type="application/ld+json">{nested}</script>'
            f'<script type="application/ld+json">{{"@type": "Article", "author": 5, "datePublished": true}}</script>'
            "</head></html>")
    metadata, broken = page_metadata(page)
    assert broken == 1
    assert len(metadata["title"]) == MAX_VALUE_CHARS and len(metadata["author"]) == MAX_LIST
    assert len(json.dumps(metadata)) < 10 * MAX_VALUE_CHARS
    for garbage in ("", "<<<>>>", "\x00" * 10, '<script type="application/ld+json">null</script>',
                    '<script type="application/ld+json">[1, "a", {"@type": 7}]</script>', "<div itemscope>"):
        assert isinstance(page_metadata(garbage)[0], dict)


class Stats:
    def __init__(self) -> None:
        self.values: Counter[str] = Counter()

    def inc_value(self, key: str, n: int = 1) -> None:
        self.values[key] += n


def test_pipeline_adds_metadata_keeps_the_html_and_follows_outputs():
    stats = Stats()
    pipeline = MetadataPipeline(stats=stats)
    item = pipeline.process_item({"url": "https://daily.test/2026/03/storm", "_html": NEWS})
    assert item["metadata"]["author"] == ["Maya Perez", "Li Wei"] and item["_html"] == NEWS
    assert stats.values["metadata/broken"] == 1
    skipped = pipeline.process_item({"url": "https://daily.test/a", "_html": NEWS, "_outputs": ["text"]})
    assert "metadata" not in skipped
    assert pipeline.process_item({"url": "https://daily.test/list"}) == {"url": "https://daily.test/list"}


def test_pipeline_keeps_the_item_when_reading_fails(monkeypatch):
    import spiders.pipelines.metadata as module

    def broken(html, url, document=None):
        raise RecursionError("too deep")

    monkeypatch.setattr(module, "page_metadata", broken)
    stats = Stats()
    item = MetadataPipeline(stats=stats).process_item({"url": "https://x.test/", "_html": NEWS, "title": "kept"})
    item.pop("_document")  # the parsed page, left for the extraction pipeline all the same
    assert item == {"url": "https://x.test/", "_html": NEWS, "title": "kept"}
    assert stats.values["metadata/failed"] == 1


def counting_parses(monkeypatch) -> list[str]:
    """Count the lexbor parses of pages, wherever the extraction, the metadata and the pipelines import it."""
    import spiders.extraction as extraction
    import spiders.pipelines.metadata as metadata_pipeline
    from spiders.extraction.parse import parse_html

    parsed: list[str] = []

    def counted(html):
        parsed.append(html)
        return parse_html(html)

    monkeypatch.setattr(extraction, "parse_html", counted)
    monkeypatch.setattr(metadata_pipeline, "parse_html", counted)
    return parsed


def test_metadata_and_extraction_pipelines_parse_a_page_once(monkeypatch):
    from spiders.extraction import extract
    from spiders.pipelines.extract import ExtractPipeline

    parsed = counting_parses(monkeypatch)
    item = {"url": "https://x.test/storm", "_html": NEWS}
    item = ExtractPipeline().process_item(MetadataPipeline().process_item(item))
    assert len(parsed) == 1
    assert "_document" not in item and "_html" not in item
    alone = extract(NEWS, "https://x.test/storm", markdown=True)  # the same fields as from a parse of its own
    assert {name: item.get(name) for name in ("text", "title", "published", "markdown")} == {
        name: alone.get(name) for name in ("text", "title", "published", "markdown")}
    assert item["metadata"] == page_metadata(NEWS, "https://x.test/storm")[0]


def test_page_work_parses_a_page_once_for_metadata_extraction_and_markdown(monkeypatch):
    from spiders.pipelines.pageproc import page_work

    parsed = counting_parses(monkeypatch)
    result = page_work(NEWS, "https://x.test/storm", ["text", "markdown", "metadata"])
    assert len(parsed) == 1
    assert result["metadata"] == page_metadata(NEWS, "https://x.test/storm")[0]
    assert result["extracted"]["text"] and result["extracted"]["markdown"]
