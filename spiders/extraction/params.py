"""The extractor's parameters, one dataclass: every rule's switch and threshold, documented in README.md
("Parameters"), searched by ``bench/extraction_tune.py``."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Params"]


@dataclass(frozen=True)
class Params:
    window: int = 2  # k: blocks on each side that make up one line block
    cost_ratio: float = 0.15  # per-block cost, as a share of the peak line-block density
    min_cost: float = 8.0  # ... but never below this many characters
    link_density_max: float = 0.45  # blocks with more link text than this are navigation ...
    region_link_chars: int = 20  # ... unless they sit inside the dense region and are this long (headlines)
    link_penalty: float = 0.5  # value lost per character of link text: link lists push the region away
    furniture_weight: float = 0.1  # value kept by blocks inside nav/aside/footer/comments/related ...
    furniture_max_share: float = 0.9  # ... unless furniture is more than this share of the page's text
    coverage: float = 0.8  # the container must hold this share of the dense region's value
    anchor_reach: int = 8  # an anchored region starts at most this many blocks after the headline
    anchor_share: float = 0.1  # ... and is preferred when worth at least this share of the densest region
    repeat_levels: int = 10  # how far above the container to look for repeated posts (0: never)
    repeat_min_items: int = 3  # posts: at least this many same-tag-and-class siblings ...
    repeat_min_chars: int = 40  # ... holding at least this much running text each ...
    repeat_share: float = 0.5  # ... in at least this share of them
    repeat_related: bool = True  # ... siblings whose class words hold one another's count too (a thread's first post)
    include_headline: bool = True  # an article's text starts with its headline (when the region is anchored on it)
    dedupe_chars: int = 30  # a block repeating an earlier one this long is dropped (print copies, quotes of quotes)
    spread_share: float = 0.5  # no headline-anchored article and the dense region holds less of the page's text
    section_title_words: int = 2  # ... or the headline has at most this many words: a section's name (0: never)
    end_drop: float = 0.25  # the region ends where its running value falls to this share of its peak ...
    article_link_max: float = 0.8  # ... but in an article under its headline only lines less linked than this
    end_ratio: float = 0.5  # ... when the blocks after that valley are this much shorter than the article's (0: off)
    comments_cut: bool = True  # an article ends at a short line announcing its comments ("13 Comment(s)") ...
    comments_share: float = 0.25  # ... when this share of the region's value comes before it
    end_tiny: int = 15  # ... and most of them are no longer than this (votes, counters, buttons, form labels)
    min_line_words: float = 5.0  # an "article" whose unlinked lines average fewer words is spread content (0: off)
    post_furniture: bool = True  # furniture nested in a post with text of its own is not the post (False: kept)
    drop_buttons: bool = True  # a <button>'s label is interface, even inside the region ("Add to Cart", sizes)
    announced_lists: bool = True  # linked list items right after a line ending with a colon are text
    drop_captions: bool = True  # an article's <figcaption> lines are not its text
    card_chars: int = 40  # no article: lines this long inside a whole-card link count as text (0: off)
    card_links: bool = True  # spread content: a short link between two kept lines is a line of the same card
    drop_bylines: bool = True  # lines inside a byline (class/id) are not the text of an article or a post
    furniture_line_chars: int = 40  # furniture lines shorter than this go, inside the region too (0: off)
    offered_products: bool = True  # a page typed "article" whose one JSON-LD Product has an Offer is a product's
    reviews_cut: bool = True  # a product's page (by metadata) ends at a line announcing reviews, not at a valley
    product_headline: bool = True  # ... and its selected text starts at its headline, when that is selected
    screen_reader_text: bool = True  # ... and its screen-reader-only labels (sr-only: "Regular price") go
    form_share: float = 0.25  # ... and its <form>s holding at most this share of its text are interface (0: off)
    article_forms: bool = True  # ... and so are those of any page not spread content, or a discussion (sign-ups, polls)
    placeholder_words: int = 2  # lines of at most this many words ending with "..." twice on the page go (0: off)
    peak_line_cap: float = 1500.0  # a block counts at most this much in the peak density behind the cost (0: off)
    badge_chars: int = 30  # a discussion's short lines (user titles, "Quote") standing in ≥ badge_repeats posts go
    badge_repeats: int = 3  # ... (0: off)
    counter_chars: int = 8  # a discussion's (by metadata) lines this short without letters go: votes, "#12" (0: off)
    panels: bool = True  # closed FAQ answers, inactive tabs are text where the selection takes them (never steer it)
    hero: bool = True  # the furniture-named element (a hero "banner") holding the headline is not furniture
    repeat_run: int = 4  # a run of this many selected lines repeating an earlier run goes: slider clones (0: off)
    card_names: bool = True  # spread content of whole-card links: their short lines, once on the page, are text
    drop_labels: bool = True  # lines that only name a widget ("Advertisement", "Share", "Related articles") go
    offsite_headings: bool = True  # a linked heading ends an article only when it links to another page of the site
    adjacent_repeats: bool = True  # a selected line repeating the line just before it goes (desktop/mobile copies)
    byline_lines: bool = True  # lines that are only a byline by their words go ("Written by …", "Reviewed by …")
    dated_labels: bool = True  # lines that are a date's label and the date go ("Updated October 23, 2025")
