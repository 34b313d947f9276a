"""Choose the main-text blocks: line-block density, then DOM-aware repair of its known failures."""

from __future__ import annotations

from dataclasses import dataclass

from lxml import etree

from spiders.extraction.dom import Block

__all__ = ["Params", "select_blocks"]


@dataclass(frozen=True)
class Params:
    window: int = 2  # k: blocks on each side that make up one line block
    cost_ratio: float = 0.15  # per-block cost, as a share of the peak line-block density
    min_cost: float = 8.0  # ... but never below this many characters
    link_density_max: float = 0.45  # blocks with more link text than this are navigation
    furniture_weight: float = 0.1  # value kept by blocks inside nav/aside/footer/comments/related
    coverage: float = 0.8  # the container must hold this share of the dense region's value
    anchor_reach: int = 12  # an anchored region starts at most this many blocks after the headline
    anchor_share: float = 0.1  # ... and is preferred when worth at least this share of the densest region


def block_value(block: Block, params: Params) -> float:
    """How much a block looks like running text: its length, less link text, less if it sits in furniture."""
    if block.heading:
        return 0.0
    value = block.chars * (1.0 - block.link_density) ** 2
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
    """The best run that starts within ``reach`` blocks after the headline: news text follows its title."""
    best, best_span = float("-inf"), (anchor, anchor + 1)
    for start in range(anchor, min(len(values), anchor + reach + 1)):
        running = 0.0
        for end in range(start, len(values)):
            running += values[end] - cost
            if running > best:
                best, best_span = running, (start, end + 1)
    return best_span, best


def _container(blocks: list[Block], values: list[float], span: tuple[int, int], params: Params) -> etree._Element:
    """The deepest element that holds ``coverage`` of the region's value: the article's own container."""
    weight: dict[etree._Element, float] = {}
    total = 0.0
    for i in range(*span):
        if values[i] <= 0:
            continue
        total += values[i]
        element = blocks[i].element
        while element is not None:
            weight[element] = weight.get(element, 0.0) + values[i]
            element = element.getparent()
    best = None
    best_depth = -1
    for element, w in weight.items():
        if w >= params.coverage * total:
            depth = sum(1 for _ in element.iterancestors())
            if depth > best_depth:
                best, best_depth = element, depth
    return best if best is not None else blocks[span[0]].element


def _inside(element: etree._Element, container: etree._Element) -> bool:
    while element is not None:
        if element is container:
            return True
        element = element.getparent()
    return False


def select_blocks(blocks: list[Block], params: Params | None = None, headline: int | None = None) -> list[Block]:
    """Return the main-text blocks in document order (empty when the page has no text).

    ``headline`` is the index of the block holding the page's confirmed title, if any."""
    params = params or Params()
    if not blocks:
        return []
    values = [block_value(b, params) for b in blocks]
    cost = _cost(values, params)
    span, value = _densest_region(values, cost)
    if headline is not None and span[0] <= headline < span[1]:
        span = (headline, span[1])  # what precedes the title is teasers and navigation, not the article
    elif headline is not None:
        anchored, anchored_value = _anchored_region(values, cost, headline, params.anchor_reach)
        if anchored_value >= params.anchor_share * value:
            span = anchored
    container = _container(blocks, values, span, params)
    selected = []
    for i, block in enumerate(blocks):
        in_region = span[0] <= i < span[1]
        if not in_region and not _inside(block.element, container):
            continue
        if block.link_density > params.link_density_max or (block.furniture and not in_region):
            continue
        selected.append(block)
    return selected
