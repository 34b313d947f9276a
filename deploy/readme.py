"""Regenerate what is generated from the registries (``make readme``): the settings table (``docs/settings.md``) and
the typed attributes of the settings (``messaging/settings_fields.py``) from the settings registry, and the Redis key
table of ``docs/architecture.md`` from ``messaging/keys.py`` (:mod:`deploy.keytable`)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from click.testing import CliRunner

from deploy import keytable
from deploy.cli import main
from messaging.settings import SETTINGS

MARKERS = re.compile(r"(<!-- settings-table:start -->\n).*(<!-- settings-table:end -->)", re.S)
ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
SETTINGS_DOC = Path(__file__).resolve().parents[1] / "docs" / "settings.md"
FIELDS = Path(__file__).resolve().parents[1] / "messaging" / "settings_fields.py"
FIELDS_HEADER = '''"""Typed attributes of :class:`messaging.settings.Settings`: one per declared setting.

Generated from ``messaging/settings.py`` by ``make readme``; ``tests/unit/test_settings.py`` fails when it is stale.
Do not edit by hand.
"""

from __future__ import annotations


class SettingsFields:
    """``settings.<name>`` for every ``CRAWLFLEET_<NAME>``, with the type its value has once resolved."""

'''


def settings_fields() -> str:
    """The source of ``messaging/settings_fields.py`` for the settings declared now."""
    return FIELDS_HEADER + "".join(f"    {setting.attribute}: {setting.type.__name__}\n"
                                   for setting in SETTINGS.values())


def update_fields(path: Path = FIELDS) -> bool:
    text = settings_fields()
    changed = not path.exists() or path.read_text() != text
    if changed:
        path.write_text(text)
    return changed


def update(path: Path) -> bool:
    table = CliRunner().invoke(main, ["settings", "--markdown"]).output
    text = path.read_text()
    new = MARKERS.sub(lambda m: m.group(1) + table + m.group(2), text)
    path.write_text(new)
    return new != text


if __name__ == "__main__":
    readme = Path(sys.argv[1]) if len(sys.argv) > 1 else SETTINGS_DOC
    architecture = Path(sys.argv[2]) if len(sys.argv) > 2 else ARCHITECTURE
    print(f"{readme} settings table updated" if update(readme) else f"{readme} settings table already current")
    print("messaging/settings_fields.py updated" if update_fields() else "messaging/settings_fields.py already current")
    print("docs/architecture.md key table updated" if keytable.update(architecture)
          else "docs/architecture.md key table already current")
