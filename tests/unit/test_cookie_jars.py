"""A crawl's cookie jar travels through Redis as one JSON per cookie and comes back as the same cookie
(spiders.middlewares.cookies); the workers' round trip through Redis: tests/e2e/test_own_spiders.py."""

from __future__ import annotations

import pytest
from scrapy import Request
from scrapy.http import Response
from scrapy.http.cookies import CookieJar

from spiders.middlewares.cookies import cookie_field, cookie_from_json, cookie_json, jar_snapshot

pytestmark = pytest.mark.unit


def test_a_cookie_comes_back_as_it_went_and_a_jar_as_its_cookies() -> None:
    jar = CookieJar()
    request = Request("http://shop.test/login")
    response = Response(request.url, headers={"Set-Cookie": ["session=s3cr3t; Path=/; HttpOnly",
                                                             "lang=en; Domain=shop.test; Max-Age=3600"]})
    jar.extract_cookies(response, request)
    snapshot = jar_snapshot(jar)
    assert len(snapshot) == 2
    again = CookieJar()
    for raw in snapshot.values():
        again.jar.set_cookie(cookie_from_json(raw))
    assert jar_snapshot(again) == snapshot
    follow = Request("http://shop.test/account")
    again.add_cookie_header(follow)
    assert sorted(follow.headers[b"Cookie"].decode().split("; ")) == ["lang=en", "session=s3cr3t"]
    for cookie in jar.jar:
        assert cookie_from_json(cookie_json(cookie)).__dict__ == cookie.__dict__
        assert cookie_field(cookie).endswith(f" {cookie.path} {cookie.name}")
