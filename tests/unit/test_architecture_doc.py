"""docs/architecture.md stays true: its Redis key table is messaging/keys.py's (``make readme``)."""

import re
from pathlib import Path

import pytest

from deploy import keytable

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
OLD = "ARCHITECTURE" + ".md"  # the contract this document grew from, outside the repository


def test_key_table_matches_messaging_keys():
    table = re.search(r"<!-- redis-keys:start -->\n(.*)<!-- redis-keys:end -->", DOC.read_text(), re.S)
    assert table, "docs/architecture.md lost its redis-keys markers"
    assert table.group(1) == keytable.markdown(), "docs/architecture.md key table is stale: run `make readme`"


def test_every_key_template_is_in_the_table():
    rows = {row.name: row for row in keytable.key_rows()}
    assert rows["queue(job, domain)"].template == "<job>:{<domain>}:queue"
    assert rows["queue(job, domain)"].kind == "zset"
    assert rows["intake_seen(digest)"].template == "intake:seen:{seeds}:<digest>"
    assert rows["SEEDS"].template == "seeds"
    assert not any("*" in row.template for row in rows.values()), "SCAN patterns are not keys"
    # every public function of messaging.keys that returns an f-string is a key (or a pattern, left out)
    from messaging import keys
    public = {name for name in dir(keys) if callable(getattr(keys, name)) and not name.startswith(("_", "parse"))}
    documented = {name.partition("(")[0] for name in rows}
    assert public - documented <= {name for name in public if name.endswith("_pattern")} | {
        "DomainKey", "StatsKey", "InvalidDomain", "host_problem", "dataclass", "annotations"}


def test_a_key_without_a_docstring_is_refused():
    with pytest.raises(ValueError, match="no docstring"):
        keytable.key_rows('def thing(job: str) -> str:\n    return f"thing:{job}"\n')


def test_a_stale_table_is_rewritten(tmp_path):
    doc = tmp_path / "architecture.md"
    doc.write_text("before\n<!-- redis-keys:start -->\nold\n<!-- redis-keys:end -->\nafter\n")
    assert keytable.update(doc)
    assert doc.read_text() == ("before\n<!-- redis-keys:start -->\n" + keytable.markdown()
                               + "<!-- redis-keys:end -->\nafter\n")
    assert not keytable.update(doc)


def test_no_reference_to_the_old_contract_file():
    stale = [str(path.relative_to(ROOT)) for pattern in ("**/*.py", "**/*.md", "**/*.lua")
             for path in ROOT.glob(pattern)
             if ".venv" not in path.parts and OLD in path.read_text(errors="replace")]
    assert stale == [], f"point these at docs/architecture.md: {stale}"
