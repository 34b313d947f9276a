"""The README stays true: its configuration table is the settings registry's (``crawlfleet settings --markdown``)."""

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from deploy.cli import main

pytestmark = pytest.mark.unit

README = Path(__file__).resolve().parents[2] / "README.md"


def test_settings_table_matches_the_registry():
    table = re.search(r"<!-- settings-table:start -->\n(.*)<!-- settings-table:end -->", README.read_text(), re.S)
    assert table, "README lost its settings-table markers"
    expected = CliRunner().invoke(main, ["settings", "--markdown"]).output
    assert table.group(1) == expected, "README settings table is stale: run `make readme`"
