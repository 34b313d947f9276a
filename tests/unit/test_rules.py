"""The rule logic of the list and universal spiders, on small pages and on the demo web's real markup."""

from __future__ import annotations

import gzip
from collections import deque
from urllib.parse import urlsplit

import pytest
from scrapy.http import HtmlResponse, Response, TextResponse, XmlResponse

from deploy.demo_rules import DEMO_LIST_RULE, DEMO_UNIVERSAL_RULE
from deploy.demoweb import templates
from deploy.demoweb.sites import Site, build_sites
from spiders.rules import DETAIL_URL_FIELD, Link, ListRule, RuleError, UniversalRule
from spiders.rules import universal_rule as universal_module

pytestmark = pytest.mark.unit

LIST_HTML = """<html><head><base href="http://shop.test/catalog/"></head><body>
<table id="list">
  <tr><td><a href="items/1.html#top"> First  <em>item</em> </a></td><td class="d">(03-21)</td></tr>
  <tr><td><a href="/items/2.html">Second</a></td><td class="d"></td></tr>
  <tr><td><a>No link</a></td><td class="d">(03-20)</td></tr>
  <tr><td><hr></td></tr>
  <tr><td><a href="javascript:void(0)">Scripted</a></td></tr>
  <tr><td><a href="items/1.html">First again</a></td></tr>
</table>
<div class="pages"><a href="?page=1">1</a> <a class="next" href="?page=2">next</a></div>
</body></html>"""

LIST_RULE = {
    "first_page_xpath": {
        "list_from": "//table[@id='list']/tr",
        "second_page_url": "td/a/@href",
        "next_page": "//div[@class='pages']/a[@class='next']",
        "title": "td/a",
        "date": "td[@class='d']/text()",
    },
    "second_page_xpath": {"body": "//div[@id='body']", "title": "//h1/text()", "missing": "//nothing"},
}


def html(url: str, body: str, encoding: str = "utf-8") -> HtmlResponse:
    return HtmlResponse(url, body=body.encode(encoding), encoding=encoding)


# --- list spider -----------------------------------------------------------------------------------------------
def test_list_page_entries_become_detail_links_carrying_their_fields():
    result = ListRule.from_json(LIST_RULE).parse_list(html("http://shop.test/catalog/?page=1", LIST_HTML))
    assert result.errors == []
    details = [link for link in result.links if link.callback == "detail"]
    assert details == [
        Link("http://shop.test/catalog/items/1.html", "detail", {"title": "First item", "date": "(03-21)"}),
        Link("http://shop.test/items/2.html", "detail", {"title": "Second"}),  # empty date: absent
    ]
    # The row without a link and the scripted one are items of the list page; the <hr> row is no entry.
    assert result.items == [{"title": "No link", "date": "(03-20)"}, {"title": "Scripted"}]
    # An element selected as next page gives its href; relative to <base href>; the page itself is left out.
    assert [link for link in result.links if link.callback == "list"] == [
        Link("http://shop.test/catalog/?page=2", "list", {})]


def test_continue_false_makes_items_with_their_detail_url():
    rule = {"first_page_xpath": {**LIST_RULE["first_page_xpath"], "continue": False}}
    result = ListRule.from_json(rule).parse_list(html("http://shop.test/catalog/", LIST_HTML))
    assert [link.callback for link in result.links] == ["list"]
    assert result.items[0] == {"title": "First item", "date": "(03-21)",
                               DETAIL_URL_FIELD: "http://shop.test/catalog/items/1.html"}
    assert len(result.items) == 6 - 1  # every entry but the <hr> row
    assert result.items[-1][DETAIL_URL_FIELD] == "http://shop.test/catalog/items/1.html"


def test_list_rule_without_detail_link_or_next_page():
    rule = ListRule.from_json({"first_page_xpath": {"list_from": "//li", "name": "."}, "required": ["name"]})
    result = rule.parse_list(html("http://a.test/", "<ul><li>a</li><li> </li><li>b <b>c</b></li></ul>"))
    assert result.items == [{"name": "a"}, {"name": "b c"}]
    assert result.links == [] and result.errors == []
    assert rule.required == ("name",)


def test_detail_page_merges_carried_fields_with_its_own():
    rule = ListRule.from_json(LIST_RULE)
    page = html("http://shop.test/items/2.html",
                "<h1> Second, in full </h1><div id='body'><p>One.</p>\n  <p>Two.</p></div>")
    result = rule.parse_detail(page, {"title": "Second", "date": "(03-21)"})
    assert result.items == [{"title": "Second, in full", "date": "(03-21)", "body": "One. Two."}]
    assert result.links == [] and result.errors == []
    # A detail page where nothing matches still makes the entry's item.
    assert rule.parse_detail(html("http://shop.test/x", "<p>gone</p>"), {"title": "T"}).items == [{"title": "T"}]


@pytest.mark.parametrize(
    ("xpath", "value"),
    [
        ("//p", "a b c"),  # an element: its text content, whitespace normalised
        ("//p/text()", "a"),  # the first non-empty text node, stripped
        ("//p/@data-x", "1"),
        ("//span/text()", "second"),  # the first span's text is blank: the next result counts
        ("count(//span)", "2"),
        ("string(//p/b)", "b"),
        ("boolean(//p)", "true"),
        ("number('x')", None),
        ("//missing", None),
        ("re:replace(string(//p/b), 'b', '', 'B')", "B"),
        ("//p[has-class('intro')]/b", "b"),
    ],
)
def test_field_values(xpath, value):
    rule = ListRule.from_json({"first_page_xpath": {"list_from": "/html", "v": xpath, "w": "'w'"}})
    page = html("http://a.test/",
                "<p class='intro' data-x=' 1 '>\n a <b>b</b>\n\t c</p><span> </span><span>second</span>")
    result = rule.parse_list(page)
    assert result.errors == []
    assert result.items[0].get("v") == value


def test_xpath_failing_at_run_time_is_an_error_not_an_exception():
    rule = ListRule.from_json({
        "first_page_xpath": {"list_from": "//li", "bad": "$undefined", "regex": "re:test(., '(')", "ok": "."},
        "second_page_xpath": {"bad": "//p[has-class(1, 2)]", "ok": "//p"},
    })
    page = html("http://a.test/", "<ul><li>one</li><li>two</li></ul><p>text</p>")
    result = rule.parse_list(page)
    assert result.items == [{"ok": "one"}, {"ok": "two"}]
    assert len(result.errors) == 4  # two fields on two entries
    assert "first_page_xpath.bad" in result.errors[0] and "Undefined variable" in result.errors[0]
    detail = rule.parse_detail(page, {})
    assert detail.items == [{"ok": "text"}] and "second_page_xpath.bad" in detail.errors[0]
    broken = ListRule.from_json({"first_page_xpath": {"list_from": "//li[$x]"}}).parse_list(page)
    assert broken.items == [] and len(broken.errors) == 1


def test_list_from_must_select_elements():
    rule = ListRule.from_json({"first_page_xpath": {"list_from": "//li/text()", "t": "."}})
    result = rule.parse_list(html("http://a.test/", "<li>a</li><li>b</li>"))
    assert result.items == [] and "2 result(s) are no elements" in result.errors[0]


def test_a_rule_that_does_not_compile_is_refused_when_built():
    with pytest.raises(RuleError, match=r"first_page_xpath\.title"):
        ListRule.from_json({"first_page_xpath": {"list_from": "//li", "title": "//["}})
    with pytest.raises(RuleError, match=r"rules\[0\]"):
        UniversalRule.from_json({"rules": [{"allow": "("}]}, "http://a.test/")


def test_non_text_responses_have_no_xpath():
    pdf = Response("http://a.test/doc.pdf", body=b"%PDF-1.4 \x00\x01", headers={"Content-Type": "application/pdf"})
    for result in (ListRule.from_json(LIST_RULE).parse_list(pdf), ListRule.from_json(LIST_RULE).parse_detail(pdf, {}),
                   UniversalRule.from_json(DEMO_UNIVERSAL_RULE, "http://a.test/").parse_page(pdf, "rule:1")):
        assert result.items == [] and result.links == []
        assert result.errors == ["not a text response (application/pdf): no XPath applies"]


def test_a_json_text_response_is_a_page_without_matches():
    page = TextResponse("http://a.test/api", body=b'{"a": [1, 2]}', encoding="utf-8")
    assert ListRule.from_json(LIST_RULE).parse_list(page).items == []


# --- universal spider ------------------------------------------------------------------------------------------
UNIVERSAL_HTML = """<html><body>
<nav><a href="/section/a/">A</a> <a href="/section/b/#top">B</a> <a href="/video/c/">video</a></nav>
<main><a href="/story/1.html">S1</a> <a href="/story/1.html#comments">S1 again</a> <a href="/section/a/">A again</a>
<a href="http://sub.example.com/story/2.html">sub</a> <a href="http://other.test/story/3.html">other</a>
<a href="http://ads.example.com/story/4.html">ad</a> <a href="mailto:x@example.com">mail</a>
<a href="/story/5.pdf">pdf</a> <h1> Headline </h1></main></body></html>"""


def universal(rules: list[dict], start: str = "http://www.example.com:8080/") -> UniversalRule:
    return UniversalRule.from_json({"rules": rules}, start)


def urls(result) -> dict[str, str]:
    return {link.url: link.callback for link in result.links}


def test_start_page_follows_every_rule_and_keeps_to_the_start_domain_by_default():
    rule = universal([{"allow": "/section/", "deny": "/video/"}, {"allow": "/story/", "extract": {"t": "//h1"}}])
    assert rule.start == "url" and rule.required == ()
    result = rule.parse_page(html("http://www.example.com:8080/", UNIVERSAL_HTML), "")
    assert result.items == [] and result.errors == []
    assert urls(result) == {
        "http://www.example.com:8080/section/a/": "rule:0",
        "http://www.example.com:8080/section/b/": "rule:0",
        "http://www.example.com:8080/story/1.html": "rule:1",
        "http://sub.example.com/story/2.html": "rule:1",  # the start domain's subdomains are in
        "http://ads.example.com/story/4.html": "rule:1",
    }  # no video (deny), other.test (domain), mailto, .pdf (Scrapy's ignored extensions); each URL once


def test_follow_defaults_and_extraction():
    rule = universal([{"allow": "/section/"}, {"allow": "/story/", "extract": {"t": "//h1", "none": "//nav/b"}},
                      {"allow": "/video/", "extract": {}, "follow": True}])
    page = html("http://www.example.com/story/1.html", UNIVERSAL_HTML)
    extracted = rule.parse_page(page, "rule:1")  # extracts, so it does not follow
    assert extracted.items == [{"t": "Headline"}] and extracted.links == []
    listing = rule.parse_page(page, "rule:0")  # follows, extracts nothing
    assert listing.items == [] and len(listing.links) == 6
    both = rule.parse_page(page, "rule:2")  # an empty extract still makes an item (main text comes later)
    assert both.items == [{}] and len(both.links) == 6
    assert rule.parse_page(page, "").items == [{"t": "Headline"}]  # a start URL a rule takes is extracted
    unknown = rule.parse_page(page, "rule:9")
    assert unknown.items == [] and unknown.links == [] and "unknown callback" in unknown.errors[0]


def test_first_rule_wins_and_domains_filter():
    rule = universal([
        {"allow": "/story/1", "allow_domains": "example.com", "follow": True},
        {"allow": "/story/", "allow_domains": ["example.com", "other.test"], "deny_domains": "ads.example.com"},
    ])
    result = rule.parse_page(html("http://www.example.com/", UNIVERSAL_HTML), "")
    assert urls(result) == {
        "http://www.example.com/story/1.html": "rule:0",
        "http://sub.example.com/story/2.html": "rule:1",
        "http://other.test/story/3.html": "rule:1",
    }
    assert rule.in_scope("http://other.test/x") and rule.in_scope("http://a.ads.example.com:81/")
    assert not rule.in_scope("http://elsewhere.test/") and not rule.in_scope("mailto:x@example.com")
    assert not universal([{"deny_domains": "ads.example.com"}]).in_scope("http://ads.example.com/")


def test_restrict_xpaths_limit_where_links_are_taken():
    rule = universal([{"restrict_xpaths": ["//nav"], "deny": "/video/"}, {"restrict_xpaths": "//main//h1"},
                      {"allow": "/story/", "restrict_xpaths": "//main"}])
    result = rule.parse_page(html("http://www.example.com/", UNIVERSAL_HTML), "")
    assert urls(result) == {
        "http://www.example.com/section/a/": "rule:0",
        "http://www.example.com/section/b/": "rule:0",
        "http://www.example.com/story/1.html": "rule:2",
        "http://sub.example.com/story/2.html": "rule:2",
        "http://ads.example.com/story/4.html": "rule:2",
    }


def test_a_restrict_xpath_failing_costs_its_rule_only():
    rule = universal([{"restrict_xpaths": "//nav[$nope]"}, {"restrict_xpaths": "//main/a/@href"},
                      {"allow": "/story/"}])
    result = rule.parse_page(html("http://www.example.com/", UNIVERSAL_HTML), "")
    assert set(urls(result).values()) == {"rule:2"} and len(result.links) == 3
    assert len(result.errors) == 2 and "rules[0].restrict_xpaths" in result.errors[0]


def test_an_ip_start_url_scopes_to_that_address():
    rule = universal([{}], start="http://127.0.0.1:8123/")
    page = html("http://127.0.0.1:8123/", "<a href='/a'>a</a><a href='http://127.0.0.2:8123/b'>b</a>")
    assert urls(rule.parse_page(page, "")) == {"http://127.0.0.1:8123/a": "rule:0"}


# --- sitemaps --------------------------------------------------------------------------------------------------
INDEX = b"""<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<sitemap><loc>http://www.example.com/sitemaps/1.xml</loc></sitemap>
<sitemap><loc> http://www.example.com/sitemaps/2.xml.gz </loc></sitemap>
<sitemap><loc>http://elsewhere.test/sitemap.xml</loc></sitemap>
</sitemapindex>"""
URLSET = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<url><loc>http://www.example.com/story/1.html</loc><lastmod>2024-03-01</lastmod></url>
<url><loc>http://www.example.com/section/a/</loc></url>
<url><loc>http://www.example.com/about/</loc></url>
<url><loc>http://elsewhere.test/story/9.html</loc></url>
<url><loc>http://www.example.com/story/1.html</loc></url>
</urlset>"""


def sitemap_rule() -> UniversalRule:
    return UniversalRule.from_json({"rules": [{"allow": "/section/"}, {"allow": "/story/", "extract": {"t": "//h1"}}],
                                    "start": "sitemap"}, "http://www.example.com/sitemap.xml")


def test_sitemap_index_links_to_sub_sitemaps_in_scope():
    rule = sitemap_rule()
    assert rule.start == "sitemap"
    result = rule.parse_sitemap(XmlResponse("http://www.example.com/sitemap.xml", body=INDEX))
    assert result.errors == [] and result.items == []
    assert urls(result) == {"http://www.example.com/sitemaps/1.xml": "sitemap",
                            "http://www.example.com/sitemaps/2.xml.gz": "sitemap"}


def test_urlset_pages_go_to_the_first_rule_that_takes_them():
    result = sitemap_rule().parse_sitemap(XmlResponse("http://www.example.com/sitemaps/1.xml", body=URLSET))
    assert result.errors == []
    assert [(link.url, link.callback) for link in result.links] == [
        ("http://www.example.com/story/1.html", "rule:1"), ("http://www.example.com/section/a/", "rule:0")]


def test_gzipped_sitemap_and_its_size_cap(monkeypatch):
    packed = Response("http://www.example.com/sitemaps/2.xml.gz", body=gzip.compress(URLSET),
                      headers={"Content-Type": "application/x-gzip"})
    assert len(sitemap_rule().parse_sitemap(packed).links) == 2
    monkeypatch.setattr(universal_module, "SITEMAP_MAX_BYTES", 100)
    result = sitemap_rule().parse_sitemap(packed)
    assert result.links == [] and "gzipped sitemap not readable" in result.errors[0]


def test_robots_txt_and_bodies_that_are_no_sitemap():
    robots = TextResponse("http://www.example.com/robots.txt", encoding="utf-8",
                          body=b"User-agent: *\nDisallow: /x/\nSitemap: /sitemap.xml\nSitemap: http://no.test/s.xml\n")
    assert urls(sitemap_rule().parse_sitemap(robots)) == {"http://www.example.com/sitemap.xml": "sitemap"}
    for body in (b"", b"\x00\x01 not xml", b"<html><body>hello</body></html>"):
        result = sitemap_rule().parse_sitemap(TextResponse("http://www.example.com/s.xml", body=body, encoding="utf-8"))
        assert result.links == [] and len(result.errors) == 1, body


# --- hostile pages ---------------------------------------------------------------------------------------------
def test_ten_thousand_links_on_one_page():
    entries = "".join(f'<li><a href="/item/{n}.html">Item {n}</a></li>' for n in range(10_000))
    page = html("http://big.test/", f"<ul>{entries}</ul><a class='next' href='/?p=2'>next</a>")
    listing = ListRule.from_json({"first_page_xpath": {
        "list_from": "//ul/li", "second_page_url": "a/@href", "title": "a", "next_page": "//a[@class='next']"}})
    result = listing.parse_list(page)
    assert len(result.links) == 10_001 and result.errors == []
    assert result.links[9_999] == Link("http://big.test/item/9999.html", "detail", {"title": "Item 9999"})
    rules = universal([{"allow": r"/item/\d*1\.html"}, *[{"allow": rf"/item/\d*{d}\.html"} for d in range(10)]],
                      start="http://big.test/")
    found = rules.parse_page(page, "")
    assert len(found.links) == 10_001 - 1  # "/?p=2" matches no rule
    assert sum(link.callback == "rule:0" for link in found.links) == 1_000  # ...1.html: the first rule wins


def test_deeply_nested_markup_does_not_raise():
    def nested(depth: int) -> HtmlResponse:
        return html("http://deep.test/", "<div>" * depth + "<a href='/deep'>deep</a>" + "</div>" * depth)

    rule = universal([{"extract": {"link": "//a/@href"}, "follow": True}], start="http://deep.test/")
    assert urls(rule.parse_page(nested(1000), "rule:0")) == {"http://deep.test/deep": "rule:0"}
    result = rule.parse_page(nested(20_000), "rule:0")  # libxml2 gives up somewhere down there: no exception
    assert len(result.items) == 1


# --- the demo web ----------------------------------------------------------------------------------------------
SITES = tuple(site for site in build_sites(pages=30) if isinstance(site, Site))  # the content sites (not hostile)
PORT = 8123


def origin(site: Site) -> str:
    return f"http://{site.name}:{PORT}"


def render(site: Site, url: str) -> HtmlResponse | None:
    """The demo site's page at ``url`` (home, list pages, articles), as the demo web would serve it; else None."""
    path = urlsplit(url).path
    if path == "/":
        text = templates.home_page(site, origin(site))
    elif (listing := site.parse_list_path(path)) is not None:
        text = templates.list_page(site, origin(site), *listing)
    elif (article_id := site.parse_article_path(path)) is not None and article_id < site.articles:
        text = templates.article_page(site, origin(site), article_id)
    else:
        return None
    return html(url, text, site.encoding)


@pytest.mark.parametrize("site", SITES, ids=lambda site: site.name)
def test_demo_list_rule_crawls_a_section(site):
    rule = ListRule.from_json(DEMO_LIST_RULE)
    section = site.sections[1][0]
    queue = deque([(f"{origin(site)}{site.list_path(section)}", "list", {})])
    items, fetched = [], set()
    while queue:
        url, callback, carried = queue.popleft()
        assert url not in fetched
        fetched.add(url)
        page = render(site, url)
        assert page is not None, url
        result = rule.parse_list(page) if callback == "list" else rule.parse_detail(page, carried)
        assert result.errors == []
        items += [{**item, "url": url} for item in result.items]
        queue.extend((link.url, link.callback, link.meta) for link in result.links if link.url not in fetched)
    expected = {f"{origin(site)}{site.article_path(i)}": site.article(i) for i in site.section_ids(section)}
    assert len(items) == len(expected) == len({item["url"] for item in items})
    for item in items:
        article = expected[item["url"]]
        assert item["title"] == article.headline.title
        assert item["date"] == f"{article.headline.published:%Y-%m-%d %H:%M}"
        assert item["author"] == article.author
        assert item["body"].startswith(" ".join(article.paragraphs[0].split()))
        assert set(DEMO_LIST_RULE["required"]) <= set(item)


@pytest.mark.parametrize("site", SITES, ids=lambda site: site.name)
def test_demo_universal_rule_crawls_a_site(site):
    rule = UniversalRule.from_json(DEMO_UNIVERSAL_RULE, f"{origin(site)}/")
    queue, seen, items = deque([(f"{origin(site)}/", "")]), {f"{origin(site)}/"}, {}
    while queue:
        url, callback = queue.popleft()
        page = render(site, url)
        assert page is not None, url  # nothing but the home page, list pages and existing articles is followed
        result = rule.parse_page(page, callback)
        assert result.errors == []
        for item in result.items:
            items[url] = item
        for link in result.links:
            assert rule.in_scope(link.url)
            if link.url not in seen:
                seen.add(link.url)
                queue.append((link.url, link.callback))
    assert sorted(items) == sorted(f"{origin(site)}{site.article_path(i)}" for i in range(site.articles))
    article = site.article(site.articles - 1)
    assert items[f"{origin(site)}{article.headline.path}"] == {
        "title": article.headline.title, "author": article.author,
        "published": article.headline.published.isoformat()}


def test_demo_sitemaps_feed_the_universal_rule():
    site = SITES[1]  # the GBK site, "cms" URLs
    rule = UniversalRule.from_json({**DEMO_UNIVERSAL_RULE, "start": "sitemap"}, f"{origin(site)}/sitemap.xml")
    index = rule.parse_sitemap(XmlResponse(f"{origin(site)}/sitemap.xml",
                                           body=templates.sitemap_index(site, origin(site)).encode()))
    assert urls(index) == {f"{origin(site)}/sitemaps/articles-1.xml": "sitemap"}
    chunk = rule.parse_sitemap(XmlResponse(index.links[0].url,
                                           body=templates.sitemap_chunk(site, origin(site), 1).encode()))
    assert len(chunk.links) == site.articles and {link.callback for link in chunk.links} == {"rule:1"}


def test_a_catastrophic_allow_regex_runs_in_linear_time():
    """``(a+)+$`` backtracks exponentially in Python's re (2 s at 24 characters); the rule runs it in RE2."""
    rule = UniversalRule.from_json({"rules": [{"allow": "(a+)+$"}]}, "http://a.test/")
    url = "http://a.test/" + "a" * 5000 + "!"
    assert rule.rules[0].takes(url) is False
    assert rule.rules[0].takes("http://a.test/aaaa") is True
    with pytest.raises(RuleError):
        UniversalRule.from_json({"rules": [{"allow": "(a)\\1"}]}, "http://a.test/")  # a backreference: no RE2
