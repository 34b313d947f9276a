"""The client-rendered site of the demo web (issue 27): ``apps.fleet.test``, pages a browser must render.

Most of its pages are shells: a header, an empty ``<div id="root">``, a logo image and ``/static/app.js``, which
fetches the page's JSON (``/api/home.json``, ``/api/stories/<n>.json``) and inserts the content and the links. Some
pages are static, as on many real sites: every third story (``n % 3 == 0``) is served whole, with plain links to the
next two stories.

| path | what | what a browser shows |
|---|---|---|
| ``/`` | shell; a static link to ``/stories/0.html`` in its header | links to every story |
| ``/stories/<n>.html``, ``n % 3 != 0`` | shell | ``<h1>`` title, ``<article>`` paragraphs, links to the next two |
| ``/stories/<n>.html``, ``n % 3 == 0`` | static page (and a small script) | the same, without JavaScript |
| ``/spin.html`` | a script that never ends (a hung page) | nothing: a render times out |
| ``/busy.html`` | 429 with ``Retry-After: 7`` | the 429 (a renderer passes it on as a static fetch does) |

So a crawl without a browser stores shells (story pages without a title) and finds few links; a crawl with one stores
every story with its title. The logo is an image a rendering crawler should never fetch (images are blocked).
The manifest's ``spa`` section lists the stories, their titles and which need the browser.
"""

from __future__ import annotations

import json
import random
import re
from html import escape
from typing import Any

from deploy.demoweb.router import Reply
from deploy.demoweb.sites import DOMAIN, base_url
from deploy.demoweb.text import ENGLISH

SPA_NAME = f"apps.{DOMAIN}"
SPA_IP = "127.0.0.25"  # after the robots hosts (127.0.0.16-24)
STORIES = 24
SPIN_PATH = "/spin.html"
BUSY_PATH = "/busy.html"
BUSY_SECONDS = 7
LOGO_PATH = "/static/logo.gif"
APP_PATH = "/static/app.js"
_STORY = re.compile(r"^/stories/([0-9]+)\.html$")
_STORY_JSON = re.compile(r"^/api/stories/([0-9]+)\.json$")
_HTML = "text/html; charset=utf-8"
_LOGO = (b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00"
         b",\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")

APP_JS = """(function () {
  var root = document.getElementById('root');
  var match = location.pathname.match(/^\\/stories\\/([0-9]+)\\.html$/);
  var api = match ? '/api/stories/' + match[1] + '.json' : '/api/home.json';
  function esc(text) {
    return String(text).replace(/[&<>"]/g, function (c) {
      return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c];
    });
  }
  fetch(api).then(function (r) { return r.json(); }).then(function (page) {
    var html = '';
    if (page.title) {
      html += '<article><h1>' + esc(page.title) + '</h1>' +
        page.paragraphs.map(function (p) { return '<p>' + esc(p) + '</p>'; }).join('') + '</article>';
    } else {
      html += '<h2>' + esc(page.heading) + '</h2>';
    }
    html += '<ul class="links">' + page.links.map(function (l) {
      return '<li><a href="' + esc(l.href) + '">' + esc(l.text) + '</a></li>';
    }).join('') + '</ul>';
    root.innerHTML = html;
  });
})();
"""


class ClientSite:
    """``apps.fleet.test`` (see the module docstring). ``route`` answers every path of it."""

    name: str = SPA_NAME
    ip: str = SPA_IP
    manifest_section = "spa"

    def __init__(self, seed: str = "fleet", stories: int = STORIES, ip: str = SPA_IP) -> None:
        self.ip = ip
        self.seed = seed
        self.articles = stories  # the demo web's start-up log counts every site's pages

    # --- the model ------------------------------------------------------------------------------------------------
    @staticmethod
    def needs_browser(story: int) -> bool:
        return story % 3 != 0

    @staticmethod
    def story_path(story: int) -> str:
        return f"/stories/{story}.html"

    def title(self, story: int) -> str:
        return ENGLISH.headline(random.Random(f"{self.seed}-spa-title-{story}"))

    def paragraphs(self, story: int) -> list[str]:
        rng = random.Random(f"{self.seed}-spa-body-{story}")
        return [ENGLISH.paragraph(rng) for _ in range(3)]

    def next_stories(self, story: int) -> list[int]:
        return [(story + step) % self.articles for step in (1, 2)]

    # --- replies --------------------------------------------------------------------------------------------------
    def route(self, path: str, origin: str) -> Reply:
        if path == "/":
            return Reply(200, self._shell("Fleet Apps").encode(), _HTML)
        if path == APP_PATH:
            return Reply(200, APP_JS.encode(), "application/javascript")
        if path == LOGO_PATH:
            return Reply(200, _LOGO, "image/gif")
        if path == "/api/home.json":
            links = [{"href": self.story_path(n), "text": self.title(n)} for n in range(self.articles)]
            return self._json({"heading": "Fleet Apps", "links": links})
        if path == BUSY_PATH:  # what a site says when it is rendered too fast
            return Reply(429, self._shell("Too busy").encode(), _HTML, headers=(("Retry-After", str(BUSY_SECONDS)),))
        if path == SPIN_PATH:
            return Reply(200, self._shell("Spinning", script="<script>for (;;) {}</script>").encode(), _HTML)
        if (match := _STORY_JSON.match(path)) and int(match.group(1)) < self.articles:
            return self._json(self._story_json(int(match.group(1))))
        if (match := _STORY.match(path)) and int(match.group(1)) < self.articles:
            story = int(match.group(1))
            page = self._shell("Fleet Apps") if self.needs_browser(story) else self._static_story(story)
            return Reply(200, page.encode(), _HTML)
        return Reply(404, b"<html><body><h1>Not found</h1></body></html>", _HTML)

    def _story_json(self, story: int) -> dict[str, Any]:
        links = [{"href": self.story_path(n), "text": self.title(n)} for n in self.next_stories(story)]
        return {"title": self.title(story), "paragraphs": self.paragraphs(story), "links": links}

    @staticmethod
    def _json(value: Any) -> Reply:
        return Reply(200, json.dumps(value).encode(), "application/json")

    @staticmethod
    def _shell(title: str, script: str = "") -> str:
        return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + escape(title) + "</title>"
                f"<script src=\"{APP_PATH}\" defer></script></head>\n<body><header><a href=\"/\">Fleet Apps</a> · "
                "<a href=\"/stories/0.html\">Archive</a></header>\n<div id=\"root\"></div>\n"
                f"<img src=\"{LOGO_PATH}\" alt=\"\">\n<noscript>Fleet Apps needs JavaScript.</noscript>{script}"
                "</body></html>\n")

    def _static_story(self, story: int) -> str:
        paragraphs = "".join(f"<p>{escape(p)}</p>" for p in self.paragraphs(story))
        links = "".join(f"<li><a href=\"{self.story_path(n)}\">{escape(self.title(n))}</a></li>"
                        for n in self.next_stories(story))
        return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + escape(self.title(story)) +
                "</title><script>window.fleetViews = (window.fleetViews || 0) + 1;</script></head>\n<body><header>"
                "<a href=\"/\">Fleet Apps</a></header>\n<div id=\"root\"><article><h1>" + escape(self.title(story)) +
                f"</h1>{paragraphs}</article><ul class=\"links\">{links}</ul></div>\n"
                f"<img src=\"{LOGO_PATH}\" alt=\"\"></body></html>\n")

    def describe(self, port: int) -> dict[str, Any]:
        """The manifest entry: every story, its title, whether a browser is needed to see it."""
        url = base_url(self.name, port)
        stories = {self.story_path(n): {"url": url + self.story_path(n)[1:], "title": self.title(n),
                                        "needs_browser": self.needs_browser(n)} for n in range(self.articles)}
        return {"ip": self.ip, "url": url, "stories": stories, "hang": url + SPIN_PATH[1:],
                "rendered_pages": 1 + sum(self.needs_browser(n) for n in range(self.articles))}
