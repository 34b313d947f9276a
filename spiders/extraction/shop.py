"""Shop pages: whether a page is one product's page, read off its metadata (not its site or its class names)."""

from __future__ import annotations

import re
from bisect import bisect_right

from selectolax.lexbor import LexborHTMLParser

from spiders.extraction.dom import Block, Tree

__all__ = ["REVIEW_WORDS", "form_lines", "is_product", "review_lines", "reviews_line"]

# The page declares itself a product: Open Graph ``og:type`` "product", JSON-LD ``"@type": "Product"`` or
# microdata ``itemtype=".../Product"``. Substring tests first (a regex scan of a whole page costs milliseconds).
_OG_TYPE = re.compile(
    r"""og:type["']\s+content\s*=\s*["']([\w.]*)|content\s*=\s*["']([\w.]*)["']\s+property\s*=\s*["']og:type"""
)
_JSON_LD_PRODUCT = re.compile(r'"@type"\s*:\s*(?:\[\s*)?"Product"')
_JSON_LD_OFFER = re.compile(r'"@type"\s*:\s*"Offer"')

# "Reviews", "Customer reviews (12)", "Avis clients", "Bewertungen", "Opiniones": on a product's page a short line
# holding one of these announces the buyers' reviews, the shop's comments.
_FORM_ID = LexborHTMLParser("<form></form>").css("form")[0].tag_id  # lexbor's fixed id of <form>

REVIEW_WORDS = ("review", "avis", "bewertung", "opinion", "recensi", "rezension", "отзыв", "评价")
_REVIEW = re.compile("|".join(REVIEW_WORDS), re.IGNORECASE)


def is_product(html: str, offered: bool = True) -> bool:
    """Whether the page's metadata says it is a product's page: Open Graph type "product" (not "product.group", a
    category), or a JSON-LD / microdata Product on a page whose Open Graph type is not "article" (a review of the
    product, or a blog post marked up for rich results) — or, with ``offered``, is "article" but whose one JSON-LD
    Product is for sale (an ``Offer``: WooCommerce's SEO plugins type every product's page "article")."""
    kind, at = "", html.find("og:type")
    if at >= 0:
        og_type = _OG_TYPE.search(html, max(0, at - 80), at + 80)
        kind = (og_type.group(1) or og_type.group(2) or "").lower() if og_type is not None else ""
    if kind in ("product", "product.item"):
        return True
    if kind == "article" and offered and '"Offer"' in html:  # one product for sale, not a category's grid
        return len(_JSON_LD_PRODUCT.findall(html)) == 1 and _JSON_LD_OFFER.search(html) is not None
    if kind in ("article", "product.group"):
        return False
    if 'schema.org/Product"' in html or "schema.org/Product'" in html:  # microdata's itemtype
        return True
    return '"Product"' in html and _JSON_LD_PRODUCT.search(html) is not None


def review_lines(blocks: list[Block]) -> list[int]:
    """The lines of a product's page that may announce its reviews, found once per page (the selection runs up
    to three times): short lines (≤ 40 characters) holding a reviews word, not list items (tabs, menus)."""
    return [block.index for block in blocks if block.chars <= 40 and _announces_reviews(block)]


def reviews_line(
    blocks: list[Block], values: list[float], span: tuple[int, int], share: float, found: list[int]
) -> int:
    """Index of the line announcing a product's reviews ("Customer Reviews", "4,567 reviews"; ``found`` by
    :func:`review_lines`) after ``share`` of the region's value, looked for up to the page's end (reviews often
    follow the region, in the same container); ``len(blocks)`` when there is none."""
    start, end = span
    found = [i for i in found if i > start]
    if not found:
        return len(blocks)
    total = sum(v for v in values[start:end] if v > 0)
    before, done = 0.0, start
    for i in found:
        before += sum(v for v in values[done:i] if v > 0)
        done = i
        if before >= share * total:
            return i
    return len(blocks)


def _announces_reviews(block: Block) -> bool:
    """A line holding a reviews word, not a list item (tabs, menus)."""
    return block.tag != "li" and _REVIEW.search(block.text) is not None


def form_lines(blocks: list[Block], tree: Tree, headline: int | None, max_share: float) -> set[int]:
    """Indices of the blocks inside a ``<form>`` of a product's page: the shop's interface (variant pickers,
    quantity, "Add to cart", "Notify me" sign-ups). Not a form that holds the headline or more than ``max_share``
    of the page's text: a wrapper round the whole page (ASP.NET) or round the product's whole presentation."""
    starts: list[int] = []  # outermost forms, as element ranges (disjoint, in document order)
    ends: list[int] = []
    tag_ids, i = tree.tag_ids, -1
    while True:  # list.index runs in C: the cost is per form, not per element (it runs on every article)
        try:
            i = tag_ids.index(_FORM_ID, i + 1)
        except ValueError:
            break
        if not ends or i >= ends[-1]:  # a form in a form is the outer form's business
            starts.append(i)
            ends.append(tree.end[i])
    if not starts:
        return set()
    held: list[list[int]] = [[] for _ in starts]
    for block in blocks:
        k = bisect_right(starts, block.element) - 1
        if k >= 0 and block.element < ends[k]:
            held[k].append(block.index)
    total = sum(block.chars for block in blocks)
    inside: set[int] = set()
    for members in held:
        if headline not in members and sum(blocks[b].chars for b in members) <= max_share * total:
            inside.update(members)
    return inside
