"""The README and its two generated documents stay true: ``docs/settings.md``'s table is the settings registry's
(``crawlfleet settings --markdown``), ``docs/benchmarks.md`` names every benchmark command of ``bench/``, and the
README links both."""

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from deploy.cli import main

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SETTINGS = ROOT / "docs" / "settings.md"
BENCHMARKS = ROOT / "docs" / "benchmarks.md"


def test_settings_table_matches_the_registry():
    table = re.search(r"<!-- settings-table:start -->\n(.*)<!-- settings-table:end -->", SETTINGS.read_text(), re.S)
    assert table, "docs/settings.md lost its settings-table markers"
    expected = CliRunner().invoke(main, ["settings", "--markdown"]).output
    assert table.group(1) == expected, "docs/settings.md's settings table is stale: run `make readme`"


def test_every_benchmark_command_is_in_the_benchmarks_table():
    commands = sorted(path.stem for path in (ROOT / "bench").glob("*.py")
                      if path.stem != "__main__" and '"--json"' in path.read_text())
    table = BENCHMARKS.read_text()
    missing = [name for name in commands if f"`python -m bench.{name}" not in table]
    assert commands and not missing, f"docs/benchmarks.md has no row for: {missing}"


def test_the_readme_links_its_generated_documents():
    text = README.read_text()
    assert "](docs/settings.md)" in text and "](docs/benchmarks.md)" in text
    assert "settings-table:start" not in text, "the settings table lives in docs/settings.md now"
