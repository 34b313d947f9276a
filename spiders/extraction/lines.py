"""Tests on single lines and on a selection of lines, shared by the block selection's rules."""

from __future__ import annotations

from itertools import pairwise

from spiders.extraction.dom import Block
from spiders.extraction.markup import WORDS

__all__ = ["announces", "cell_or_heading", "has_cards", "is_cell", "without_adjacent_repeats", "without_repeats"]


def has_cards(blocks: list[Block], min_chars: int) -> bool:
    """Whether some line of at least ``min_chars`` sits inside a link wrapping block elements (a teaser card)."""
    return any(block.wrapped and block.chars >= min_chars and not block.heading for block in blocks)


def is_cell(block: Block) -> bool:
    """A table cell's line: a table repeats and shortens its values one cell at a time, by design."""
    return block.tag == "td" or block.tag == "th"


def cell_or_heading(block: Block) -> bool:
    """Headings and table cells are short by nature: a furniture-named wrapper's headings are the text's."""
    return block.heading or is_cell(block)


def announces(block: Block) -> bool:
    """A sentence that ends with a colon announces what follows ("Here are some of the courses Google offers:");
    a label does not ("Share this:", "Tags:", "Related posts:", "You might also like:"): five words at least."""
    return block.text.endswith((":", "：")) and not block.heading and len(WORDS.findall(block.text)) >= 5


def without_repeats(selected: list[Block], min_chars: int) -> list[Block]:
    """Drop blocks of at least ``min_chars`` repeating an earlier one: print copies, quotes of quoted posts."""
    seen: set[str] = set()
    kept = []
    for block in selected:
        if block.chars >= min_chars:
            if block.text in seen:
                continue
            seen.add(block.text)
        kept.append(block)
    return kept


def without_adjacent_repeats(selected: list[Block]) -> list[Block]:
    """Drop a line that repeats the selected line just before it: a layout's desktop and mobile copies ("Save 15%"
    · "Save 15%"), an event's date printed twice, a "Read More" per teaser. Not a table cell (a table repeats its
    values one cell at a time), not a line without letters (a chart's "60%" · "60%")."""
    kept = selected[:1]
    for previous, block in pairwise(selected):
        if block.text == previous.text and not is_cell(block) and any(c.isalpha() for c in block.text):
            continue
        kept.append(block)
    return kept
