"""The dupefilter's fingerprint is the cluster's own for the rule spiders: a Scrapy REQUEST_FINGERPRINTER_CLASS is
ignored, loudly; one's own spider's worker keys its requests by the project's fingerprinter (spiders.travel)."""

from __future__ import annotations

import logging

import pytest
from scrapy.utils.request import RequestFingerprinter
from scrapy.utils.test import get_crawler

from spiders.dupefilter import BloomDupeFilter
from spiders.spiders.universal import UniversalSpider

pytestmark = pytest.mark.unit
PROJECT_FINGERPRINTER = f"{__name__}.ByBody"


class ByBody(RequestFingerprinter):
    """A project's own fingerprinter, as a Scrapy project might set one."""


def dupefilter(tmp_path, settings: dict, spider: type = UniversalSpider) -> BloomDupeFilter:
    # redis-py connects on first use: building the dupefilter needs no Redis
    crawler = get_crawler(spider, settings_dict={"CRAWLFLEET_RUN_DIR": str(tmp_path), **settings})
    return BloomDupeFilter.from_crawler(crawler)


def test_a_project_fingerprinter_is_named_in_a_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="spiders.dupefilter"):
        dupefilter(tmp_path, {"REQUEST_FINGERPRINTER_CLASS": PROJECT_FINGERPRINTER}).close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert PROJECT_FINGERPRINTER in warnings[0] and "ignores it" in warnings[0]


def test_scrapys_default_fingerprinter_warns_nothing(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="spiders.dupefilter"):
        dupefilter(tmp_path, {}).close()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_one_s_own_spider_uses_its_fingerprinter_without_a_warning(tmp_path, caplog):
    from scrapy import Spider

    with caplog.at_level(logging.WARNING, logger="spiders.dupefilter"):
        dupefilter(tmp_path, {"REQUEST_FINGERPRINTER_CLASS": PROJECT_FINGERPRINTER}, Spider).close()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
