"""Names written once: the module names (messaging.modules) and the ZooKeeper paths (messaging.siteconfig.SitePaths)."""

import json
import re
from importlib import resources
from pathlib import Path

import pytest

from messaging import modules
from messaging.siteconfig import SitePaths

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
HOMES = {ROOT / "messaging" / "modules.py", ROOT / "messaging" / "siteconfig.py"}


def test_stats_schema_names_the_same_modules():
    schema = json.loads(resources.files("messaging.schemas").joinpath("stats.json").read_text())
    assert schema["properties"]["stats"]["enum"] == [*modules.STATS_MODULES, modules.ALL]


def test_zookeeper_paths_hang_under_the_root():
    paths = SitePaths("/fleet/")
    assert (paths.sites, paths.defaults, paths.election) == ("/fleet/sites", "/fleet/defaults",
                                                             "/fleet/master/election")
    assert paths.site("example.com") == "/fleet/sites/example.com"


@pytest.mark.parametrize("literal", [r'"/master/election"', r'/master/election"', r'"kafka-monitor"',
                                     r'"redis-monitor"', r'STATS_MODULE = "master"', r'MODULES = \('])
def test_messaging_and_master_spell_each_name_once(literal):
    """Outside their home module, the messaging and master floors use the constants, not the strings."""
    spelled = [str(path.relative_to(ROOT)) for floor in ("messaging", "master") for path in (ROOT / floor).rglob("*.py")
               if path not in HOMES and re.search(literal, path.read_text())]
    assert spelled == [], f"{literal} spelled again in {spelled}"
