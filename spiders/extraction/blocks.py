"""Choose the main-text blocks: line-block density, then DOM-aware repair of its known failures."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial
from itertools import accumulate
from operator import sub

from spiders.extraction.article import without_forms
from spiders.extraction.dom import Block, Tree
from spiders.extraction.labels import without_labels
from spiders.extraction.landing import freed_hero
from spiders.extraction.lines import announces, cell_or_heading, has_cards, without_repeats
from spiders.extraction.links import Site, links_elsewhere, unknown_site
from spiders.extraction.listing import bridged_links
from spiders.extraction.markup import WORDS
from spiders.extraction.params import Params
from spiders.extraction.placeholders import without_placeholders
from spiders.extraction.posts import mostly_furniture, owner, repeated_items
from spiders.extraction.runs import without_repeated_runs
from spiders.extraction.shop import form_lines, review_lines, reviews_line

__all__ = ["Params", "block_value", "select_blocks"]


def block_value(block: Block, params: Params, cards: bool = False) -> float:
    """How much a block looks like running text: its length less link text (squared density, and a penalty per
    link character so that link lists count against a region), less if it sits in furniture. With ``cards``, a
    line of at least ``card_chars`` inside a link that wraps whole blocks (a teaser card) counts as plain text.
    Headings and lines of hidden disclosure panels are worth nothing: they follow the region, never make it."""
    if block.heading or block.panel:
        return 0.0
    if cards and block.wrapped and block.chars >= params.card_chars:
        value = float(block.chars)
    else:
        value = block.chars * (1.0 - block.link_density) ** 2 - params.link_penalty * block.link_chars
    if block.furniture:
        value *= params.furniture_weight
    return value


def _cost(values: list[float], params: Params) -> float:
    """Per-block threshold of the line-block scan: a share of the peak density of 2k+1 consecutive blocks
    (windows are cut at the page's ends; the sum is still divided by 2k+1), each block counted up to
    ``peak_line_cap``."""
    n, k, cap = len(values), params.window, params.peak_line_cap
    # One huge line (a 2,400-character code listing) would set the bar above every paragraph around it.
    prefix = [0.0, *accumulate(min(v, cap) for v in values)] if cap else [0.0, *accumulate(values)]
    window_ends = prefix[k + 1 : n + 1]  # block i's window is prefix[max(0, i - k) : min(n, i + k + 1)]
    window_ends += [prefix[n]] * (n - len(window_ends))
    window_starts = [0.0] * min(k, n) + prefix[: max(0, n - k)]
    peak = max(map(sub, window_ends, window_starts)) / (2 * k + 1)
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


def _before_comments(
    blocks: list[Block], values: list[float], span: tuple[int, int], params: Params, tree: Tree, site: Site
) -> tuple[int, int]:
    """End an article's region at the short line announcing its comments ("13 Comment(s)", "Комментарии (4)"),
    when at least ``comments_share`` of the region's value comes before it; or at a linked heading (the first of
    a teaser list) when half of it does, unless the heading links off the site ``site`` or to itself."""
    start, end = span
    total = sum(v for v in values[start:end] if v > 0)
    before = 0.0
    for i in range(start, end):
        block = blocks[i]
        # Not a list item: a tab or menu entry "Comments (0)" can sit above the text.
        if i > start and before >= params.comments_share * total:
            teaser = block.heading and block.link_density >= 0.8 and before >= 0.5 * total
            if teaser and not (params.offsite_headings and links_elsewhere(tree, block.element, site())):
                return (start, i)
            if block.chars <= 40 and block.tag != "li":
                lowered = block.text.lower()
                if any(word in lowered for word in _COMMENT_WORDS):
                    return (start, i)
        if values[i] > 0:
            before += values[i]
    return span


def _container(blocks: list[Block], values: list[float], span: tuple[int, int], tree: Tree, params: Params) -> int:
    """The deepest element that holds ``coverage`` of the region's value: the article's own container.

    Linear in the page's elements (a 10^4-deep page is fine): each element's weight is passed to its parent in
    reverse document order, so an element is complete when it is reached; and as elements covering a share
    above one half form one chain of ancestors, the first that covers enough is the deepest."""
    weight = [0.0] * len(tree)
    total = 0.0
    for i in range(*span):
        value = values[i]
        if value > 0:
            total += value
            weight[blocks[i].element] += value
    if total <= 0:
        return blocks[span[0]].element
    needed, parent = params.coverage * total, tree.parent
    for element in range(len(weight) - 1, -1, -1):
        value = weight[element]
        if value >= needed:
            return element
        if value and element:
            weight[parent[element]] += value
    return blocks[span[0]].element


def select_blocks(
    blocks: list[Block],
    tree: Tree,
    params: Params | None = None,
    headline: int | None = None,
    product: bool = False,
    site: Site = unknown_site,
) -> list[Block]:
    """Return the main-text blocks in document order (empty when the page has no text).

    ``tree`` is the page's element tree the blocks point into; ``headline`` is the index of the block holding
    the page's confirmed title, if any; ``product`` says the page's metadata declares a product; ``site`` gives the
    page's registrable domain, or None when unknown (links to it are the site's own; called only when needed)."""
    params = params or Params()
    if not blocks:
        return []
    if params.hero:
        blocks = freed_hero(blocks, tree, headline, params.furniture_max_share)
    reviews = review_lines(blocks) if product and params.reviews_cut else []
    select = partial(_select, blocks, tree, params, headline, product=product, reviews=reviews, site=site)
    selected, spread, article = select(force_spread=False)
    cards = False
    if params.card_chars and not article and has_cards(blocks, params.card_chars):
        # No article under a headline: the page is a listing, and on a listing whose teasers are whole-card links
        # (<a> around title and summary) the summaries are its text, not navigation. Scored so, the cards make
        # the dense region (or spread content), instead of the one unlinked line between them.
        cards = True
        selected, spread, article = select(force_spread=False, cards=True)
    if params.min_line_words and not spread and _few_words_per_line(selected, params):
        # The "article" holds no running text: an intro line over product cards, a price and a size table, a
        # menu of services. Such a page is spread content whatever its headline says.
        selected, spread, article = select(force_spread=True, cards=cards)
    if params.article_forms and not spread and not product and params.form_share:
        selected = without_forms(selected, blocks, tree, headline, params.form_share)
    # A product's text starts at its name: above it, the shop's header, promotions, breadcrumbs, the seller.
    named = params.product_headline and product and headline is not None and not spread
    if named and headline is not None and any(block.index == headline for block in selected):
        selected = [block for block in selected if block.index >= headline]
    if params.repeat_run and not spread:
        # Not in spread content: a grid's cards repeat their field labels by design ("Seasons: | 3-season").
        selected = without_repeated_runs(selected, params.repeat_run)
    return selected


def _few_words_per_line(selected: list[Block], params: Params) -> bool:
    """Whether the selection's unlinked lines average fewer than ``min_line_words`` words (runs of letters or
    digits, each CJK character one word: Chinese news is not short of words). Words are only counted when the
    lines are short in characters too (a mean word longer than 12 characters is rare enough to ignore)."""
    plain = [block for block in selected if block.link_density <= params.link_density_max]
    if not plain:
        return True
    limit = params.min_line_words * len(plain)
    if sum(block.chars for block in plain) >= 12 * limit:
        return False
    return sum(len(WORDS.findall(block.text)) for block in plain) < limit


@dataclass
class _Page:
    """What the stages of the selection share: the page, its blocks' values, and the region chosen in them."""

    blocks: list[Block]
    tree: Tree
    params: Params
    headline: int | None
    site: Site
    trust_furniture: bool = True  # False when the furniture flags are taken to say nothing (see _distrust)
    drop_bylines: bool = False
    values: list[float] = field(default_factory=list)
    span: tuple[int, int] = (0, 0)  # the region: the densest run of lines (empty once spread)
    spread: bool = False  # the main content is spread over the page (a listing, a shop grid, a landing page)
    article: bool = False  # an article under its headline
    stop: int = 0  # where the selection ends (a product's reviews)
    inside: tuple[int, int] = (0, 0)  # the region's container: its first element and its end
    posts: list[tuple[int, int]] | None = None  # repeated items (a thread's posts), their subtrees
    owners: list[int] = field(default_factory=list)  # per block, the post that holds it (-1: none)
    plain: list[int] = field(default_factory=list)  # per post, its running text outside furniture


def _select(
    blocks: list[Block],
    tree: Tree,
    params: Params,
    headline: int | None,
    force_spread: bool,
    cards: bool = False,
    product: bool = False,
    reviews: list[int] | None = None,
    site: Site = unknown_site,
) -> tuple[list[Block], bool, bool]:
    """The block selection proper; also says whether the page was taken as spread content and whether as an
    article under its headline."""
    page = _distrust(_Page(blocks, tree, params, headline, site))
    page.values = [block_value(b, page.params, cards) for b in blocks]
    _choose_region(page, force_spread, product, reviews)
    _find_posts(page)
    interface = form_lines(blocks, tree, headline, params.form_share) if product and params.form_share else set()
    selected = _take_lines(page, interface)
    return _tidy(page, selected, cards, product), page.spread, page.article


def _distrust(page: _Page) -> _Page:
    """Whether the furniture flags and the bylines can be believed on this page."""
    blocks, params, headline = page.blocks, page.params, page.headline
    furniture_chars = byline_chars = total_chars = 0
    for b in blocks:
        total_chars += b.chars
        if b.furniture:
            furniture_chars += b.chars
        elif b.byline:
            byline_chars += b.chars
    # A "byline" holding half the page is a misnamed wrapper (the story under "entry-byline"), not a byline.
    page.drop_bylines = params.drop_bylines and 2 * byline_chars < total_chars
    if furniture_chars > params.furniture_max_share * total_chars and (headline is None or blocks[headline].furniture):
        # A page cannot be mostly furniture: a wrapper's class ("docs-sidebar-layout") or an unclosed <button>
        # swallowing the page misled the flags, so here they say nothing. Unless the headline stands outside
        # the furniture: then the flags are right and the story is short under a long comment thread.
        page.params, page.trust_furniture = replace(params, furniture_weight=1.0), False
    return page


def _choose_region(page: _Page, force_spread: bool, product: bool, reviews: list[int] | None) -> None:
    """The region of the main content (``span``), whether it is an article or spread content, where it ends, and
    the container that holds it."""
    blocks, values, params, headline = page.blocks, page.values, page.params, page.headline
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
    # A headline of a word or two ("Science", "Remote jobs", "科技") names a section, not a story: its page is a
    # listing unless the text under it is most of the page.
    section = (article and headline is not None
               and len(WORDS.findall(blocks[headline].text)) <= params.section_title_words)
    if force_spread or (params.spread_share and (not article or section)):
        # No article under a headline, and the densest run holds little of the page's text: a listing, a shop
        # grid, a landing page. Their main content is spread over the page, so take the container of it all.
        positive = sum(v for v in values if v > 0)
        if positive and (
            force_spread or sum(v for v in values[span[0] : span[1]] if v > 0) < params.spread_share * positive
        ):
            spread, span, article = True, (0, len(blocks)), False
    # A product's page ends where its buyers' reviews begin, in the region or after it in the same container;
    # that line, not the end-of-article valley, ends it (a spec table's short lines are no comment thread).
    stop = reviews_line(blocks, values, span, params.comments_share, reviews) if reviews else len(blocks)
    if params.end_ratio and not spread and not (product and stop < len(blocks)):
        span = _article_end(blocks, values, cost, span, params)
    if params.comments_cut and article:
        span = _before_comments(blocks, values, span, params, page.tree, page.site)
    container = _container(blocks, values, span, page.tree, params)
    page.inside = (container, page.tree.end[container])
    page.span = (0, 0) if spread else span
    page.spread, page.article, page.stop = spread, article, stop


def _find_posts(page: _Page) -> None:
    """A thread's posts (repeated items) in the container, which post holds each block, and each post's own text."""
    blocks, params = page.blocks, page.params
    posts = repeated_items(blocks, page.values, page.inside[0], page.tree, params) if params.repeat_levels else None
    starts = [first for first, _ in posts] if posts else []
    if posts and page.article and page.headline is not None and page.trust_furniture:
        story = owner(posts, starts, blocks[page.headline].element)
        if story >= 0 and mostly_furniture(blocks, posts, starts, story):
            # The story's own box holds its headline and its like-classed siblings are mostly furniture: they
            # are the page's other boxes (teasers, most commented, sidebars), not posts of one thread.
            posts = None
    page.posts = posts
    page.owners = [owner(posts, starts, block.element) for block in blocks] if posts else []
    # A post's own running text outside furniture: where a post has some, its furniture is something nested in
    # it (the comments under an answer, a signature box), not the post; forums that call every post a "comment"
    # have none, and keep all of theirs.
    page.plain = [0] * len(posts) if posts else []
    if posts and page.trust_furniture and params.post_furniture:
        for block, item in zip(blocks, page.owners, strict=True):
            if item >= 0 and not block.furniture and block.link_density <= params.link_density_max:
                page.plain[item] += block.chars


def _long_link(page: _Page, block: Block, in_region: bool, furniture: bool) -> bool:
    """A linked line that is text: long, not furniture, in spread content or in the region; in an article
    under its headline only if less linked than ``article_link_max`` (a teaser's title is all link) or a
    heading linking off the site or to itself (a round-up's product linked to a shop, a permalink)."""
    params = page.params
    if furniture or block.chars < params.region_link_chars:
        return False
    if page.spread or (in_region and (not page.article or block.link_density < params.article_link_max)):
        return True
    off_site = in_region and block.heading and params.offsite_headings
    return bool(off_site and links_elsewhere(page.tree, block.element, page.site()))


def _take_lines(page: _Page, interface: set[int]) -> list[Block]:
    """The lines of the posts and of the region (or its container) that are text, not furniture or interface."""
    params, span, (inside_first, inside_end) = page.params, page.span, page.inside
    selected = []
    announced = False  # the last line taken ends with a colon: "Here are some of the courses offered:"
    for i, block in enumerate(page.blocks[: page.stop]):
        in_region = span[0] <= i < span[1]
        furniture = block.furniture and page.trust_furniture
        if block.panel and not params.panels:
            continue  # a hidden disclosure panel (closed accordion, inactive tab), with the rule off
        if page.drop_bylines and block.byline and not page.spread:
            continue  # "By Jane Doe | May 14, 2024", "Senior Autos Reporter", the author's bio
        if page.posts and page.owners[i] >= 0:
            if block.link_density <= params.link_density_max and not (
                furniture and page.plain[page.owners[i]] >= params.repeat_min_chars
            ):
                selected.append(block)
            continue
        if not in_region and not inside_first <= block.element < inside_end:
            continue
        # A list the text announces is part of it, links or not (the courses, tools, sources it names).
        listed, announced = announced and block.tag == "li" and not furniture, False
        if (block.link_density > params.link_density_max and not listed
                and not _long_link(page, block, in_region, furniture)):
            continue
        if furniture and not in_region:
            continue
        if furniture and block.chars < params.furniture_line_chars and not cell_or_heading(block):
            continue  # user cards ("Senior Member", "9,420"), labels, "Share": in any region, article or not
        if i in interface:
            continue  # a product's variant pickers, quantity, "Add to cart", "Notify me when back in stock"
        if params.drop_buttons and furniture and block.tag == "button":
            # Shop pages put size pickers and "Add to Cart" inside the product's region. Only while the flags
            # are trusted: an unclosed <button> can swallow a page (the flags are then distrusted, above).
            continue
        if params.drop_captions and block.tag == "figcaption" and not page.spread:
            continue  # a photo's caption and credit ("Paris Baguette opened 80 units ... | Photo by L. Jennings")
        selected.append(block)
        announced = params.announced_lists and (listed or announces(block))
    return selected


def _tidy(page: _Page, selected: list[Block], cards: bool, product: bool) -> list[Block]:
    """The selection bridged over a grid's card links, without placeholders, widget labels and repeats, and
    starting with the article's headline."""
    params, blocks, headline = page.params, page.blocks, page.headline
    if (params.card_links or params.card_names) and page.spread:
        names = params.card_names and cards and not product  # a product's own feature links are not cards
        selected = bridged_links(blocks, selected, *page.inside, page.trust_furniture, params.card_links, names)
    if params.placeholder_words:
        selected = without_placeholders(blocks, selected, params.placeholder_words)
    if params.drop_labels:
        selected = without_labels(selected)  # "Advertisement", "Share", "Related articles": a widget's name
    if (params.include_headline and page.article and headline is not None
            and (not selected or selected[0].index > headline)):
        selected.insert(0, blocks[headline])  # the article starts with its headline
    return without_repeats(selected, params.dedupe_chars) if params.dedupe_chars else selected
