"""Main-text extraction (seed 4.3.1.4 ②): the line-block distribution method, repaired where it fails.

Usage, with or without Scrapy::

    from spiders.extraction import extract
    extract(response.body, url=response.url)  # -> {"text": str, "title": str | None, "published": str | None}

The pipeline, in one pass each (see README.md in this folder for the reasoning and the parameters):

1. decode bytes (``spiders.encoding``) and parse as a browser does (lexbor, via ``selectolax``; ``parse.py``);
2. read the title (``title.py``) and the metadata publication date (``dates.py``) from the intact tree;
3. linearise the visible text into blocks, the "lines" of the method (``dom.py``, ``markup.py``);
4. score blocks, find the dense region by the line-block scan, anchor it on the headline, repair it with the
   DOM: the article's container, repeated posts (forums), spread content (listings, shops), repeated copies
   (``blocks.py``); join the chosen blocks with newlines;
5. put right text that was encoded twice before it was served ("donâ€™t", ``spiders.encoding.repair_mojibake``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, partial
from typing import NotRequired, TypedDict

from selectolax.lexbor import LexborHTMLParser

from spiders.encoding import decode_html, repair_mojibake
from spiders.extraction.article import without_forms
from spiders.extraction.blocks import Params, select_blocks
from spiders.extraction.dates import DATES_SELECTOR, find_published
from spiders.extraction.dom import Block, Tree, linearise
from spiders.extraction.kinds import DISCUSSION, PRODUCT, drop_badges, is_counter, page_kind
from spiders.extraction.labels import is_byline_line, is_dated_label
from spiders.extraction.lines import without_adjacent_repeats
from spiders.extraction.links import Site, page_site, unknown_site
from spiders.extraction.markdown import render_markdown
from spiders.extraction.parse import clip, clip_bytes, hide_screen_reader_text, parse_html
from spiders.extraction.title import TITLE_SELECTOR, find_title

__all__ = ["Extracted", "Params", "Prepared", "extract", "parse_html", "prepare", "select", "select_and_join"]


# What the title and the metadata date are read from: one query (no element matches both parts twice: the parts'
# tags differ but for meta[content], written once).
_METADATA_SELECTOR = TITLE_SELECTOR + ", " + ", ".join(
    part for part in DATES_SELECTOR.split(", ") if part not in TITLE_SELECTOR.split(", ")
)


class Extracted(TypedDict):
    text: str
    title: str | None
    published: str | None
    markdown: NotRequired[str]  # with ``markdown=True`` only


@dataclass(slots=True)
class Prepared:
    """A page parsed and linearised: everything the block selection needs (kept apart for tuning)."""

    blocks: list[Block]
    tree: Tree  # the elements the blocks point into
    title: str | None
    headline: int | None  # index of the block showing the title as a heading
    published: str | None  # from metadata; None when the page has none
    product: bool = False  # the page's metadata declares a product (og:type, JSON-LD, microdata)
    discussion: bool = False  # ... or a forum thread or Q&A page (schema.org DiscussionForumPosting, QAPage)
    site: Site = unknown_site  # the page's registrable domain (its URL, canonical link or og:url), when known


def _headline_index(blocks: list[Block], title: str | None) -> int | None:
    """The block that shows the page's title as a heading (the anchor of the main text), if there is one."""
    if not title:
        return None
    for block in blocks:
        # A heading that is a link is a teaser of another page (listings name themselves after one of them).
        if block.heading and block.text == title and block.link_density < 0.5:
            return block.index
    # Many CMSs show the headline in a styled <div>/<td>, not a heading: the first plain (not a link, not
    # furniture) line reading exactly the title.
    for block in blocks:
        if block.text == title and not block.furniture and block.link_density < 0.5:
            return block.index
    # A heading broken into lines (a kicker or a subtitle nested in the <h1>): the title is its whole text.
    for block in blocks:
        if block.heading and block.link_density < 0.5 and 2 * len(block.text) >= len(title) and block.text in title:
            return block.index
    return None


def prepare(html: str, params: Params | None = None, url: str | None = None,
            document: LexborHTMLParser | None = None) -> Prepared:
    """Parse ``html`` (unless ``document`` is its :func:`parse_html`, unpruned) and cut it into blocks; read title
    and metadata date first (linearising prunes <head>). ``url`` (else the page's canonical link or og:url) tells
    links to the page's own site from others."""
    html = clip(html)  # an oversized page's metadata is scanned no further than it is parsed
    if document is None:
        document = parse_html(html)
    if document is None:
        return Prepared(blocks=[], tree=Tree(), title=None, headline=None, published=None)
    found = document.css(_METADATA_SELECTOR)  # one pass over the tree for both (each pass costs 0.1-0.15 ms)
    title = find_title(document, found) or None
    published = find_published(document, source=html, found=found)
    params = params or Params()
    kind = page_kind(html, params.offered_products)
    if kind == PRODUCT and params.screen_reader_text:
        hide_screen_reader_text(document)  # "Regular price", "Unit price", "Vendor:" on a shop's every price
    blocks, tree = linearise(document)
    headline = _headline_index(blocks, title)
    site = cache(partial(page_site, html, url))
    return Prepared(blocks, tree, title, headline, published, kind == PRODUCT, kind == DISCUSSION, site)


def select(prepared: Prepared, params: Params | None = None) -> list[Block]:
    """The blocks of the main text; a discussion's counters ("12", "#3") and repeated badges left out."""
    params = params or Params()
    selected = select_blocks(prepared.blocks, prepared.tree, params, prepared.headline, prepared.product, prepared.site)
    if prepared.discussion and params.article_forms and params.form_share:  # "Your Answer", "Post as a guest"
        selected = without_forms(selected, prepared.blocks, prepared.tree, prepared.headline, params.form_share)
    limit = params.counter_chars
    if prepared.discussion and limit:
        selected = [block for block in selected if not is_counter(block, limit)]
    if prepared.discussion and params.badge_repeats:
        selected = drop_badges(selected, params.badge_chars, params.badge_repeats)
    if params.byline_lines:  # "Written by Maya Perez", "Reviewed by …": a byline without a byline class
        selected = [block for block in selected if not is_byline_line(block)]
    if params.dated_labels:  # "Updated October 23, 2025", "Published on: May 2, 2024"
        selected = [block for block in selected if not is_dated_label(block)]
    if params.adjacent_repeats:
        selected = without_adjacent_repeats(selected)
    return selected


def select_and_join(prepared: Prepared, params: Params | None = None) -> str:
    """The main text of a prepared page: the selected blocks, one per line."""
    return "\n".join(block.text for block in select(prepared, params))


def extract(html: str | bytes, url: str | None = None, *, params: Params | None = None,
            markdown: bool = False, images: bool = False, document: LexborHTMLParser | None = None) -> Extracted:
    """Extract a page's main text, title and publication date.

    ``html`` is the page as text, or as raw bytes (decoded by :func:`spiders.encoding.decode_html`). ``url`` (or,
    without it, the page's canonical link) only tells links to the page's own site from links elsewhere; no
    rule depends on which site a page comes from.
    With ``markdown`` the result also holds the main text as CommonMark (``markdown.py``; ``images`` keeps the
    images inside its lines).
    ``document``: the page already parsed by :func:`~spiders.extraction.parse.parse_html` (from the same text, and
    only read since: the extraction prunes it), so that the metadata and the extraction share one parse.
    Never raises on malformed input: a page without text gives ``{"text": "", "title": None, "published": None}``.
    """
    if isinstance(html, bytes | bytearray):
        html, _ = decode_html(clip_bytes(bytes(html)))
    prepared = prepare(html or "", params, url, document)
    selected = select(prepared, params)
    published = prepared.published
    if published is None and selected:  # no metadata: look for a dated byline around the start of the text
        first = selected[0].index
        nearby = [b.text for b in prepared.blocks[max(0, first - 4) : first + 4] if b.chars < 200]
        published = find_published(None, nearby)
    text = repair_mojibake("\n".join(block.text for block in selected))
    title = repair_mojibake(prepared.title) if prepared.title else prepared.title
    extracted: Extracted = {"text": text, "title": title, "published": published}
    if markdown:
        rendered = render_markdown(prepared.blocks, selected, prepared.tree, url, images)
        extracted["markdown"] = repair_mojibake(rendered)
    return extracted
