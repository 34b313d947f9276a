"""Script placeholders: the short lines a page shows until its script fills a slot ("Loading paragraph...")."""

from __future__ import annotations

from collections import Counter

from spiders.extraction.dom import Block
from spiders.extraction.markup import WORDS

__all__ = ["without_placeholders"]

_ELLIPSES = ("...", "…")


def without_placeholders(blocks: list[Block], selected: list[Block], max_words: int) -> list[Block]:
    """Drop the selected lines of at most ``max_words`` words that end with an ellipsis and stand at least twice
    on the page: "Loading paragraph...", "Loading image...", "Loading…" wait for a script in every slot it fills.
    A sentence cut short ("Można nago…", "So frustrating …") is written once. One pass over the selection, and
    one over the page only when some selected line qualifies."""
    candidates = {
        block.text
        for block in selected
        if block.chars <= 12 * max_words
        and block.text.endswith(_ELLIPSES)
        and len(WORDS.findall(block.text)) <= max_words
    }
    if not candidates:
        return selected
    seen = Counter(block.text for block in blocks if block.text in candidates)
    return [block for block in selected if seen[block.text] < 2]
