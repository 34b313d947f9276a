"""A compiled XPath evaluated page after page keeps its memory bounded (issue 40: lxml's per-evaluator error log)."""

from __future__ import annotations

from typing import Any

import parsel
import pytest
from lxml import etree

from messaging.validation import EXSLT_NAMESPACES
from spiders import robots_meta
from spiders.rules import fields
from spiders.xpaths import REUSES, ReusedXPath

pytestmark = pytest.mark.unit

PAGES = REUSES * 4  # four evaluators' lives: lxml's own log would hold four times the first life's messages
PAGE = "<html><head><meta name='robots' content='noindex'></head><body><article><h1>Title {n}</h1>" \
       "<p>text {n}</p></article></body></html>"


def logged(xpath: Any) -> int:
    """Messages an evaluator's error log holds (lxml's own ``XPath`` too, to compare)."""
    return xpath.logged if isinstance(xpath, ReusedXPath) else len(xpath.error_log)


def roots(count: int) -> list[Any]:
    """Distinct pages as Scrapy parses them (parsel's HTML parser), one lxml tree each."""
    return [parsel.Selector(text=PAGE.format(n=n), type="html").root for n in range(count)]


def test_lxml_keeps_every_message_of_an_evaluator() -> None:
    """Why the wrapper exists: a failing evaluation adds to the evaluator's log every time, for good."""
    xpath = etree.XPath("$undefined")
    sizes = []
    for root in roots(50):
        with pytest.raises(etree.XPathEvalError):
            xpath(root)
        sizes.append(len(xpath.error_log))
    assert sizes == sorted(sizes) and sizes[-1] >= 50


def test_reused_xpath_answers_as_lxml_and_drops_its_log() -> None:
    reused, plain = ReusedXPath("//h1/text()", reuses=10), etree.XPath("//h1/text()")
    failing = ReusedXPath("$undefined", reuses=10)
    sizes = []
    for root in roots(35):
        assert reused(root) == plain(root)
        with pytest.raises(etree.XPathEvalError):
            failing(root)
        sizes.append(logged(failing))
    assert sizes[10] < sizes[9]  # the 11th evaluation is the second evaluator's first: the log starts again
    assert max(sizes) == max(sizes[:10])


def test_a_bad_expression_is_refused_at_once() -> None:
    with pytest.raises(etree.XPathSyntaxError):
        ReusedXPath("//a[")


@pytest.mark.parametrize("source", ["$undefined", "//article/h1", "substring-after(//h1, ' ')"])
def test_a_rule_field_held_for_a_long_crawl_stays_bounded(source: str) -> None:
    """A worker keeps its rule's compiled XPaths for its whole life: after more pages than an evaluator lives, the
    log never holds more than one evaluator's life's worth of messages (lxml's own held those of every page that
    failed, and on libxml2 2.14 of most successful evaluations)."""
    field = fields.FieldXPath("extract.title", source)
    errors: list[str] = []
    sizes: list[tuple[int, int]] = []
    for root in roots(PAGES):
        field.first_value(root, errors)
        fields.value_of(root)  # the module's string() evaluator, on every element value
        sizes.append((logged(field._xpath), logged(fields._TEXT_CONTENT)))
    for kept in zip(*sizes, strict=True):  # never more than one evaluator's life's worth (lxml's own: ever more)
        assert max(kept) <= 2 * max(kept[:REUSES])  # messages per evaluation vary a little with lxml's state
    assert len(errors) == (PAGES if source.startswith("$") else 0)


def test_the_robots_meta_search_stays_bounded() -> None:
    sizes = []
    for root in roots(PAGES):
        assert robots_meta.meta_directives(root, "fleetbot") == {"noindex"}
        sizes.append(logged(robots_meta._META))
    assert max(sizes) <= 2 * max(sizes[:REUSES])


def test_the_rule_namespaces_still_work() -> None:
    xpath = ReusedXPath("//p[re:test(., 'text [0-9]+')]/text()", EXSLT_NAMESPACES, reuses=2)
    assert [xpath(root) for root in roots(5)] == [[f"text {n}"] for n in range(5)]
