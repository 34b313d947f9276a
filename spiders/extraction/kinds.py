"""A page's kind, read off its own metadata (never its site or its class names): a product's page, a discussion
(forum thread, Q&A), or neither. Substring tests first: a regex scan of a whole page costs milliseconds."""

from __future__ import annotations

import re

from spiders.extraction.dom import Block
from spiders.extraction.shop import is_product

__all__ = ["DISCUSSION", "PRODUCT", "drop_badges", "is_counter", "is_discussion", "page_kind"]

PRODUCT, DISCUSSION = "product", "discussion"

# schema.org types a forum thread or a Q&A page declares (JSON-LD "@type" or microdata itemtype): their replies
# are the page's text, whatever their elements are called ("comment" in Lemmy, Vanilla, Discourse).
_DISCUSSION_TYPES = ("DiscussionForumPosting", "QAPage")


def is_discussion(html: str) -> bool:
    """Whether the page's metadata says it is a forum thread or a Q&A page (schema.org DiscussionForumPosting,
    QAPage: JSON-LD or microdata)."""
    return any(name in html for name in _DISCUSSION_TYPES)  # two substring scans: 0.1 ms for the median page


def page_kind(html: str, offered: bool = True) -> str:
    """``PRODUCT``, ``DISCUSSION`` or "" (an article, a listing, anything else), from the page's metadata
    (``offered``: see :func:`~spiders.extraction.shop.is_product`)."""
    if is_product(html, offered):
        return PRODUCT
    if is_discussion(html):
        return DISCUSSION
    return ""


def is_counter(block: Block, max_chars: int) -> bool:
    """A line of a discussion that is only a number: a vote score, a post's "#12", a reply count. No letter in
    any script (a date, a user name, a one-word reply have some)."""
    return block.chars <= max_chars and not any(character.isalpha() for character in block.text)


def drop_badges(selected: list[Block], max_chars: int, repeats: int) -> list[Block]:
    """A discussion's selected lines less those of at most ``max_chars`` that stand ``repeats`` times or more:
    a member's title under each of their posts ("Senior Member", "macrumors 6502a"), "Quote", "Report"; a count
    and its word are one line whatever the count ("4931 posts", "7 Likes")."""
    counts: dict[str, int] = {}
    keys = [_badge_key(block) if block.chars <= max_chars else "" for block in selected]
    for key in keys:
        if key:
            counts[key] = counts.get(key, 0) + 1
    if not counts or max(counts.values()) < repeats:
        return selected
    return [block for block, key in zip(selected, keys, strict=True) if counts.get(key, 0) < repeats]


# "4931 posts", "1.2k views", "7 Likes": a count and its noun (a user's card, a post's reactions).
_COUNTED = re.compile(r"[\d.,]+[kKmM]?\s*(\w+)")


def _badge_key(block: Block) -> str:
    """What a short line says, a count read as any count."""
    counted = _COUNTED.fullmatch(block.text)
    return "# " + counted.group(1) if counted else block.text
