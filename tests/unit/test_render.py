"""Pure logic of spiders.render: the render field, the shell detection, the site learning, the middleware's choices,
the browser's options (no browser, no services)."""

from __future__ import annotations

import base64
import json
from types import SimpleNamespace
from typing import Any

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse

from deploy.demoweb.spa import ClientSite
from messaging.tasks import Task
from messaging.validation import CRAWL, Rejected, parse_request
from spiders.render import detect
from spiders.render.browser import playwright_proxy, resolver_rules
from spiders.render.learn import BROWSER_SITE, MIXED_SITE, NEEDED, STATIC, STATIC_SITE, VAIN, SiteLearner
from spiders.render.middleware import PROBE_META, RenderMiddleware
from spiders.render.modes import render_mode
from spiders.render.page import proxy_of
from spiders.rules import PageResult, UniversalRule
from spiders.worker.crawls import CrawlInfo

pytestmark = pytest.mark.unit

START = "http://apps.fleet.test/"
RULE = {"rules": [{"allow": "/stories/[0-9]+\\.html$", "follow": True,
                   "extract": {"title": "//article/h1", "body": "//article"}}], "required": ["title"]}


# --- the rule's field ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spider_type", ["list", "universal"])
@pytest.mark.parametrize("mode", ["never", "always", "auto"])
def test_the_render_field_is_accepted_in_both_rule_schemas(spider_type: str, mode: str) -> None:
    rule = RULE if spider_type == "universal" else {"first_page_xpath": {"list_from": "//li"}}
    request = {"userid": "u", "crawlid": "c", "url": START, "spider_type": spider_type,
               "rule": {**rule, "render": mode}}
    assert parse_request(json.dumps(request).encode()).kind == CRAWL
    assert render_mode(request["rule"]) == mode


@pytest.mark.parametrize("bad", ["sometimes", True, None, ["auto"]])
def test_a_bad_render_value_is_rejected_with_its_path(bad: Any) -> None:
    request = {"userid": "u", "crawlid": "c", "url": START, "spider_type": "universal", "rule": {**RULE, "render": bad}}
    with pytest.raises(Rejected) as caught:
        parse_request(json.dumps(request).encode())
    assert caught.value.reason.startswith("$.rule.render: "), caught.value.reason


def test_render_mode_defaults_to_never_and_refuses_what_the_schema_refuses() -> None:
    assert render_mode(None) == render_mode({}) == render_mode(RULE) == "never"
    with pytest.raises(ValueError, match="render must be one of never, always, auto"):
        render_mode({"render": "maybe"})


# --- detection ----------------------------------------------------------------------------------------------------
def page(site: ClientSite, path: str) -> HtmlResponse:
    reply = site.route(path, "http://apps.fleet.test")
    return HtmlResponse(url="http://apps.fleet.test" + path, body=reply.body, encoding="utf-8")


def test_the_demo_shells_are_shells_and_its_static_pages_are_not() -> None:
    site = ClientSite("s")
    for path in ("/", "/stories/1.html", "/spin.html"):
        facts = detect.page_facts(page(site, path).text)
        assert detect.is_shell(facts, 200), path
    static = detect.page_facts(page(site, "/stories/3.html").text)
    assert not detect.is_shell(static, 200) and static.text > 200


@pytest.mark.parametrize(("html", "shell"), [
    ('<html><body><div id="app"></div><script src="a.js"></script></body></html>', True),
    ('<html><body><div id="__next"></div><script>x()</script></body></html>', True),
    ('<html><body><main></main><noscript>Please enable JavaScript</noscript><script></script></body></html>', True),
    ('<html><body><div id="root"></div></body></html>', False),  # no script: nothing will fill it
    ('<html><body><div id="root"><p>' + "text " * 80 + "</p></div><script></script></body></html>", False),
    ("", False),
])
def test_shell_patterns(html: str, shell: bool) -> None:
    assert detect.is_shell(detect.page_facts(html), 200) is shell


def test_needs_render_reasons() -> None:
    facts = detect.PageFacts(text=1000, scripts=1, empty_mount=False, noscript_js=False)
    complete = PageResult(items=[{"title": "T"}])
    assert detect.needs_render(facts, complete, ["title"], True, 200) == ""
    assert detect.needs_render(facts, PageResult(items=[{"title": " "}]), ["title"], True, 200) == "required"
    thin = detect.PageFacts(text=50, scripts=1, empty_mount=False, noscript_js=False)
    assert detect.needs_render(thin, complete, ["title"], True, 200) == "text"
    assert detect.needs_render(thin, complete, ["title"], False, 200) == ""  # no main text wanted
    assert detect.needs_render(facts, PageResult(), [], True, 200) == "empty"
    no_script = detect.PageFacts(text=10, scripts=0, empty_mount=False, noscript_js=False)
    assert detect.needs_render(no_script, PageResult(), [], True, 200) == ""


def test_a_render_improves_on_a_static_page_only_with_more() -> None:
    static = detect.Outcome(complete=0, incomplete=1, links=2, text=40)
    assert detect.Outcome(1, 0, 2, 900).improves_on(static, 200)
    assert detect.Outcome(0, 1, 5, 40).improves_on(static, 200)
    assert not detect.Outcome(0, 1, 2, 60).improves_on(static, 200)


# --- learning -----------------------------------------------------------------------------------------------------
def test_a_site_that_always_needs_the_browser_is_rendered_first_after_k_pages_with_rechecks() -> None:
    learner = SiteLearner(pages=3, recheck=4)
    for _ in range(2):
        learner.record("a.test", NEEDED)
        assert learner.state("a.test") == MIXED_SITE and not learner.render_first("a.test")
    learner.record("a.test", NEEDED)
    assert learner.state("a.test") == BROWSER_SITE
    turns = [learner.render_first("a.test") for _ in range(8)]
    assert turns == [True, True, True, False, True, True, True, False]  # every 4th page is judged statically
    learner.record("a.test", STATIC)  # the re-check found the static page enough: judged page by page again
    assert learner.state("a.test") == MIXED_SITE and not learner.render_first("a.test")


def test_a_site_whose_renders_are_in_vain_is_no_longer_rendered_on_a_guess() -> None:
    learner = SiteLearner(pages=3, recheck=5)
    for verdict in (STATIC, VAIN, STATIC):
        assert learner.may_render("b.test")
        learner.record("b.test", verdict)
    assert learner.state("b.test") == STATIC_SITE
    assert [learner.may_render("b.test") for _ in range(5)] == [False, False, False, False, True]
    learner.record("b.test", NEEDED)
    assert learner.state("b.test") == MIXED_SITE and learner.may_render("b.test")


def test_a_mixed_site_stays_mixed_and_sites_are_bounded() -> None:
    learner = SiteLearner(pages=2, recheck=3, max_sites=2)
    for verdict in (NEEDED, STATIC, NEEDED, STATIC):
        learner.record("c.test", verdict)
    assert learner.state("c.test") == MIXED_SITE
    learner.record("d.test", NEEDED)
    learner.record("e.test", NEEDED)
    assert learner.state("c.test") == MIXED_SITE and len(learner._sites) == 2
    with pytest.raises(ValueError):
        learner.record("c.test", "maybe")


# --- the middleware's choices (a real rule, a fake crawler) ---------------------------------------------------------
class FakeSpider:
    name = "universal"

    def __init__(self, rule: dict[str, Any]) -> None:
        self.crawl = CrawlInfo("c", "universal", rule, START, state="running")
        self.built = UniversalRule.from_json(rule, START)

    def crawl_for(self, task: Task) -> CrawlInfo:
        return self.crawl

    def render_mode(self, task: Task, crawl: CrawlInfo) -> str:
        return render_mode(crawl.rule)

    def rule_for(self, crawl: CrawlInfo) -> UniversalRule:
        return self.built

    def apply(self, rule: UniversalRule, response: Any, task: Task) -> tuple[PageResult, bool]:
        return rule.parse_page(response, task.callback), True


class FakeStats:
    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def inc_value(self, key: str, n: int = 1) -> None:
        self.values[key] = self.values.get(key, 0) + n


def middleware(mode: str, pages: int = 20) -> tuple[RenderMiddleware, FakeStats]:
    stats = FakeStats()
    crawler = SimpleNamespace(spider=FakeSpider({**RULE, "render": mode}), stats=stats)
    return RenderMiddleware(crawler, SiteLearner(pages, 25), 200, None), stats


def task_request(path: str) -> Request:
    task = Task(url=START.rstrip("/") + path, crawlid="c", spider_type="universal", callback="rule:0")
    return Request(task.url, meta={"task": task, "task_member": "m"})


def test_never_and_always() -> None:
    mw, _ = middleware("never")
    request = task_request("/stories/1.html")
    mw.process_request(request)
    assert "fleet_render" not in request.meta and PROBE_META not in request.meta
    mw, _ = middleware("always")
    request = task_request("/stories/1.html")
    mw.process_request(request)
    assert request.meta["fleet_render"] is True


def test_auto_probes_statically_then_renders_a_shell_and_keeps_a_static_page() -> None:
    site = ClientSite("s")
    mw, stats = middleware("auto")
    shell = task_request("/stories/1.html")
    mw.process_request(shell)
    assert shell.meta[PROBE_META] and "fleet_render" not in shell.meta
    out = mw.process_response(shell, page(site, "/stories/1.html").replace(request=shell))
    assert isinstance(out, Request) and out.meta["fleet_render"] and out.meta["fleet_render_reason"] == "shell"
    assert out.meta["task_member"] == "m" and out.url == shell.url  # the same task, as a render

    static = task_request("/stories/3.html")
    mw.process_request(static)
    response = page(site, "/stories/3.html").replace(request=static)
    assert mw.process_response(static, response) is response
    assert stats.values["render/static"] == 1 and stats.values["render/reason/shell"] == 1

    # the render of the shell: judged against its static fetch, and learned from
    rendered = HtmlResponse(url=out.url, body=page(site, "/stories/3.html").body, encoding="utf-8", request=out)
    assert mw.process_response(out, rendered) is rendered
    assert stats.values["render/rendered"] == 1 and stats.values["render/learned/needed"] == 1


def test_auto_renders_a_learned_browser_site_first() -> None:
    mw, _ = middleware("auto", pages=2)
    for _ in range(2):
        mw.learner.record("apps.fleet.test", NEEDED)
    request = task_request("/stories/1.html")
    mw.process_request(request)
    assert request.meta["fleet_render"] and request.meta["fleet_render_reason"] == "learned"
    assert PROBE_META not in request.meta


# --- the browser's options ----------------------------------------------------------------------------------------
def test_browser_options_from_the_fleet() -> None:
    hosts = {"b.test": "127.0.0.2", "a.test": "127.0.0.1"}
    assert resolver_rules(hosts) == "MAP a.test 127.0.0.1, MAP b.test 127.0.0.2"
    assert playwright_proxy(None) is None
    assert playwright_proxy("http://u%40x:p%3Aw@10.0.0.1:3128") == {"server": "http://10.0.0.1:3128",
                                                                     "username": "u@x", "password": "p:w"}
    request = Request("http://a.test/", meta={"proxy": "http://10.0.0.1:3128"},
                      headers={"Proxy-Authorization": b"Basic " + base64.b64encode(b"user:pa:ss")})
    assert playwright_proxy(proxy_of(request)) == {"server": "http://10.0.0.1:3128", "username": "user",
                                                   "password": "pa:ss"}
    assert proxy_of(Request("http://a.test/")) is None
