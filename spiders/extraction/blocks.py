"""Choose the main-text blocks: line-block density, then DOM-aware repair of its known failures."""

from __future__ import annotations

from dataclasses import dataclass, replace

from lxml import etree

from spiders.extraction.dom import Block

__all__ = ["Params", "block_value", "select_blocks"]


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
    anchor_reach: int = 12  # an anchored region starts at most this many blocks after the headline
    anchor_share: float = 0.1  # ... and is preferred when worth at least this share of the densest region
    repeat_levels: int = 4  # how far above the container to look for repeated posts (0: never)
    repeat_min_items: int = 3  # posts: at least this many same-tag-and-class siblings ...
    repeat_min_chars: int = 40  # ... holding at least this much running text each ...
    repeat_share: float = 0.5  # ... in at least this share of them
    include_headline: bool = True  # an article's text starts with its headline (when the region is anchored on it)
    dedupe_chars: int = 30  # a block repeating an earlier one this long is dropped (print copies, quotes of quotes)
    spread_share: float = 0.5  # no headline-anchored article and the dense region holds less of the page's text
    end_drop: float = 0.25  # the region ends where its running value falls to this share of its peak ...
    article_link_max: float = 0.8  # ... but in an article under its headline only lines less linked than this
    end_ratio: float = 0.5  # ... when the blocks after that valley are this much shorter than the article's (0: off)
    comments_cut: bool = True  # an article ends at a short line announcing its comments ("13 Comment(s)")
    end_tiny: int = 15  # ... and most of them are no longer than this (votes, counters, buttons, form labels)


def block_value(block: Block, params: Params) -> float:
    """How much a block looks like running text: its length less link text (squared density, and a penalty per
    link character so that link lists count against a region), less if it sits in furniture."""
    if block.heading:
        return 0.0
    value = block.chars * (1.0 - block.link_density) ** 2 - params.link_penalty * block.link_chars
    if block.furniture:
        value *= params.furniture_weight
    return value


def _cost(values: list[float], params: Params) -> float:
    """Per-block threshold of the line-block scan: a share of the peak density of 2k+1 consecutive blocks."""
    n, k = len(values), params.window
    prefix = [0.0]
    for v in values:
        prefix.append(prefix[-1] + v)
    peak = max((prefix[min(n, i + k + 1)] - prefix[max(0, i - k)]) / (2 * k + 1) for i in range(n))
    return max(params.min_cost, params.cost_ratio * peak)


def _densest_region(values: list[float], cost: float) -> tuple[tuple[int, int], float]:
    """The line-block step: the contiguous run of blocks maximising sum(value - cost) (Kadane), which is "the
    dense region holding the peak" of the seed with a threshold that bridges short gaps (a caption, an ad) but
    not long thin stretches (menus)."""
    best, best_span = float("-inf"), (0, 0)
    running, start = 0.0, 0
    for i, v in enumerate(values):
        if running <= 0:
            running, start = 0.0, i
        running += v - cost
        if running > best:
            best, best_span = running, (start, i + 1)
    return best_span, best


def _anchored_region(values: list[float], cost: float, anchor: int, reach: int) -> tuple[tuple[int, int], float]:
    """The best run that starts within ``reach`` blocks after the headline: news text follows its title.
    One pass over prefix sums: the best run ending at ``end`` starts where the prefix sum is lowest."""
    best, best_span = float("-inf"), (anchor, anchor + 1)
    prefix = low = 0.0
    low_start, last_start = anchor, anchor + reach
    for end in range(anchor, len(values)):
        if end <= last_start and prefix < low:
            low, low_start = prefix, end
        prefix += values[end] - cost
        if prefix - low > best:
            best, best_span = prefix - low, (low_start, end + 1)
    return best_span, best


def _article_end(
    blocks: list[Block], values: list[float], cost: float, span: tuple[int, int], params: Params
) -> tuple[int, int]:
    """Where a short article runs on into comments, rating widgets and teaser lists: the region's running value
    sinks into a deep valley (a stretch of link lists and form labels) and what follows is made of much shorter
    lines (user names, dates, votes) than the article before it: most of them hold at most ``end_tiny``
    characters and their mean is below ``end_ratio`` of the article's. Cut the region at that valley.
    Linear: prefix sums answer each valley's questions in O(1)."""
    start, end = span
    text = [0]  # prefix sums of non-link characters ...
    tiny = [0]  # ... and of tiny lines, over the span
    for i in range(start, end):
        own = blocks[i].chars - blocks[i].link_chars
        text.append(text[-1] + own)
        tiny.append(tiny[-1] + (own <= params.end_tiny))
    following = [end] * (end - start + 1)  # the first block at or after i worth more than the cost
    for i in range(end - 1, start - 1, -1):
        following[i - start] = i if values[i] > cost else following[i - start + 1]
    running = peak = 0.0
    peak_end = start
    for i in range(start, end):
        running += values[i] - cost
        if running > peak:
            peak, peak_end = running, i + 1
        elif peak > 0 and running <= params.end_drop * peak:
            rest = following[i + 1 - start]
            if rest < end:
                rest_lines, article_lines = end - rest, peak_end - start
                rest_mean = (text[end - start] - text[rest - start]) / rest_lines
                article_mean = text[peak_end - start] / article_lines
                mostly_tiny = 2 * (tiny[end - start] - tiny[rest - start]) > rest_lines
                if mostly_tiny and rest_mean < params.end_ratio * article_mean:
                    return (start, peak_end)
            running = peak = 0.0  # judge later valleys on their own
    return span


# "Comments", in the languages of the pages: a short line holding one of these announces the readers' comments.
_COMMENT_WORDS = ("comment", "коммент", "komentar", "kommentar", "σχόλι", "评论", "留言", "opini", "відгук", "отзыв")


def _before_comments(blocks: list[Block], values: list[float], span: tuple[int, int]) -> tuple[int, int]:
    """End an article's region at the short line announcing its comments ("13 Comment(s)", "Комментарии (4)"),
    when at least half of the region's value comes before it."""
    start, end = span
    total = sum(v for v in values[start:end] if v > 0)
    before = 0.0
    for i in range(start, end):
        block = blocks[i]
        # Not a list item: a tab or menu entry "Comments (0)" can sit above the text.
        if i > start and block.chars <= 40 and block.tag != "li" and before >= 0.5 * total:
            lowered = block.text.lower()
            if any(word in lowered for word in _COMMENT_WORDS):
                return (start, i)
        if values[i] > 0:
            before += values[i]
    return span


def _container(blocks: list[Block], values: list[float], span: tuple[int, int], params: Params) -> etree._Element:
    """The deepest element that holds ``coverage`` of the region's value: the article's own container."""
    weight: dict[etree._Element, float] = {}
    depth: dict[etree._Element, int] = {}
    total = 0.0
    for i in range(*span):
        if values[i] <= 0:
            continue
        total += values[i]
        chain = []
        element = blocks[i].element
        while element is not None:
            weight[element] = weight.get(element, 0.0) + values[i]
            chain.append(element)
            element = element.getparent()
        for level, element in enumerate(reversed(chain)):
            depth[element] = level
    best, best_depth = None, -1
    for element, w in weight.items():
        if w >= params.coverage * total and depth[element] > best_depth:
            best, best_depth = element, depth[element]
    return best if best is not None else blocks[span[0]].element


_TABLE_TAGS = frozenset(("table", "tbody", "thead", "tfoot", "tr", "td", "th"))


def _owners(items: list[etree._Element]) -> dict[etree._Element, etree._Element]:
    """Every element inside one of ``items`` -> that item (one walk in C per item)."""
    return {element: item for item in items for element in item.iter()}


def _repeated_items(
    blocks: list[Block], values: list[float], container: etree._Element, params: Params
) -> dict[etree._Element, etree._Element] | None:
    """Forum threads, answers, reviews: when the article's container is (inside) one of several siblings with the
    same tag and class that each hold running text, those siblings together are the main content. The class
    must be set (bare <div>s and table cells are layout) and most siblings must hold text (a row of cards does
    not). Returns the owner map of those items, or None."""
    element = container
    for _ in range(params.repeat_levels):
        parent = element.getparent()
        if parent is None or element.tag in ("body", "html"):
            return None
        tag, names = element.tag, element.get("class")
        if names and tag not in _TABLE_TAGS:
            items = [sibling for sibling in parent if sibling.tag == tag and sibling.get("class") == names]
            if len(items) >= params.repeat_min_items:
                owners = _owners(items)
                text: dict[etree._Element, int] = {}
                for i, block in enumerate(blocks):
                    owner = owners.get(block.element)
                    if owner is not None and values[i] > 0 and block.link_density <= params.link_density_max:
                        text[owner] = text.get(owner, 0) + block.chars
                posts = sum(1 for chars in text.values() if chars >= params.repeat_min_chars)
                if posts >= params.repeat_min_items and posts >= params.repeat_share * len(items):
                    return owners
        element = parent
    return None


def select_blocks(blocks: list[Block], params: Params | None = None, headline: int | None = None) -> list[Block]:
    """Return the main-text blocks in document order (empty when the page has no text).

    ``headline`` is the index of the block holding the page's confirmed title, if any."""
    params = params or Params()
    if not blocks:
        return []
    trust_furniture = True
    furniture_chars = sum(b.chars for b in blocks if b.furniture)
    if furniture_chars > params.furniture_max_share * sum(b.chars for b in blocks):
        # A page cannot be mostly furniture: a wrapper's class ("docs-sidebar-layout") or an unclosed <button>
        # swallowing the page misled the flags, so here they say nothing.
        params, trust_furniture = replace(params, furniture_weight=1.0), False
    values = [block_value(b, params) for b in blocks]
    cost = _cost(values, params)
    span, value = _densest_region(values, cost)
    if headline is not None and span[0] <= headline < span[1]:
        span = (headline, span[1])  # what precedes the title is teasers and navigation, not the article
    elif headline is not None:
        anchored, anchored_value = _anchored_region(values, cost, headline, params.anchor_reach)
        if anchored_value >= params.anchor_share * value:
            span = anchored
    spread = False
    article = headline is not None and 0 <= span[0] - headline <= params.anchor_reach
    if params.spread_share and not article:
        # No article under a headline, and the densest run holds little of the page's text: a listing, a shop
        # grid, a landing page. Their main content is spread over the page, so take the container of it all.
        positive = sum(v for v in values if v > 0)
        if positive and sum(v for v in values[span[0] : span[1]] if v > 0) < params.spread_share * positive:
            spread, span = True, (0, len(blocks))
    if params.end_ratio and not spread:
        span = _article_end(blocks, values, cost, span, params)
    if params.comments_cut and article:
        span = _before_comments(blocks, values, span)
    container = _container(blocks, values, span, params)
    inside = set(container.iter())
    if spread:
        span = (0, 0)
    posts = _repeated_items(blocks, values, container, params) if params.repeat_levels else None
    selected = []
    for i, block in enumerate(blocks):
        in_region = span[0] <= i < span[1]
        furniture = block.furniture and trust_furniture
        if posts is not None and block.element in posts:
            if block.link_density <= params.link_density_max:
                selected.append(block)
            continue
        if not in_region and block.element not in inside:
            continue
        if block.link_density > params.link_density_max and not (
            ((in_region and (not article or block.link_density < params.article_link_max)) or spread)
            and block.chars >= params.region_link_chars
            and not furniture
        ):
            continue
        if furniture and not in_region:
            continue
        selected.append(block)
    if params.include_headline and article and (not selected or selected[0].index > headline):
        selected.insert(0, blocks[headline])  # the article starts with its headline
    return _without_repeats(selected, params.dedupe_chars) if params.dedupe_chars else selected


def _without_repeats(selected: list[Block], min_chars: int) -> list[Block]:
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
