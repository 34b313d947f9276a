"""The Markdown main text (spiders.extraction.markdown): structure, inline syntax, escaping, the text it keeps."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from selectolax.lexbor import LexborHTMLParser

from bench.extraction_score import tokenize
from spiders.extraction import extract
from spiders.pipelines.extract import ExtractPipeline

pytestmark = pytest.mark.unit

_ROOT = Path(__file__).resolve().parents[2]
DEV_SETS = [base / "shared" / "datasets" / "extraction-dev" for base in (_ROOT.parent, _ROOT.parent.parent)]
DEV_SET = next((path for path in DEV_SETS if path.is_dir()), DEV_SETS[0])
_md = MarkdownIt("commonmark").enable("table")


def rendered(markdown: str) -> LexborHTMLParser:
    return LexborHTMLParser(_md.render(markdown))


def read_as_text(markdown: str) -> str:
    return rendered(markdown).body.text(deep=True, separator="")


ARTICLE = """<html><head><title>Flood defences hold</title></head><body>
<nav><a href="/">Home</a> <a href="/news">News</a></nav>
<article><h1>Flood defences hold</h1>
<p>The <b>new wall</b> held where it was <i>finished</i>, said the <a href="/council?id=4&amp;x=(1)">city council</a>
on Monday, and the rest of it will be built before the autumn, two months early.</p>
<h2>What comes next</h2>
<ul><li>Sandbags will be collected from the river walk this week by volunteers</li>
<li>The ferry runs again from Thursday morning, on the <em>summer</em> timetable
<ol start="3"><li>first crossing at seven in the morning</li><li>last crossing at ten at night</li></ol></li></ul>
<blockquote><p>We were lucky this time, and we know it, said one shop owner on the quay.</p></blockquote>
<pre><code>level(t) = 4.2 m
peak     = 5.1 m</code></pre>
<table><tr><th>Station</th><th>Level</th></tr><tr><td>North | quay</td><td>4.2 m</td></tr>
<tr><td>Old bridge</td><td>5.1 m</td></tr></table>
<p>Literal marks stay text: *not emphasis*, # not a heading, [not a link], &lt;b&gt; and a_b_c.</p>
<p>1. This line is not a list item, although it begins with a number and a dot.</p>
<p>防洪墙经受住了考验，市议会周一表示，其余部分将在秋季前完工。</p>
</article><footer>Copyright <a href="/about">About</a></footer></body></html>"""


def test_structure_is_written_as_commonmark():
    result = extract(ARTICLE, "https://city.test/news/flood", markdown=True)
    markdown = result["markdown"]
    document = rendered(markdown)
    assert [h.text() for h in document.css("h1")] == ["Flood defences hold"]
    assert [h.text() for h in document.css("h2")] == ["What comes next"]
    assert len(document.css("ul > li")) == 2
    ordered = document.css("ul > li ol")
    assert len(ordered) == 1 and ordered[0].attributes.get("start") == "3"
    assert [li.text(deep=True) for li in ordered[0].css("li")] == [
        "first crossing at seven in the morning", "last crossing at ten at night"]
    assert "shop owner" in document.css_first("blockquote").text()
    code = document.css_first("pre code").text()
    assert code == "level(t) = 4.2 m\npeak     = 5.1 m\n"  # the source's line breaks and spaces
    assert [th.text() for th in document.css("thead th")] == ["Station", "Level"]
    assert [td.text() for td in document.css("tbody td")] == ["North | quay", "4.2 m", "Old bridge", "5.1 m"]
    assert document.css_first("strong").text() == "new wall" and document.css_first("em").text() == "finished"
    link = document.css_first("a")
    assert link.text() == "city council" and link.attributes["href"] == "https://city.test/council?id=4&x=%281%29"
    assert "防洪墙经受住了考验，市议会周一表示，其余部分将在秋季前完工。" in markdown


def test_literal_marks_stay_text():
    markdown = extract(ARTICLE, "https://city.test/news/flood", markdown=True)["markdown"]
    document = rendered(markdown)
    paragraphs = [p.text() for p in document.css("p")]
    assert "Literal marks stay text: *not emphasis*, # not a heading, [not a link], <b> and a_b_c." in paragraphs
    assert "1. This line is not a list item, although it begins with a number and a dot." in paragraphs
    assert len(document.css("ol")) == 1 and len(document.css("h1")) == 1


def test_rendered_markdown_reads_as_the_text_field():
    result = extract(ARTICLE, "https://city.test/news/flood", markdown=True)
    assert tokenize(read_as_text(result["markdown"])) == tokenize(result["text"])
    assert "Home" not in result["markdown"] and "Copyright" not in result["markdown"]


def test_markdown_only_when_asked_and_images_only_when_asked():
    page = ("<html><body><article><h1>Birds</h1><p>A heron <img src='/i/heron.jpg' alt='grey heron'> stood in the "
            "shallows of the lake all morning, waiting for fish to come close enough to catch.</p></article>"
            "</body></html>")
    assert "markdown" not in extract(page, "http://birds.test/a")
    plain = extract(page, "http://birds.test/a", markdown=True)["markdown"]
    assert "heron.jpg" not in plain
    with_images = extract(page, "http://birds.test/a", markdown=True, images=True)["markdown"]
    assert "![grey heron](http://birds.test/i/heron.jpg)" in with_images


def test_layout_tables_give_paragraphs_and_script_links_give_text():
    story = " ".join(["The harbour was quiet on the morning after the storm, and the boats stayed in."] * 6)
    page = (f"<html><body><table><tr><td><h1>Harbour</h1><p>{story}</p><p>{story}</p>"
            "<p>Read the <a href='javascript:void(0)'>full report</a> of the harbour master for the details of "
            "the night, the damage and the repairs planned.</p></td></tr></table></body></html>")
    markdown = extract(page, "http://port.test/", markdown=True)["markdown"]
    assert "|" not in markdown and markdown.startswith("# Harbour\n\n")
    assert "full report" in markdown and "javascript" not in markdown


def test_formatting_cut_by_a_block_is_closed_and_reopened():
    page = ("<html><body><article><h1>Cards</h1><p><b>Bold start of a long paragraph that goes on and on <div>"
            "a block inside the bold text, long enough to be kept as text</div> and the bold end of it "
            "all</b></p></article></body></html>")
    result = extract(page, "http://cards.test/", markdown=True)
    assert tokenize(read_as_text(result["markdown"])) == tokenize(result["text"])
    assert "**Bold start of a long paragraph that goes on and on**" in result["markdown"]


def test_pipeline_stores_markdown_and_follows_the_crawls_outputs():
    item = ExtractPipeline().process_item({"url": "https://city.test/news/flood", "_html": ARTICLE})
    assert item["markdown"].startswith("# Flood defences hold") and item["text"].startswith("Flood defences hold")
    only_text = ExtractPipeline().process_item(
        {"url": "https://city.test/news/flood", "_html": ARTICLE, "_outputs": ["text"]})
    assert "markdown" not in only_text and only_text["text"] and "_outputs" not in only_text
    only_markdown = ExtractPipeline().process_item(
        {"url": "https://city.test/news/flood", "_html": ARTICLE, "_outputs": ["markdown"]})
    assert "text" not in only_markdown and only_markdown["markdown"] and only_markdown["title"]


@pytest.mark.skipif(not DEV_SET.is_dir(), reason="extraction-dev set not available")
def test_markdown_keeps_the_texts_tokens_on_dev_pages():
    """On every 25th dev page (all sources and scripts), the rendered Markdown holds the text field's tokens."""
    with open(DEV_SET / "manifest.jsonl", encoding="utf-8") as manifest:
        rows = [json.loads(line) for line in manifest]
    differing = []
    for row in rows[::25]:
        body = gzip.decompress((DEV_SET / row["html"]).read_bytes())
        result = extract(body, url=row.get("url") or None, markdown=True)
        got, want = sorted(tokenize(read_as_text(result["markdown"]))), sorted(tokenize(result["text"]))
        if got != want:
            differing.append(row["id"])
    assert not differing


def test_a_rules_outputs_are_validated():
    from messaging.validation import Rejected, parse_request

    request = {"userid": "u1", "crawlid": "c-1", "url": "http://news.example.com/", "spider_type": "universal",
               "rule": {"rules": [{"follow": True}], "outputs": ["markdown", "metadata"]}}
    assert parse_request(json.dumps(request).encode())
    list_request = {**request, "spider_type": "list", "rule": {"first_page_xpath": {"list_from": "//li"},
                                                               "outputs": []}}
    assert parse_request(json.dumps(list_request).encode())
    for outputs, words in ((["html"], "is not one of"), (["text", "text"], "non-unique"), ("text", "not of type")):
        with pytest.raises(Rejected) as caught:
            parse_request(json.dumps({**request, "rule": {**request["rule"], "outputs": outputs}}).encode())
        assert caught.value.reason.startswith("$.rule.outputs") and words in caught.value.reason
