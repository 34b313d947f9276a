"""The Redis key table of ``docs/architecture.md``, generated from ``messaging/keys.py`` (``make readme``).

``messaging.keys`` is the one place that formats a key, so it is also the one place that describes them: each key
is a constant followed by its docstring, or a function that returns an f-string, with its docstring. This module
reads that source (not the running module: attribute docstrings exist only in the source) and turns each key into a
table row: the template with its parameters written ``<param>`` (``{job}:{{{_tag(domain)}}}:queue`` becomes
``<job>:{<domain>}:queue``), the Redis type (the docstring's words before the first colon) and the rest of the
docstring. SCAN patterns (a ``*`` in the template) and helpers that return no key are left out; the ``# --- … ---``
comments of the module become the table's sections.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

KEYS_SOURCE = Path(__file__).resolve().parents[1] / "messaging" / "keys.py"
MARKERS = re.compile(r"(<!-- redis-keys:start -->\n).*(<!-- redis-keys:end -->)", re.S)
SECTION = re.compile(r"^# --- (.+?) -+$")


@dataclass(frozen=True)
class KeyRow:
    section: str
    name: str  # ``SEEDS`` or ``queue(job, domain)``
    template: str  # ``<job>:{<domain>}:queue``
    kind: str  # zset, hash, string with TTL, …
    what: str


def key_rows(source: str | None = None) -> list[KeyRow]:
    """Every key of ``messaging/keys.py``, in source order."""
    text = KEYS_SOURCE.read_text() if source is None else source
    tree = ast.parse(text)
    constants = {
        node.targets[0].id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }
    sections = [(number, match.group(1)) for number, line in enumerate(text.splitlines(), 1)
                if (match := SECTION.match(line))]
    rows: list[KeyRow] = []
    for index, node in enumerate(tree.body):
        found = _key_of(node, tree.body[index + 1] if index + 1 < len(tree.body) else None, constants)
        if found is None:
            continue
        name, template, doc = found
        if "*" in template or name.startswith("_"):
            continue
        if not doc:
            raise ValueError(f"messaging/keys.py: {name} has no docstring (the key table needs one)")
        kind, _, what = doc.partition(": ")
        section = next((title for number, title in reversed(sections) if number < node.lineno), "")
        rows.append(KeyRow(section, name, template, kind, " ".join(what.split())))
    return rows


def markdown(rows: list[KeyRow] | None = None) -> str:
    """The table in Markdown, one block per section of ``messaging/keys.py``."""
    out: list[str] = []
    section = None
    for row in key_rows() if rows is None else rows:
        if row.section != section:
            section = row.section
            out += ["", f"**{section}**", "", "| key | type | what | `messaging.keys` |", "|---|---|---|---|"]
        what = row.what.replace("|", "\\|")
        out.append(f"| `{row.template}` | {row.kind} | {what} | `{row.name}` |")
    return "\n".join(out).lstrip("\n") + "\n"


def update(path: Path) -> bool:
    """Rewrite the table between the ``redis-keys`` markers of ``path``; whether anything changed."""
    text = path.read_text()
    new = MARKERS.sub(lambda m: m.group(1) + markdown() + m.group(2), text)
    path.write_text(new)
    return new != text


def _key_of(node: ast.stmt, following: ast.stmt | None,
            constants: dict[str, str]) -> tuple[str, str, str] | None:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        name = node.targets[0].id
        if name not in constants or not name.isupper():
            return None
        doc = ""
        if (isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)):
            doc = following.value.value
        return name, constants[name], doc
    if isinstance(node, ast.FunctionDef):
        returned = [stmt.value for stmt in node.body if isinstance(stmt, ast.Return)]
        if len(returned) != 1 or not isinstance(returned[0], ast.JoinedStr):
            return None
        params = ", ".join(arg.arg for arg in node.args.args)
        return f"{node.name}({params})", _template(returned[0], constants), ast.get_docstring(node) or ""
    return None


def _template(joined: ast.JoinedStr, constants: dict[str, str]) -> str:
    parts: list[str] = []
    for value in joined.values:
        if isinstance(value, ast.Constant):
            parts.append(str(value.value))
            continue
        assert isinstance(value, ast.FormattedValue)  # an f-string holds text and formatted values only
        expr = value.value  # a parameter, a module constant, or a checker called on a parameter
        if isinstance(expr, ast.Call) and expr.args:
            expr = expr.args[0]
        if isinstance(expr, ast.Name) and expr.id in constants:
            parts.append(constants[expr.id])
        elif isinstance(expr, ast.Name):
            parts.append(f"<{expr.id}>")
        else:
            parts.append(f"<{ast.unparse(expr)}>")
    return "".join(parts)
