"""Widget labels: lines that name a widget, never text ("Advertisement", "Share", "Related articles", "5 min read")."""

from __future__ import annotations

import re
from functools import lru_cache

from spiders.extraction.dom import Block

__all__ = ["LABELS", "is_byline_line", "is_dated_label", "is_label", "without_labels"]

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
    # teaser lists' and feedback widgets' names (tenth round)
    "|up next|continue reading|latest stories|more stories|read more|read next|keep reading|you may also like"
    "|you might also like|more from|recommended|recommended for you|popular posts|most popular|trending|trending now"
    "|explore more|next article|previous article|next post|previous post|back to top|was this page helpful"
    "|was this article helpful|was this helpful|was this post helpful|was the article useful|was this article useful"
    "|did you find this article helpful|did you find this helpful|is this page useful"
    # a date's label on a line of its own (the date follows)
    "|published|published on|updated|last updated|posted|posted on"
)
LABELS = frozenset(_LABEL_TEXT.split("|"))
# "5 min read", "3 MIN. READ", "Reading time: 8 minutes", as label_key spells them
_MINUTES = r"\d+ (?:min|mins|minute|minutes)"
_READING = re.compile(rf"{_MINUTES} read(?:ing)?(?: time)?|(?:average )?reading time(?: {_MINUTES})?")
# "Written by Maya Perez", "Reviewed by Kristina Katt, CPA, EA", "Fact checked by: …", "Posted by Lola": a byline
# without a byline class (those go with drop_bylines). Not "Published by" (a game's publisher on a store's card).
_BYLINE = re.compile(
    r"\W*(?:written|(?:medically |expert )?reviewed|fact[\W_]*checked|edited|posted|authored|verified)[\W_]+by\b.*",
    re.IGNORECASE | re.DOTALL,
)
_BYLINE_CHARS = 60
# "Updated October 23, 2025", "Published on: February 14, 2025", "Last Updated: Nov 4, 2025", "Posted 6 years ago":
# a date's label and the date on one line (the label alone is in the table above); a digit somewhere after it.
_DATED = re.compile(
    r"\W*(?:(?:last |date last )?(?:updated|reviewed|modified)|published|posted)(?: on| at)?\s*:?\s*(?=.*\d).{0,30}",
    re.IGNORECASE | re.DOTALL,
)
_DATED_CHARS = 45
_SQUEEZE = re.compile(r"[\W_]+")
_MAX_CHARS = 30


def label_key(text: str) -> str:
    """The line as the label table spells it: case-folded, runs of punctuation and spaces as one space."""
    return _SQUEEZE.sub(" ", text.casefold()).strip()


@lru_cache(maxsize=8192)  # a page repeats its short lines (a widget per card, cloned slides): judged once
def is_label(text: str) -> bool:
    """A widget's label or a reading-time line (whole line)."""
    key = label_key(text)
    return key in LABELS or _READING.fullmatch(key) is not None


def without_labels(selected: list[Block]) -> list[Block]:
    """Drop the selected lines that only name a widget, on any page. One pass over the selection; only lines of
    at most 30 characters are looked up."""
    return [block for block in selected if block.chars > _MAX_CHARS or not is_label(block.text)]


def is_byline_line(block: Block) -> bool:
    """A short line that is only a byline by its words ("Written by …", "Reviewed by …"), at most 60 characters."""
    return block.chars <= _BYLINE_CHARS and _BYLINE.match(block.text) is not None


def is_dated_label(block: Block) -> bool:
    """A short line that is a date's label and the date ("Updated October 23, 2025", "Published on: May 2, 2024"),
    at most 45 characters."""
    return block.chars <= _DATED_CHARS and _DATED.fullmatch(block.text.strip()) is not None
