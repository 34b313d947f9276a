"""The recipes of docs/extending.md, each with a toy one: a pipeline, a request kind's plugins and a setting are
written into a temporary directory and plugged in the way the recipe says; a spider type and a manager page are
held to the registries that tie their parts together (see also tests/unit/test_spider_types.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from unittest.mock import MagicMock

import pytest
from scrapy.utils.conf import build_component_list

from manager import pages, website
from messaging import request_kinds
from messaging import settings as settings_module
from messaging.kafka_monitor.plugins import Plugin as KafkaPlugin
from messaging.plugins import load_plugins
from messaging.redis_monitor.plugins import Plugin as RedisPlugin
from messaging.settings import SETTINGS, define, load
from tests.unit.test_addon import applied

pytestmark = pytest.mark.unit
DOC = Path(__file__).resolve().parents[2] / "docs" / "extending.md"

TOY_PIPELINE = '''
class ToyPipeline:
    """Counts the items it sees (a pipeline of the recipe: from_crawler, process_item without spider)."""

    def __init__(self):
        self.seen = 0

    @classmethod
    def from_crawler(cls, crawler):
        return cls()

    def process_item(self, item):
        self.seen += 1
        return {**item, "toy": True}
'''

TOY_KIND = '''
from messaging.kafka_monitor.plugins import Plugin
from messaging.redis_monitor.plugins import Plugin as AnswerPlugin
from messaging.request_kinds import RequestKind

TOY = RequestKind("toy", "info.json", "a toy", "toy_kind.ToyKafkaPlugin", actions=("toy",),
                  redis_plugin="toy_kind.ToyAnswerPlugin")


class ToyKafkaPlugin(Plugin):
    name = "toy"
    kinds = frozenset({"toy"})

    def handle(self, request, batch):
        batch.store(request, f"toy:{{requests}}:{request.data['userid']}:{request.data['uuid']}")


class ToyAnswerPlugin(AnswerPlugin):
    name = "toy"
    kind = "toy"

    def handle(self, key, request, context):
        return {"echo": request["userid"]}
'''


@pytest.fixture
def toy_tree(tmp_path, monkeypatch):
    """A temporary directory on sys.path holding the toy modules (unloaded afterwards)."""
    (tmp_path / "toy_pipeline.py").write_text(TOY_PIPELINE)
    (tmp_path / "toy_kind.py").write_text(TOY_KIND)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("toy_pipeline", "toy_kind"):
        sys.modules.pop(name, None)


def test_the_guide_names_files_that_exist():
    text = DOC.read_text()
    root = DOC.parents[1]
    for path in ("messaging/spider_types.py", "messaging/request_kinds.py", "messaging/schemas/crawl.json",
                 "spiders/addon.py",
                 "spiders/spiders/base.py", "messaging/validation.py", "messaging/keys.py", "deploy/cli_messaging.py",
                 "manager/gateway.py", "manager/templates/base.html", "messaging/settings.py"):
        dotted = path.removesuffix(".py").replace("/", ".")
        assert (path in text or dotted in text) and (root / path).exists(), path
    assert "](references.md)" in text and (root / "docs" / "references.md").exists()


def test_a_pipeline_plugged_in_beside_the_add_on_runs_in_its_place(toy_tree):
    from spiders.spiders.universal import UniversalSpider

    class WithToy(UniversalSpider):
        custom_settings = {"ITEM_PIPELINES": {"toy_pipeline.ToyPipeline": 450}}

    order = build_component_list(applied(WithToy).getwithbase("ITEM_PIPELINES"))
    assert order.index("spiders.pipelines.extract.ExtractPipeline") < order.index("toy_pipeline.ToyPipeline")
    assert order.index("toy_pipeline.ToyPipeline") < order.index("spiders.pipelines.mongo.MongoPipeline")
    from toy_pipeline import ToyPipeline

    pipeline = ToyPipeline.from_crawler(None)
    assert pipeline.process_item({"url": "http://a.example/"})["toy"] and pipeline.seen == 1


def test_a_request_kind_plugs_into_both_monitors_by_its_registry_entry(toy_tree):
    s = load({"CRAWLFLEET_RUN_DIR": str(toy_tree), "CRAWLFLEET_REQUEST_KINDS": "toy_kind:TOY"})
    try:
        kafka = load_plugins(request_kinds.kafka_chain(s))
        redis = load_plugins(request_kinds.redis_chain(s))
    finally:
        request_kinds.unregister("toy")
    assert all(isinstance(plugin, KafkaPlugin) for plugin in kafka) and kafka[-1].kinds == {"toy"}
    assert all(isinstance(plugin, RedisPlugin) for plugin in redis) and redis[-1].kind == "toy"
    assert len({plugin.name for plugin in redis}) == len(redis)  # its counter is its own
    batch = MagicMock()
    request = MagicMock(data={"userid": "u", "uuid": "1"})
    kafka[-1].handle(request, batch)
    batch.store.assert_called_once_with(request, "toy:{requests}:u:1")
    assert redis[-1].handle("toy:{requests}:u:1", {"userid": "u"}, MagicMock()) == {"echo": "u"}


@pytest.fixture
def toy_setting():
    yield "CRAWLFLEET_TOY_LIMIT"
    SETTINGS.pop("CRAWLFLEET_TOY_LIMIT", None)  # the toy leaves the registry as it was


def test_a_new_setting_is_an_environment_variable_and_an_attribute(tmp_path, monkeypatch, toy_setting):
    define("CRAWLFLEET_TOY_LIMIT", 3, "A toy limit.", group="toy", parse=int)
    with pytest.raises(ValueError, match="declared twice"):
        define("CRAWLFLEET_TOY_LIMIT", 4, "again", group="toy")
    assert settings_module.default("CRAWLFLEET_TOY_LIMIT") == 3
    assert load({"CRAWLFLEET_RUN_DIR": str(tmp_path)}).toy_limit == 3
    configured = load({"CRAWLFLEET_RUN_DIR": str(tmp_path), "CRAWLFLEET_TOY_LIMIT": "7"})
    assert configured.toy_limit == 7 and configured.source("CRAWLFLEET_TOY_LIMIT") == "env"
    from spiders.fleet_settings import crawlfleet_settings

    monkeypatch.setenv("CRAWLFLEET_RUN_DIR", str(tmp_path))
    assert crawlfleet_settings({"CRAWLFLEET_TOY_LIMIT": "9"}).toy_limit == 9  # -s CRAWLFLEET_TOY_LIMIT=9


def test_every_manager_tab_is_routed_and_has_its_template():
    manager = MagicMock()
    manager.config.logs_dir = Path("/nonexistent")
    root = website.Root(manager)
    for name in pages.PAGES:
        assert name.encode() in root.children, name
        page = root.children[name.encode()]
        assert (pages.HERE / "templates" / page.template).is_file(), page.template
