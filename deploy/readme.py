"""Regenerate the README's configuration table from the settings registry (``make readme``)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from click.testing import CliRunner

from deploy.cli import main

MARKERS = re.compile(r"(<!-- settings-table:start -->\n).*(<!-- settings-table:end -->)", re.S)


def update(path: Path) -> bool:
    table = CliRunner().invoke(main, ["settings", "--markdown"]).output
    text = path.read_text()
    new = MARKERS.sub(lambda m: m.group(1) + table + m.group(2), text)
    path.write_text(new)
    return new != text


if __name__ == "__main__":
    changed = update(Path(sys.argv[1] if len(sys.argv) > 1 else "README.md"))
    print("README settings table updated" if changed else "README settings table already current")
