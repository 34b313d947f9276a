"""Listings whose cards mix plain and linked lines: the item's name is a short link between its plain lines."""

from __future__ import annotations

from collections import Counter

from spiders.extraction.dom import Block

__all__ = ["bridged_links"]


def bridged_links(
    blocks: list[Block],
    selected: list[Block],
    first: int,
    end: int,
    trust: bool,
    bridged: bool = True,
    cards: bool = False,
) -> list[Block]:
    """Spread content keeps links of at least ``region_link_chars`` only, so a card "1. | Claude | 8.3" or
    "Senior Engineer | Acme | $120k" loses its short linked name while its plain lines stay. A linked line of the
    container whose neighbours on both sides were kept is a line of the same card (``bridged``); so, on a page
    of whole-card links (``cards``: an ``<a>`` around each teaser's blocks), is every short line inside such a
    link ("Sticker Mule", "Sennheiser HD 660S2", "Wall Charger"), not only those between kept lines. Either is
    kept when it is a name — written once on the page (not a badge or a call to action repeated on every card:
    "Sale", "View map", "Circumaural") and made of letters rather than digits (not a price or a count:
    "$549.99", "80 Reviews") — and not a heading (a card's source or section label: "salus.edu", "Boosted").
    One pass."""
    kept = {block.index for block in selected}
    candidates = [
        block
        for block in blocks[1:-1]
        if block.index not in kept
        and block.link_density > 0.5
        and first <= block.element < end
        and not (block.furniture and trust)
        and not block.heading
        and ((bridged and block.index - 1 in kept and block.index + 1 in kept) or (cards and block.wrapped))
    ]
    if not candidates:
        return selected
    seen = Counter(block.text for block in blocks)
    added = [block for block in candidates if seen[block.text] == 1 and _letters(block.text)]
    return sorted(selected + added, key=lambda block: block.index) if added else selected


def _letters(text: str) -> bool:
    """Whether a line is mostly letters: a name, not a price or a count."""
    letters = sum(ch.isalpha() for ch in text)
    return letters > 0 and letters >= 4 * sum(ch.isdigit() for ch in text)
