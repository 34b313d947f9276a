"""One spider-type registry (messaging.spider_types): the crawl schema, validation, the manager, the CLI and the
fleet all read it, and each registered type has its spider and its rule schema."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from click.testing import CliRunner
from scrapy.utils.misc import load_object

from deploy import cli_fleet, cli_worker
from deploy import fleet as local_fleet
from manager import pages, sites
from messaging import spider_types, validation
from messaging.spider_types import NAMES, REGISTRY

pytestmark = pytest.mark.unit


def crawl_schema() -> dict:
    return json.loads(resources.files("messaging.schemas").joinpath("crawl.json").read_text())


def test_the_crawl_schema_names_exactly_the_registered_types_with_their_rule_schemas():
    schema = crawl_schema()
    assert schema["properties"]["spider_type"]["enum"] == list(NAMES)
    branches = {branch["if"]["properties"]["spider_type"]["const"]: branch["then"]["properties"]["rule"]["$ref"]
                for branch in schema["allOf"] if "spider_type" in branch["if"].get("properties", {})}
    assert branches == spider_types.rule_files()
    for entry in REGISTRY.values():
        assert resources.files("messaging.schemas").joinpath(entry.rule_schema).is_file(), entry.rule_schema


def test_each_type_has_its_spider_named_after_it():
    for entry in REGISTRY.values():
        assert load_object(entry.spider).name == entry.name
        assert entry.workers >= 0 and entry.summary


def test_validation_manager_cli_and_fleet_read_the_registry():
    assert spider_types.rule_files() == validation.RULE_FILES
    assert pages.SPIDER_TYPES == sites.SPIDER_TYPES == local_fleet.SPIDER_TYPES == NAMES
    worker_help = CliRunner().invoke(cli_worker.worker, ["--help"]).output
    up_help = CliRunner().invoke(cli_fleet.up, ["--help"]).output
    for name in NAMES:
        assert name in worker_help and f"--workers-{name}" in up_help
    assert local_fleet.FleetSpec().workers == spider_types.default_workers()


def test_the_fleet_plans_workers_per_registered_type():
    spec = local_fleet.FleetSpec(workers={name: index + 1 for index, name in enumerate(NAMES)}, masters=1)
    workers = [p for p in local_fleet.plan(spec, "host", {}) if p.role == "worker"]
    assert [p.spider for p in workers] == [name for index, name in enumerate(NAMES) for _ in range(index + 1)]


def test_an_unknown_type_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown spider type 'news': one of list, universal"):
        spider_types.spider_type("news")
    with pytest.raises(validation.Rejected, match="spider_type"):
        validation.parse_request(json.dumps({"userid": "u", "crawlid": "c", "url": "http://a.example/",
                                             "spider_type": "news", "rule": {}}).encode())
