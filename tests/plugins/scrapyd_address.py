"""A pytest plugin for scrapyd's own integration tests (``pytest -p scrapyd_address``, with this directory on
``PYTHONPATH``): they address
scrapyd at ``http://127.0.0.1:6800``, fixed in their code; this sends those requests to the manager under test at
``$SCRAPYD_TESTS_URL`` instead (a free port: another test's manager, or a real scrapyd, may hold 6800 on a shared
machine). Only the scheme, host and port change; method, path, query, headers, body and credentials go as the tests
wrote them, so the tests run unchanged.
"""

from __future__ import annotations

import os
from typing import Any

import requests

SCRAPYD = "http://127.0.0.1:6800"
TARGET = os.environ["SCRAPYD_TESTS_URL"].rstrip("/")
_request = requests.Session.request


def _redirected(self: requests.Session, method: str, url: str, *args: Any, **kwargs: Any) -> requests.Response:
    if url == SCRAPYD or url.startswith(SCRAPYD + "/"):
        url = TARGET + url[len(SCRAPYD):]
    return _request(self, method, url, *args, **kwargs)


requests.Session.request = _redirected  # type: ignore[method-assign]
