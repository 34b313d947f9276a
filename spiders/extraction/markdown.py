"""The main text as CommonMark: the extractor's selected blocks, with the structure the page gave them.

:func:`render_markdown` takes what :func:`spiders.extraction.select` chose and writes each block as the element it
sits in says: ``<h1>``–``<h6>`` as ATX headings, ``<li>`` as list items (ordered or not, nested by indentation),
``<blockquote>`` as ``>`` quotes, ``<pre>`` as fenced code, the cells of a data table as a pipe table (GitHub's
table extension: CommonMark has none), every other block as a paragraph. Inside a line, links get absolute URLs,
``<strong>``/``<em>`` become ``**``/``*``, ``<code>`` a code span (``inline.py``). Images are optional (only those
inside a line of text: an image alone is no line of the main text).

The text is the extractor's: a line's Markdown is used only when its plain text equals the block's text, else the
block's text is written escaped. So the Markdown, rendered and read as text, has the tokens of the ``text`` field
(a ``<pre>`` is written from its source, with its line breaks, which the text field collapses). A table is a data
table when some row has two or more selected cells and its cells are short (``TABLE_CELL_CHARS`` on average); a
layout table (one column, or cells holding whole articles) gives paragraphs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spiders.extraction.dom import Block, Tree
from spiders.extraction.inline import escape_line_start, escape_text, inline_lines

__all__ = ["TABLE_CELL_CHARS", "render_markdown"]

TABLE_CELL_CHARS = 300
_STRUCTURE = frozenset(("li", "ul", "ol", "blockquote", "pre", "td", "th", "tr", "table"))
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}


@dataclass(slots=True)
class _Context:
    """Where a block element sits: the structural elements around it (innermost first where it matters)."""

    heading: int = 0
    items: list[int] = field(default_factory=list)  # <li> ancestors, outermost first
    quotes: int = 0
    pre: int = -1
    cell: int = -1
    row: int = -1
    table: int = -1


def _context(tree: Tree, element: int) -> _Context:
    context = _Context()
    index = element
    while index >= 0:
        tag = tree.tag(index)
        if tag in _HEADINGS:
            if not context.heading:
                context.heading = _HEADINGS[tag]
        elif tag in _STRUCTURE:
            if tag == "li":
                context.items.insert(0, index)
            elif tag == "blockquote":
                context.quotes += 1
            elif tag == "pre" and context.pre < 0:
                context.pre = index
            elif tag in ("td", "th") and context.cell < 0:
                context.cell = index
            elif tag == "tr" and context.row < 0 and context.cell >= 0:
                context.row = index
            elif tag == "table" and context.table < 0 and context.cell >= 0:
                context.table = index
        index = tree.parent[index]
    return context


class _Renderer:
    def __init__(self, blocks: list[Block], selected: list[Block], tree: Tree, base: str | None, images: bool):
        self.tree = tree
        self.base = base
        self.images = images
        self.contexts: dict[int, _Context] = {}
        self.markers: dict[int, str] = {}
        self.lines = self._lines(blocks, selected)

    def _lines(self, blocks: list[Block], selected: list[Block]) -> dict[int, str]:
        """The inline Markdown of each selected block, by block index (its text, escaped, when the walk differs)."""
        wanted = {block.element for block in selected}
        ordinal: dict[int, int] = {}  # the n-th block of each wanted element
        position: dict[int, int] = {}
        for block in blocks:
            if block.element in wanted:
                n = ordinal.get(block.element, 0)
                ordinal[block.element] = n + 1
                position[block.index] = n
        rendered: dict[int, list] = {}
        lines = {}
        for block in selected:
            element_lines = rendered.get(block.element)
            if element_lines is None:
                try:
                    element_lines = inline_lines(self.tree.nodes[block.element], self.base, self.images)
                except Exception:  # never lose the text to a rendering bug: the block's text is written escaped
                    element_lines = []
                rendered[block.element] = element_lines
            n = position.get(block.index, -1)
            line = element_lines[n] if 0 <= n < len(element_lines) else None
            lines[block.index] = (
                line.markdown if line is not None and line.text == block.text
                else escape_line_start(escape_text(block.text))
            )
        return lines

    def context(self, element: int) -> _Context:
        context = self.contexts.get(element)
        if context is None:
            context = self.contexts[element] = _context(self.tree, element)
        return context

    def marker(self, item: int) -> str:
        """``- `` or ``N. `` for a list item (N counted among its list's items, from the list's ``start``)."""
        marker = self.markers.get(item)
        if marker is None:
            tree = self.tree
            parent = tree.parent[item]
            if parent >= 0 and tree.tag(parent) == "ol":
                try:
                    number = int(tree.nodes[parent].attributes.get("start") or 1)
                except ValueError:
                    number = 1
                for child in tree.children(parent):
                    if tree.tag(child) == "li":
                        self.markers[child] = f"{max(0, min(number, 999_999_999))}. "
                        number += 1
            else:
                for child in tree.children(parent) if parent >= 0 else (item,):
                    self.markers[child] = "- "
            marker = self.markers.setdefault(item, "- ")
        return marker


def _groups(renderer: _Renderer, selected: list[Block]) -> tuple[dict[int, list[Block]], dict[int, list[Block]]]:
    """The selected blocks of each table and of each ``<pre>``, in order."""
    tables: dict[int, list[Block]] = {}
    pres: dict[int, list[Block]] = {}
    for block in selected:
        context = renderer.context(block.element)
        if context.table >= 0:
            tables.setdefault(context.table, []).append(block)
        if context.pre >= 0:
            pres.setdefault(context.pre, []).append(block)
    return tables, pres


def _data_tables(renderer: _Renderer, tables: dict[int, list[Block]]) -> set[int]:
    """The tables of the selection that are data tables (see the module docstring)."""
    cells: dict[int, dict[int, set[int]]] = {}  # table -> row -> cells
    chars: dict[int, list[int]] = {}  # table -> [characters, cells]
    seen_cells: set[int] = set()
    for block in (block for members in tables.values() for block in members):
        context = renderer.context(block.element)
        cells.setdefault(context.table, {}).setdefault(context.row, set()).add(context.cell)
        totals = chars.setdefault(context.table, [0, 0])
        totals[0] += block.chars
        if context.cell not in seen_cells:
            seen_cells.add(context.cell)
            totals[1] += 1
    return {
        table for table, rows in cells.items()
        if max(len(row) for row in rows.values()) >= 2 and chars[table][0] <= TABLE_CELL_CHARS * chars[table][1]
    }


def _table(renderer: _Renderer, blocks: list[Block]) -> list[str]:
    """A pipe table of a data table's selected cells: rows and cells in document order, the first row the header."""
    rows: dict[int, dict[int, list[str]]] = {}
    for block in blocks:
        context = renderer.context(block.element)
        rows.setdefault(context.row, {}).setdefault(context.cell, []).append(renderer.lines[block.index])
    table: list[list[str]] = []
    for row in sorted(rows):
        cells = []
        for cell in sorted(rows[row]):
            cells.append(" ".join(rows[row][cell]).replace("|", "\\|"))
            span = renderer.tree.nodes[cell].attributes.get("colspan") or ""
            if span.isdigit() and 1 < int(span) <= 50:
                cells.extend([""] * (int(span) - 1))
        table.append(cells)
    width = max(len(cells) for cells in table)
    lines = []
    for number, cells in enumerate(table):
        cells = cells + [""] * (width - len(cells))
        lines.append("| " + " | ".join(cells) + " |")
        if number == 0:
            lines.append("|" + " --- |" * width)
    return lines


@dataclass(slots=True)
class _Unit:
    lines: list[str]
    quotes: int
    item_list: int = -1  # the list (parent of the <li>) of a list item: consecutive items stay tight
    interrupts: bool = False  # a list's first item that may follow a paragraph line: "- " or "1. " (CommonMark 5.2)


def _join(units: list[_Unit]) -> str:
    out: list[str] = []
    previous: _Unit | None = None
    for unit in units:
        prefix = "> " * unit.quotes
        if previous is not None:
            tight = (unit.item_list >= 0 and previous.item_list >= 0 and unit.quotes == previous.quotes
                     and (unit.item_list == previous.item_list or unit.interrupts))
            if not tight:
                out.append(">" * min(unit.quotes, previous.quotes))
        out.extend(f"{prefix}{line}" if line or not prefix else prefix.rstrip() for line in unit.lines)
        previous = unit
    return "\n".join(out)


def render_markdown(blocks: list[Block], selected: list[Block], tree: Tree, base_url: str | None = None,
                    images: bool = False) -> str:
    """The selected blocks as CommonMark with pipe tables (see the module docstring). ``blocks`` are all the
    page's blocks (to tell which line of its element each selected block is); ``base_url`` makes links absolute."""
    if not selected:
        return ""
    renderer = _Renderer(blocks, selected, tree, base_url, images)
    tables, pres = _groups(renderer, selected)
    data_tables = _data_tables(renderer, tables)
    units: list[_Unit] = []
    done_tables: set[int] = set()
    done_pre: set[int] = set()
    open_items: dict[int, _Unit] = {}  # list item -> its unit, for a second line of the same item
    for block in selected:
        context = renderer.context(block.element)
        line = renderer.lines[block.index]
        if context.table in data_tables:
            if context.table not in done_tables:
                done_tables.add(context.table)
                units.append(_Unit(_table(renderer, tables[context.table]), context.quotes))
            continue
        indent = "".join(" " * len(renderer.marker(item)) for item in context.items[:-1])
        if context.pre >= 0:
            if context.pre not in done_pre:
                done_pre.add(context.pre)
                members = [b.text for b in pres[context.pre]]
                units.append(_Unit(_fenced(tree, context.pre, members, indent), context.quotes))
            continue
        if context.heading:
            line = f"{'#' * context.heading} {line}"
        if not context.items:
            units.append(_Unit([line], context.quotes))
            continue
        item = context.items[-1]
        unit = open_items.get(item)
        marker = renderer.marker(item)
        if unit is not None:  # the item's next line: a continuation, a paragraph of its own after a nested list
            continued = f"{indent}{' ' * len(marker)}{line}"
            if units[-1] is unit:
                unit.lines.append(continued)
            else:
                units.append(_Unit([continued], context.quotes))
            continue
        unit = _Unit([f"{indent}{marker}{line}"], context.quotes, renderer.tree.parent[item], marker in ("- ", "1. "))
        open_items[item] = unit
        units.append(unit)
    return _join(units)


def _fenced(tree: Tree, pre: int, lines: list[str], indent: str) -> list[str]:
    """A fenced code block of a ``<pre>``: its source text (line breaks and indentation kept) when that is the
    selected lines' text, else the selected lines (part of it left out; lines drawn by CSS, not line breaks)."""
    source = tree.nodes[pre].text(deep=True).strip("\n")
    if source.split() != " ".join(lines).split():
        source = "\n".join(lines)
    fence = "```"
    while fence in source:
        fence += "`"
    return [f"{indent}{fence}", *(f"{indent}{line}" if line else "" for line in source.split("\n")),
            f"{indent}{fence}"]
