"""Widget labels: lines that name a widget, never text ("Advertisement", "Share", "Related articles", "5 min read")."""

from __future__ import annotations

import re

from spiders.extraction.dom import Block

__all__ = ["LABELS", "is_label", "without_labels"]

# Whole lines (case-folded, runs of punctuation and spaces squeezed to one space) that label an ad slot, a share
# row, a list of links, a control or a date, in the languages of the dev set. Each stood on several tuning sites
# with its words outside the reference nearly every time; words a story uses alone as a heading ("Conclusion",
# "Pros", "Table of Contents", "Learn more") are not here: the references keep them.
_LABEL_TEXT = (
    # ad slots
    "advertisement|advertisements|advertising|advert|sponsored|sponsored content|anzeige|werbung|reklama|реклама"
    "|publicidad|publicité|pubblicità|publicidade|广告|廣告"
    # share rows
    "|share|share this|share this article|share this post|share this story|share this page|share article|share on"
    "|share via|podziel się|поделиться|分享|分享到|teilen|partager|compartir|condividi|email|print|copy link|link"
    # lists of links and the page's own controls
    "|related|related articles|related stories|related links|related posts|related topics|related content"
    "|zobacz także|zobacz też|ссылки по теме|tags|tagi|comments|close|caption|toggle caption|hide caption"
    "|text size|like loading|loading|artykuł premium"
    # a date's label on a line of its own (the date follows)
    "|published|published on|updated|last updated|posted|posted on"
)
LABELS = frozenset(_LABEL_TEXT.split("|"))
# "5 min read", "3 MIN. READ", "Reading time: 8 minutes", as label_key spells them
_MINUTES = r"\d+ (?:min|mins|minute|minutes)"
_READING = re.compile(rf"{_MINUTES} read(?:ing)?(?: time)?|(?:average )?reading time(?: {_MINUTES})?")
_SQUEEZE = re.compile(r"[\W_]+")
_MAX_CHARS = 30


def label_key(text: str) -> str:
    """The line as the label table spells it: case-folded, runs of punctuation and spaces as one space."""
    return _SQUEEZE.sub(" ", text.casefold()).strip()


def is_label(text: str) -> bool:
    """A widget's label or a reading-time line (whole line)."""
    key = label_key(text)
    return key in LABELS or _READING.fullmatch(key) is not None


def without_labels(selected: list[Block]) -> list[Block]:
    """Drop the selected lines that only name a widget, on any page. One pass over the selection; only lines of
    at most 30 characters are looked up."""
    return [block for block in selected if block.chars > _MAX_CHARS or not is_label(block.text)]
