"""The Markdown main text on the extraction-dev set: text, structure, cost (``bench.extraction --markdown``).

Three figures per extractor that writes Markdown (crawlfleet, and trafilatura's ``output_format="markdown"`` in the
same run):

- **text**: the Markdown rendered by a CommonMark parser (markdown-it-py, with GitHub's tables) and read as text,
  scored like the text field (``bench.extraction_score``); for crawlfleet next to the F1 of its ``text`` field;
- **structure**: the page's own headings (``<h1>``–``<h6>``), list items (``<li>``) and data-table cells (``<td>``/
  ``<th>`` of a table with a row of two cells or more) whose text is in the page's reference text (two tokens or
  more, a contiguous run of the reference's tokens) are the structure the reference has. Recall: how many of them
  the rendered Markdown has as an element of the same kind (same tokens, or one holding the other with at least
  80 % of its tokens); precision: how many of the Markdown's headings, items and cells have their text in the
  reference. Summed over pages, per kind;
- **cost** (crawlfleet only): CPU time of :func:`spiders.extraction.markdown.render_markdown` against the CPU time
  of the whole extraction (``extract`` without Markdown) of the same page: the sum over pages and the median ratio.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from selectolax.lexbor import LexborHTMLParser

from bench.extraction_score import GroupScore, PageScore, aggregate, score_page, tokenize
from spiders.encoding import decode_html

KINDS = {"heading": ("h1", "h2", "h3", "h4", "h5", "h6"), "list": ("li",), "table": ("td", "th")}
_MAX_ELEMENTS = 300  # per page and kind: a huge listing weighs no more than a few pages
_parser = MarkdownIt("commonmark").enable("table")


def markdown_text(markdown: str) -> str:
    """What a reader of the rendered Markdown reads (markdown-it-py's HTML, its text nodes joined)."""
    if not markdown.strip():
        return ""
    document = LexborHTMLParser(_parser.render(markdown))
    body = document.body
    return body.text(deep=True, separator="") if body is not None else ""


def _key(text: str) -> tuple[str, ...]:
    return tuple(tokenize(text))


def _elements(html: str, data_tables_only: bool) -> dict[str, list[tuple[str, ...]]]:
    """Token keys of the headings, list items and table cells of an HTML document."""
    document = LexborHTMLParser(html)
    found: dict[str, list[tuple[str, ...]]] = {}
    for kind, tags in KINDS.items():
        keys = []
        for node in document.css(",".join(tags)):
            if kind == "table" and data_tables_only and not _in_data_table(node):
                continue
            key = _key(node.text(deep=True, separator=" "))
            if key:
                keys.append(key)
            if len(keys) >= 4 * _MAX_ELEMENTS:
                break
        found[kind] = keys
    return found


def _in_data_table(cell) -> bool:
    row = cell.parent
    if row is None or row.tag != "tr":
        return False
    return sum(1 for child in row.iter() if child.tag in ("td", "th")) >= 2


def _holds(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Whether token run ``b`` occurs in ``a``."""
    return len(b) <= len(a) and f" {' '.join(b)} " in f" {' '.join(a)} "


def _same(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    if a == b:
        return True
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    return 5 * len(short) >= 4 * len(long) and _holds(long, short)


@dataclass
class StructureScore:
    """Counts per kind: reference elements, of them found; output elements, of them in the reference."""

    wanted: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    found: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    given: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    right: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def recall(self, kind: str) -> float:
        return self.found[kind] / self.wanted[kind] if self.wanted[kind] else 0.0

    def precision(self, kind: str) -> float:
        return self.right[kind] / self.given[kind] if self.given[kind] else 0.0

    def add(self, reference_elements: dict[str, list[tuple[str, ...]]], reference: tuple[str, ...],
            markdown: str) -> None:
        output = _elements(_parser.render(markdown), data_tables_only=False) if markdown.strip() else {}
        for kind in KINDS:
            wanted = [k for k in reference_elements.get(kind, ()) if len(k) >= 2 and _holds(reference, k)]
            wanted = wanted[:_MAX_ELEMENTS]
            given = output.get(kind, [])[:_MAX_ELEMENTS]
            given_set = set(given)
            self.wanted[kind] += len(wanted)
            self.found[kind] += sum(1 for k in wanted if k in given_set or any(_same(k, g) for g in given))
            self.given[kind] += len(given)
            self.right[kind] += sum(1 for g in given if _holds(reference, g))


@dataclass
class MarkdownRun:
    name: str
    text_scores: list[PageScore] = field(default_factory=list)  # the text field (crawlfleet only)
    markdown_scores: list[PageScore] = field(default_factory=list)  # the Markdown read as text
    structure: StructureScore = field(default_factory=StructureScore)
    extract_cpu_ms: list[float] = field(default_factory=list)
    render_cpu_ms: list[float] = field(default_factory=list)

    def text_f1(self) -> GroupScore | None:
        return aggregate(self.text_scores) if self.text_scores else None

    def markdown_f1(self) -> GroupScore:
        return aggregate(self.markdown_scores)

    def cost(self) -> tuple[float, float]:
        """Render CPU over extraction CPU: summed over pages, and the median of the per-page ratios."""
        total = sum(self.render_cpu_ms) / sum(self.extract_cpu_ms) if sum(self.extract_cpu_ms) else 0.0
        ratios = [r / e for r, e in zip(self.render_cpu_ms, self.extract_cpu_ms, strict=True) if e > 0]
        return total, statistics.median(ratios) if ratios else 0.0


def _cpu(function, *args, **kwargs):
    start = time.process_time()
    result = function(*args, **kwargs)
    return result, (time.process_time() - start) * 1000


def run_markdown(pages, compare: bool = True, repeat: int = 1) -> list[MarkdownRun]:
    """Score crawlfleet's Markdown (and trafilatura's, with ``compare``) on ``pages`` (``bench.extraction.Page``)."""
    from spiders.extraction import extract, prepare, select
    from spiders.extraction.markdown import render_markdown

    ours = MarkdownRun("crawlfleet")
    theirs = MarkdownRun("trafilatura")
    if compare:
        import trafilatura
    for page in pages:
        html, _ = decode_html(page.body)
        reference = _key(page.reference)
        elements = _elements(html, data_tables_only=True)
        url = page.url or None
        result = extract(page.body, url=url, markdown=True)
        ours.text_scores.append(score_page(result["text"], page.reference))
        ours.markdown_scores.append(score_page(markdown_text(result["markdown"]), page.reference))
        ours.structure.add(elements, reference, result["markdown"])
        extract_ms = render_ms = float("inf")
        for _ in range(max(1, repeat)):  # the fastest of ``repeat`` runs of each, as bench.extraction times
            extract_ms = min(extract_ms, _cpu(extract, page.body, url=url)[1])
            prepared = prepare(decode_html(page.body)[0], url=url)
            selected = select(prepared)
            render_ms = min(render_ms, _cpu(render_markdown, prepared.blocks, selected, prepared.tree, url)[1])
        ours.extract_cpu_ms.append(extract_ms)
        ours.render_cpu_ms.append(render_ms)
        if compare:
            markdown = trafilatura.extract(html, url=url, output_format="markdown", include_formatting=True,
                                           include_tables=True, include_links=True) or ""
            theirs.markdown_scores.append(score_page(markdown_text(markdown), page.reference))
            theirs.structure.add(elements, reference, markdown)
    return [ours, theirs] if compare else [ours]


def print_markdown(runs: list[MarkdownRun]) -> None:
    print("\nMarkdown (rendered by markdown-it-py, read as text; structure: recall / precision per kind)")
    for run in runs:
        text = run.text_f1()
        text_part = f"text F1 {text.f1:.4f}, " if text else ""
        print(f"{run.name}: {text_part}Markdown-as-text F1 {run.markdown_f1().f1:.4f}")
        for kind in KINDS:
            s = run.structure
            print(f"  {kind:<8} recall {s.recall(kind):.3f} ({s.found[kind]}/{s.wanted[kind]}), "
                  f"precision {s.precision(kind):.3f} ({s.right[kind]}/{s.given[kind]})")
        if run.extract_cpu_ms:
            total, median = run.cost()
            print(f"  render cost: {100 * total:.1f} % of the extraction's CPU time summed over pages, "
                  f"median per page {100 * median:.1f} % (extraction median "
                  f"{statistics.median(run.extract_cpu_ms):.2f} ms, render median "
                  f"{statistics.median(run.render_cpu_ms):.2f} ms)")


def summary(runs: list[MarkdownRun]) -> dict:
    out = {}
    for run in runs:
        entry = {"markdown_f1": round(run.markdown_f1().f1, 4),
                 "structure_recall": {k: round(run.structure.recall(k), 3) for k in KINDS},
                 "structure_precision": {k: round(run.structure.precision(k), 3) for k in KINDS}}
        text = run.text_f1()
        if text:
            entry["text_f1"] = round(text.f1, 4)
        if run.extract_cpu_ms:
            total, median = run.cost()
            entry["render_cost_share"] = round(total, 4)
            entry["render_cost_median_share"] = round(median, 4)
        out[run.name] = entry
    return out
