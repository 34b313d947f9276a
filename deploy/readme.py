"""Regenerate the generated tables of the docs (``make readme``): the README's configuration table from the
settings registry, and the Redis key table of ``docs/architecture.md`` from ``messaging/keys.py``
(:mod:`deploy.keytable`)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from click.testing import CliRunner

from deploy import keytable
from deploy.cli import main

MARKERS = re.compile(r"(<!-- settings-table:start -->\n).*(<!-- settings-table:end -->)", re.S)
ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def update(path: Path) -> bool:
    table = CliRunner().invoke(main, ["settings", "--markdown"]).output
    text = path.read_text()
    new = MARKERS.sub(lambda m: m.group(1) + table + m.group(2), text)
    path.write_text(new)
    return new != text


if __name__ == "__main__":
    readme = Path(sys.argv[1] if len(sys.argv) > 1 else "README.md")
    architecture = Path(sys.argv[2]) if len(sys.argv) > 2 else ARCHITECTURE
    print("README settings table updated" if update(readme) else "README settings table already current")
    print("docs/architecture.md key table updated" if keytable.update(architecture)
          else "docs/architecture.md key table already current")
