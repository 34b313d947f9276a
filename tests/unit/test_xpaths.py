"""A compiled XPath evaluated page after page keeps its memory bounded (issue 40: lxml's per-evaluator error log)."""

from __future__ import annotations

from typing import Any

import lxml.html
import parsel
import parsel.selector
import pytest
from lxml import etree
from scrapy.http import HtmlResponse
from scrapy.linkextractors import LinkExtractor, lxmlhtml

from messaging.regexes import install_exslt_functions
from messaging.validation import EXSLT_NAMESPACES
from spiders import robots_meta
from spiders.rules import fields
from spiders.xpaths import REUSES, ReusedXPath, bound_library_xpaths

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


# --- the evaluators the libraries keep (Scrapy's link texts, lxml.html's text_content(), parsel's cache) ---------
def test_the_global_re2_functions_make_every_evaluation_log() -> None:
    """Why the libraries' evaluators need a bound: with the RE2 functions installed in lxml's global EXSLT namespace
    (as a rule spider does), an evaluator made with lxml's defaults logs on every successful evaluation."""
    install_exslt_functions()
    plain = etree.XPath("string()")
    for root in roots(20):
        plain(root)
    if len(plain.error_log) == 0:
        pytest.skip("this lxml/libxml2 logs nothing when a global function is registered again")
    assert len(plain.error_log) >= 20


@pytest.fixture()
def unbounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The libraries as they come (another test's spider may have bounded them already), restored after."""
    monkeypatch.setattr(lxmlhtml, "_collect_string_content", etree.XPath("string()"))
    monkeypatch.setattr(lxml.html, "_collect_string_content", etree.XPath("string()"))
    cached = parsel.selector._compile_xpath
    monkeypatch.setattr(parsel.selector, "_compile_xpath", getattr(cached, "cached", cached))


@pytest.mark.usefixtures("unbounded")
def test_the_libraries_evaluators_are_bounded() -> None:
    install_exslt_functions()
    bound_library_xpaths(reuses=50)
    assert bound_library_xpaths(reuses=50) == []  # once is enough: the second call finds them bounded
    assert isinstance(lxmlhtml._collect_string_content, ReusedXPath)
    assert isinstance(lxml.html._collect_string_content, ReusedXPath)
    body = "<html><body><nav><a href='/a'>one</a> <a href='/b'>two</a></nav><p>text</p></body></html>"
    extractor = LinkExtractor(restrict_xpaths="//nav")
    link_logs, parsel_logs = [], []
    for n in range(400):
        response = HtmlResponse(f"http://example.com/{n}", body=body.encode(), encoding="utf-8")
        assert [link.text for link in extractor.extract_links(response)] == ["one", "two"]
        assert lxml.html.fromstring(body).text_content() == "one twotext"
        link_logs.append(lxmlhtml._collect_string_content.logged)
        parsel_logs.append(len(parsel.selector._get_xpath_evaluator("//nav", {}, True).error_log))
    assert max(link_logs) <= 2 * max(link_logs[:100]) and link_logs[-1] < 400  # two links a page, 3 messages each
    assert max(parsel_logs) <= 2 * max(parsel_logs[:100]) and parsel_logs[-1] < 400
    assert parsel.selector._compile_xpath.emptied >= 1


@pytest.mark.usefixtures("unbounded")
def test_parsel_answers_the_same_through_the_emptied_cache() -> None:
    bound_library_xpaths(reuses=3)
    selector = parsel.Selector(text=PAGE.format(n=7))
    for _ in range(10):
        assert selector.xpath("//h1/text()").get() == "Title 7"
        assert selector.css("p::text").get() == "text 7"
    assert parsel.selector._compile_xpath.emptied >= 5
